"""Lazy modules (``nn.LazyLinear``…): parameters and buffers whose shapes the model's first forward decides."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from ..._warnings import MaterializedWarning
from ..display import display_name, quoted
from .hook_dicts import HOOK_DICTS
from .inputs import Inputs, call_model
from .modules import modules_of
from .preserved_state import preserved_state


def _own_tensors(module: nn.Module) -> Iterator[torch.Tensor]:
    yield from (t for t in module._parameters.values() if t is not None)
    yield from (t for t in module._buffers.values() if t is not None)


def lazy_modules(model: nn.Module) -> dict[str, nn.Module]:
    """The modules (by path) holding a parameter or buffer of their own that is not materialized yet."""
    return {path: m for path, m in model.named_modules() if any(is_lazy(t) for t in _own_tensors(m))}


def has_lazy(model: nn.Module) -> bool:
    """Whether any parameter or buffer of ``model`` is not materialized yet (checked before each of the explorer's
    runs: one walk of the modules)."""
    for module in modules_of(model):
        for tensors in (module._parameters, module._buffers):
            for tensor in tensors.values():
                if tensor is not None and is_lazy(tensor):
                    return True
    return False


def describe_lazy(modules: dict[str, nn.Module]) -> str:
    """``'0' (LazyConv2d), 'head' (LazyLinear)`` for messages."""
    return ", ".join(f"{quoted(path)} ({display_name(type(m).__name__)})" for path, m in modules.items())


def unmaterialized_param(path: str) -> str:
    """Why a parameter of a lazy module takes no hook yet, and what to run first."""
    return (
        f"parameter {quoted(path)} is not materialized yet: it belongs to a lazy module, which gives its parameters "
        "their shapes in its first forward; run one first (ex.run(), or model(x)), then hook it"
    )


def probe_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` to probe without materializing it: its unmaterialized tensors are fresh ones.

    Everything else that holds memory or identity is shared rather than copied: materialized parameters and
    buffers, and the hooks (the hook dicts are new, so removing one on the copy leaves the model's alone).
    """
    memo: dict[int, Any] = {}
    for tensor in (*model.parameters(), *model.buffers()):
        memo[id(tensor)] = (
            type(tensor)(requires_grad=tensor.requires_grad, device=tensor.device, dtype=tensor.dtype)  # type: ignore[call-arg]  # stubs lack Uninitialized*'s device, dtype
            if is_lazy(tensor)
            else tensor
        )
    for module in model.modules():
        for name in HOOK_DICTS:
            hooks = module.__dict__.get(name)
            if hooks is not None:
                memo[id(hooks)] = OrderedDict(hooks)
    try:
        return copy.deepcopy(model, memo)
    except Exception as exc:
        raise ValueError(
            f"the lazy modules {describe_lazy(lazy_modules(model))} of {display_name(type(model).__name__)} are not "
            "materialized, and copy.deepcopy of the model, which the shape probe runs instead so as to leave them "
            f"so, failed: {exc}; materialize them with one forward of your own, model(example_inputs), before "
            "HookExplorer"
        ) from exc


def materialize(model: nn.Module, inputs: Inputs) -> list[str]:
    """One forward of ``inputs`` (eval mode, no grad, state restored) that materializes the lazy modules.

    The random generators are the one thing left as the forward leaves them: the weights take the draws the
    model's own first forward would have taken, and the draws after them go on from there, as after that
    forward (restored, the next draws would repeat the weights' stream).

    Returns ``'path' (LazyLinear, now Linear)`` for each module it materialized; when the forward raises,
    a note on the exception names those it had materialized before.
    """
    before = {path: type(m).__name__ for path, m in lazy_modules(model).items()}
    if not before:
        return []
    try:
        with preserved_state(model, rng=False), torch.no_grad():
            call_model(model, inputs)
    except BaseException as exc:
        done = _materialized(model, before)
        if done:
            exc.add_note(f"before it raised, this forward materialized the lazy modules {', '.join(done)}")
        raise
    return _materialized(model, before)


def _materialized(model: nn.Module, before: dict[str, str]) -> list[str]:
    left = lazy_modules(model)
    return [
        f"{quoted(path)} ({display_name(cls)}, now {display_name(type(model.get_submodule(path)).__name__)})"
        for path, cls in before.items()
        if path not in left
    ]


@contextlib.contextmanager
def materialize_notices(model: nn.Module, notices: list[str]) -> Iterator[None]:
    """Collect in ``notices`` the warnings that a run materialized lazy modules; other warnings go on as raised."""
    if not has_lazy(model):
        yield
        return
    raised: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                raised = list(caught)
    finally:  # after the filters are back: the other warnings meet the user's filters, as if never caught
        for w in raised:
            if issubclass(w.category, MaterializedWarning):
                notices.append(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
