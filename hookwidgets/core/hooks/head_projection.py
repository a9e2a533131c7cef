"""Where an attention module's heads meet their output projection, found in one forward by structure, not by name.

The projection is the Linear fed by the heads' context: the last Linear-like module called inside the attention
module's call whose input is none of the module's own inputs (its query, key and value projections read those), or,
when there is none inside (BERT's ``attention.self``), the first Linear-like module called after it on its output.
A Linear-like module is one a head slice of whose input is a slice of features: it has ``in_features`` (``nn.Linear``,
a quantized Linear, an adapter's wrapper) or is transformers' ``Conv1D``; the outermost one counts (an adapter's
inner Linears belong to it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

from ..model.nested import first_tensor, tensors_in
from ..model.tree import hookable_modules

Probe = Callable[[], Any]
"""Runs the model once on its example inputs, as one of the explorer's own runs (its hooks silent, state kept)."""


class Projection(NamedTuple):
    """``place`` ``input`` (the projection at ``path`` takes the context) or ``output`` (the module's own output is
    the context, projected by the module at ``path``), and that projection."""

    place: str
    path: str
    module: nn.Module


def in_width(module: nn.Module) -> int | None:
    """The input features of a Linear-like module (``in_features``; a ``Conv1D``'s weight rows), else None."""
    value = getattr(module, "in_features", None)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    weight = getattr(module, "weight", None)
    if type(module).__name__ == "Conv1D" and isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return weight.shape[0]  # transformers' Conv1D: y = x @ weight + bias
    return None


def probed_projection(root: nn.Module, module: nn.Module, probe: Probe) -> Projection | None:
    """The output projection of ``module`` (a submodule of ``root``) as one forward of ``probe`` shows it; None when
    the module did not run, the forward failed, or no Linear-like module took its heads' context."""
    linears = _outermost_linears(root)
    inside = {id(m) for m in module.modules()}
    seen = _Seen()
    handles = [
        module.register_forward_pre_hook(seen.entered, with_kwargs=True),
        module.register_forward_hook(seen.left),
    ]
    try:
        for path, linear in linears:
            handles.append(linear.register_forward_pre_hook(seen.linear(path, id(linear) in inside), with_kwargs=True))
        probe()
    except Exception:  # the model's own failure: the names are tried instead, and the run the user makes says it
        return None
    finally:
        for handle in handles:
            handle.remove()
    if seen.inside:
        path, linear = seen.inside[-1]
        return Projection("input", path, linear)
    return Projection("output", seen.after[0], seen.after[1]) if seen.after is not None else None


class _Seen:
    """What the probe saw of the module's first call: the Linear-like calls inside it fed something other than its
    inputs, and the first one after it fed its output."""

    def __init__(self) -> None:
        self.inputs: list[torch.Tensor] = []  # kept, so that their ids stay theirs until the probe is over
        self.output: torch.Tensor | None = None
        self.within = self.done = False
        self.inside: list[tuple[str, nn.Module]] = []
        self.after: tuple[str, nn.Module] | None = None

    def entered(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not self.done and not self.within:
            self.inputs = tensors_in((args, kwargs))
            self.within = True

    def left(self, module: nn.Module, args: Any, output: Any) -> None:
        if self.within:
            self.within, self.done = False, True
            self.output = first_tensor(output)

    def linear(self, path: str, inside: bool) -> Callable[..., Any]:
        def hook(linear: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            fed = first_tensor((args, kwargs))
            if fed is None:
                return
            if self.within and inside and not any(fed is t for t in self.inputs):
                self.inside.append((path, linear))
            elif self.done and self.after is None and self.output is not None and fed is self.output:
                self.after = (path, linear)

        return hook


def _outermost_linears(root: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(path, module)`` of the Linear-like modules of ``root`` not inside another one."""
    found: list[tuple[str, nn.Module]] = []
    within: set[int] = set()
    for path, module in hookable_modules(root)[0]:
        if id(module) in within:
            continue
        if in_width(module) is not None:
            found.append((path, module))
            within.update(id(m) for m in module.modules())
    return found
