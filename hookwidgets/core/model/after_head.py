"""What a forward does to its output embedding's logits before it returns them, recorded op by op and replayed.

Marian and BART add ``final_logits_bias`` after ``lm_head``, Gemma 2 caps the logits with a tanh, others cast them:
plain tensor code, no module. A ``TorchFunctionMode`` over a forward notes, once the head returned, every op fed a
tensor derived from its output (the others are constants: a bias, a cap); ``replay(logits)`` runs the same ops on
other logits (a block's, read through the head) up to the op that made the model's own logits. The mode costs every op
of the forward a Python call, so the lens runs it only for a model that does change the head's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .nested import first_tensor


@dataclass(frozen=True)
class _Slot:
    """A tensor derived from the head's output, by its index in the replay's values (0: the head's output)."""

    index: int


@dataclass
class _Op:
    func: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: Any  # the result with each tensor replaced by the _Slot it fills


class AfterHead(TorchFunctionMode):
    """Over one forward, a context manager: each call of ``head`` starts the record anew; ``replay(logits)`` after the
    forward gives the function from the head's logits to the model's."""

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self._module = head
        self._handle: Any = None
        self._ops: list[_Op] = []
        self._derived: dict[int, tuple[torch.Tensor, _Slot]] = {}  # id -> (tensor, kept alive so ids stay unique)
        self._head: torch.Tensor | None = None
        self._head_values: torch.Tensor | None = None  # a copy: an in-place op after the head may change its output

    def __enter__(self) -> AfterHead:
        self._handle = self._module.register_forward_hook(self._head_returned)
        try:
            super().__enter__()  # type: ignore[no-untyped-call]  # torch's TorchFunctionMode is unannotated
            return self
        except BaseException:
            self._handle.remove()
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)  # type: ignore[no-untyped-call]  # as __enter__
        finally:
            self._handle.remove()

    def _head_returned(self, module: nn.Module, args: Any, output: Any) -> None:
        """The head's call returned: what ran after an earlier call of it no longer counts."""
        logits = first_tensor(output)
        if logits is not None:
            self._ops, self._head, self._head_values = [], logits, logits.detach().clone()
        self._derived = {id(output): (output, _Slot(0))}

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if self._head is None or not any(id(t) in self._derived for t in _tensors((args, kwargs))):
            return result
        slotted = _map(self._slot_of, (args, kwargs))
        outputs = _map(self._new_slot, result)
        self._ops.append(_Op(func, slotted[0], slotted[1], outputs))
        return result

    def _slot_of(self, value: Any) -> Any:
        entry = self._derived.get(id(value)) if isinstance(value, torch.Tensor) else None
        return value if entry is None or entry[0] is not value else entry[1]

    def _new_slot(self, value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        entry = self._derived.get(id(value))
        if entry is not None and entry[0] is value:  # an in-place op returns the tensor it changed
            return entry[1]
        slot = _Slot(len(self._derived))
        self._derived[id(value)] = (value, slot)
        return slot

    def replay(self, logits: torch.Tensor, head_name: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """``head logits -> the model's logits`` (None: the model returns the head's output as it is), checked on this
        forward; a ValueError when the model's ``logits`` are neither, naming what to pass instead."""
        head = self._head_values
        if head is None or (logits is self._head and not self._ops):
            return None
        entry = self._derived.get(id(logits))
        slot = entry[1] if entry is not None and entry[0] is logits else None
        last = max((i for i, op in enumerate(self._ops) if _fills(op.outputs, slot)), default=None)
        if slot is None or last is None:
            raise ValueError(
                f"the model's logits are not made from what its output embedding {head_name} returned, so the lens "
                "cannot read the blocks as the model reads its output: pass unembed=callable(hidden) -> logits"
            )
        ops = self._ops[: last + 1]

        def run(head_logits: torch.Tensor) -> torch.Tensor:
            values: dict[_Slot, torch.Tensor] = {_Slot(0): head_logits}
            for op in ops:
                args, kwargs = _map(lambda v: values.get(v, v) if isinstance(v, _Slot) else v, (op.args, op.kwargs))
                result = op.func(*args, **kwargs)
                for slot, value in zip(_leaves(op.outputs), _leaves(result), strict=True):
                    if isinstance(slot, _Slot) and isinstance(value, torch.Tensor):
                        values[slot] = value
            return values[slot]

        again = run(head.clone())
        if again.shape != logits.shape or not torch.allclose(again, logits.detach(), equal_nan=True):
            raise ValueError(
                f"the lens cannot reproduce what the forward does to the logits of {head_name} before it returns "
                "them (the ops after the head, replayed, give other values): pass unembed=callable(hidden) -> logits"
            )
        return run


def _map(fn: Callable[[Any], Any], value: Any) -> Any:
    """``value`` with ``fn`` applied to each leaf inside its tuples, lists and dicts (an op's arguments and result)."""
    if isinstance(value, (tuple, list)):
        mapped = [_map(fn, v) for v in value]
        return type(value)(mapped) if type(value) in (tuple, list) else tuple(mapped)
    if isinstance(value, dict):
        return {k: _map(fn, v) for k, v in value.items()}
    return fn(value)


def _leaves(value: Any) -> list[Any]:
    """The leaves ``_map`` visits, in its order."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    return [value]


def _fills(outputs: Any, slot: _Slot | None) -> bool:
    return any(value == slot for value in _leaves(outputs) if isinstance(value, _Slot))


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [value for value in _leaves(tree) if isinstance(value, torch.Tensor)]
