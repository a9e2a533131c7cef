"""Models whose tensors sit on the meta device, which holds shapes and no values: built empty
(``accelerate.init_empty_weights()``, ``device="meta"``) or offloaded (a hook such as accelerate's swaps the real
weights in for each call and puts meta placeholders back after it).

``CallTimeWatch`` follows the ops of one forward: it names the parameters a module used that it did not hold when
the forward began (swapped in), and, for the explorer's own runs, runs on meta every op that mixes meta tensors with
others (torch's CPU linear and convolution would make up values from a meta weight, or raise).
"""

from __future__ import annotations

import contextlib
import operator
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .modules import modules_of


def no_values(needs: str, where: str) -> str:
    """The refusal of ``needs`` (e.g. ``"first_nonfinite()"``) when ``where`` (e.g. ``"the model's output"``) is on the
    meta device."""
    return (
        f"{needs} needs values, but {where} is on the meta device, which holds shapes and no values: the model's "
        "weights are meta (built under accelerate.init_empty_weights() or on device='meta'); load them first "
        "(model.to_empty(device='cpu') and load_state_dict, or accelerate's load_checkpoint_and_dispatch). The tree, "
        "its output shapes and forward hooks (capturing meta tensors) work as they are"
    )


def holds_meta(model: nn.Module) -> bool:
    """Whether a parameter or buffer of ``model`` is on the meta device now."""
    return any_meta([t for m in modules_of(model) for g in (m._parameters, m._buffers) if g for t in g.values()])


_meta_flag = operator.attrgetter("is_meta")  # no Python frame a tensor: every run of the explorer asks


def any_meta(tensors: Sequence[torch.Tensor | None]) -> bool:
    """Whether one of ``tensors`` (None entries allowed) is on the meta device."""
    return any(map(_meta_flag, filter(_not_none, tensors)))


def _not_none(value: Any) -> bool:
    return value is not None


def is_meta(value: Any) -> bool:
    """Whether ``value`` is a tensor on the meta device."""
    return isinstance(value, torch.Tensor) and value.is_meta


class CallTimeWatch(TorchFunctionMode):
    """During one forward of ``model``: ``swapped`` maps ``id(parameter)`` to ``(weakref, name)`` for each parameter
    an op used that the model did not hold when the forward began, named where a module held it at that moment
    (``names``: all those names);
    with ``to_meta``, an op given meta tensors and others runs with all of them on meta."""

    def __init__(self, model: nn.Module, to_meta: bool) -> None:
        super().__init__()
        self.to_meta = to_meta
        self.swapped: dict[int, tuple[weakref.ref[nn.Parameter], str]] = {}
        self.names: set[str] = set()  # every name in ``swapped`` so far (an id freed and taken again drops its entry)
        self._named = [(path, m) for path, m in model.named_modules() if m._parameters]
        # kept alive, so that no parameter swapped in later can take the id of one swapped out
        self._held = {id(p): p for _, m in self._named for p in m._parameters.values() if p is not None}

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        tensors = _tensors(args, kwargs)
        if tensors:
            for t in tensors:
                if isinstance(t, nn.Parameter) and id(t) not in self._held:
                    seen = self.swapped.get(id(t))
                    if seen is None or seen[0]() is not t:  # an id freed and taken again names the new one
                        self._name(t)
            if self.to_meta and any(t.is_meta for t in tensors) and not all(t.is_meta for t in tensors):
                args, kwargs = _on_meta(args), _on_meta(kwargs)
        return func(*args, **kwargs)

    def _name(self, param: nn.Parameter) -> None:
        for path, module in self._named:
            for name, held in module._parameters.items():
                if held is param:
                    full = f"{path}.{name}" if path else name
                    self.swapped[id(param)] = (weakref.ref(param), full)
                    self.names.add(full)
                    return


_active = threading.local()  # this thread's running watch: (model id, watch)


@contextlib.contextmanager
def call_time_watch(model: nn.Module, *, to_meta: bool = False) -> Iterator[CallTimeWatch]:
    """A ``CallTimeWatch`` over the body; inside another one of the same model on this thread, that one (made
    ``to_meta`` if asked)."""
    outer = getattr(_active, "watch", None)
    if outer is not None and outer[0] == id(model):
        watch, was = outer[1], outer[1].to_meta
        watch.to_meta = was or to_meta
        try:
            yield watch
        finally:
            watch.to_meta = was
        return
    watch = CallTimeWatch(model, to_meta)
    _active.watch = (id(model), watch)
    try:
        with watch:
            yield watch
    finally:
        _active.watch = outer


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors among an op's arguments, also inside one level of lists and tuples (``torch.cat([a, b])``)."""
    found: list[torch.Tensor] = []
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


def _on_meta(value: Any) -> Any:
    """``value`` with each tensor (also in lists, tuples and dicts) moved to the meta device."""
    if isinstance(value, torch.Tensor):
        return value if value.is_meta else value.to("meta")
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_on_meta(v) for v in value)
    if isinstance(value, dict):
        return {k: _on_meta(v) for k, v in value.items()}
    return value
