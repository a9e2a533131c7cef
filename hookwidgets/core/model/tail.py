"""What a sequence model runs between its last block and its output embedding, recorded in one forward.

Found by execution order and data flow, not by registration order or names: the modules that ran whole after the last
block's call and before the output embedding's, each taking the previous one's output (the final norm, OPT's
``project_out``), then a constant scale the forward applies without a module (T5's ``d_model ** -0.5``). It is checked
on the forward itself: the last block's output through the tail must be what the output embedding received.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn

from ..display import quoted
from .nested import first_tensor


@dataclass
class _Call:
    """One call that ran after the latest block: its module, first tensor argument (a copy), the other arguments,
    its first output tensor (a copy) and when it started and returned (None: it had not when the head ran)."""

    module: nn.Module
    path: str
    first: torch.Tensor | None
    key: str | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    start: int
    end: int | None = None
    output: torch.Tensor | None = None


@dataclass
class Tail:
    """``hidden -> the output embedding's input``: ``steps`` (a module, the keyword it took the hidden state by or
    None for the first positional argument, and the other arguments it was called with), then ``scale`` (None:
    none)."""

    steps: list[tuple[nn.Module, str | None, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    scale: float | None = None
    names: list[str] = field(default_factory=list)
    """The paths of the steps, then ``× scale`` when there is one: what the lens applies, in words."""

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        for module, key, args, kwargs in self.steps:
            # a step took and gave a tensor in the traced forward (the chain is checked there): it gives one here too
            output = module(*args, **{**kwargs, key: hidden}) if key else module(hidden, *args, **kwargs)
            hidden = cast(torch.Tensor, first_tensor(output))
        return hidden if self.scale is None else hidden * self.scale


class TailTrace:
    """A context manager for one forward: each call of ``blocks`` (``[(path, block)]``) leaves a copy of its output
    in ``rows``; with ``head``, every call of another module after the latest block is noted, and so is the input
    the head received, for ``tail()``, and what the head returned, for ``head_untouched()``."""

    def __init__(self, model: nn.Module, blocks: list[tuple[str, nn.Module]], head: nn.Module | None) -> None:
        self.rows: list[tuple[str, torch.Tensor]] = []
        self._model, self._blocks, self._head = model, blocks, head
        self._calls: list[_Call] = []  # after the latest block, in the order they started
        self._open: list[_Call] = []
        self._clock = 0  # counts starts and returns, so that calls nest by their times
        self._head_input: torch.Tensor | None = None
        self._handles: list[Any] = []
        self._head_output: tuple[torch.Tensor, int | None] | None = None  # the head's latest output, its version

    def __enter__(self) -> TailTrace:
        try:
            for path, block in self._blocks:
                self._handles.append(block.register_forward_hook(self._block_done(path)))
            if self._head is not None:
                for path, module in _outside(self._model, self._blocks):
                    self._handles.append(module.register_forward_pre_hook(self._started(path), with_kwargs=True))
                    self._handles.append(module.register_forward_hook(self._returned))
                self._handles.append(self._head.register_forward_hook(self._head_returned))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _block_done(self, path: str) -> Callable[[nn.Module, Any, Any], None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            hidden = first_tensor(output)
            if hidden is not None:  # a copy: a later in-place op must not change the row
                self.rows.append((path, hidden.detach().clone()))
                self._calls, self._open, self._head_input = [], [], None  # only what runs after the last block counts

        return hook

    def _started(self, path: str) -> Callable[[nn.Module, tuple[Any, ...], dict[str, Any]], None]:
        def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if not self.rows or self._head_input is not None:
                return  # before the first block, or after the head took its input
            key, first, rest, named = _hidden_argument(args, kwargs)
            if module is self._head:
                self._head_input = first.detach().clone() if first is not None else None
                return
            copy = None if first is None else first.detach().clone()
            call = _Call(module, path, copy, key, rest, named, self._tick())
            self._calls.append(call)
            self._open.append(call)

        return hook

    def _head_returned(self, module: nn.Module, args: Any, output: Any) -> None:
        logits = first_tensor(output)
        if logits is not None:  # an inference tensor has no version counter: whether it changed is not known
            self._head_output = (logits, None if logits.is_inference() else logits._version)

    def head_untouched(self, logits: torch.Tensor) -> bool:
        """Whether the model returned the head's latest output as ``logits``, unchanged (no op after the head)."""
        if self._head_output is None:
            return False
        output, version = self._head_output
        return output is logits and version is not None and logits._version == version

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _returned(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._head_input is not None or not self._open or self._open[-1].module is not module:
            return  # after the head, or a call that started before the latest block (forwards nest)
        call = self._open.pop()
        tensor = first_tensor(output)
        call.output, call.end = (None if tensor is None else tensor.detach().clone()), self._tick()

    def tail(self, head_name: str) -> Tail:
        """The tail from the last block's output to the head's input, checked against this forward; a ValueError
        saying what did not fit, and to pass ``unembed=``, when the forward shows none."""
        if not self.rows:
            raise ValueError("no block of the stack ran in this forward, so the lens has no rows to read")
        last, hidden = self.rows[-1]
        if self._head_input is None:
            raise ValueError(
                f"the output embedding {head_name} did not run on a tensor after the last block {quoted(last)}, so "
                "what lies between them is unknown: pass unembed=callable(hidden) -> logits"
            )
        tail, current, end = Tail(), hidden, 0
        for call in self._calls:  # whole calls, outermost first, each fed the previous one's output
            if call.end is None or call.start < end:
                continue  # it had not returned when the head ran, or it ran inside one taken already
            if call.first is not None and call.output is not None and _same(call.first, current):
                tail.steps.append((call.module, call.key, call.args, call.kwargs))
                tail.names.append(quoted(call.path))
                current, end = call.output, call.end
        received = self._head_input
        if _same(received, current):
            return tail
        scale = _scale(current, received)
        if scale is None:
            ran = ", ".join(tail.names) or "none"
            raise ValueError(
                f"the lens cannot reproduce what runs between the last block {quoted(last)} and the output embedding "
                f"{head_name}: the modules that ran there and took the block's output in turn ({ran}) do not give "
                "the embedding's input (the forward does more without a module): pass "
                "unembed=callable(hidden) -> logits"
            )
        tail.scale = scale
        tail.names.append(f"× {scale:.6g}")
        return tail


def _outside(model: nn.Module, blocks: list[tuple[str, nn.Module]]) -> list[tuple[str, nn.Module]]:
    """``(path, module)`` of each submodule of ``model`` outside ``blocks`` that takes hooks: a walk that does not enter
    the blocks (most of a transformer) nor a ScriptModule."""
    stop = {id(block) for _, block in blocks}
    found: list[tuple[str, nn.Module]] = []

    def visit(path: str, module: nn.Module) -> None:
        stop.add(id(module))  # each module once
        for name, child in module._modules.items():
            if child is not None and id(child) not in stop and not isinstance(child, torch.jit.ScriptModule):
                found.append((f"{path}.{name}" if path else name, child))
                visit(found[-1][0], child)

    visit("", model)
    return found


def _hidden_argument(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str | None, torch.Tensor | None, tuple[Any, ...], dict[str, Any]]:
    """``(keyword or None, tensor, other positional arguments, other keyword arguments)`` of a call: its first
    positional argument when it is a tensor, else its first keyword argument that is one (``hidden_states=``)."""
    if args:
        return None, args[0] if isinstance(args[0], torch.Tensor) else None, args[1:], kwargs
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            return key, value, (), {k: v for k, v in kwargs.items() if k != key}
    return None, None, (), kwargs


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same values, in any shape of the same size (GPT-2 views its final norm's output before the head)."""
    return a.numel() == b.numel() and a.dtype == b.dtype and torch.equal(a.reshape(b.shape), b)


def _scale(current: torch.Tensor, received: torch.Tensor) -> float | None:
    """The constant ``c`` with ``received == c · current`` (to the dtype's precision), else None."""
    if current.numel() != received.numel() or not current.is_floating_point():
        return None
    x, y = current.reshape(received.shape).double(), received.double()
    norm = (x * x).sum()
    if norm == 0:
        return None
    c = float((x * y).sum() / norm)
    tolerance = torch.finfo(received.dtype).eps * 64
    return c if c != 0 and torch.allclose(c * x, y, rtol=tolerance, atol=tolerance * float(y.abs().max())) else None
