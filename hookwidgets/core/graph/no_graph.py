"""Why a forward left no autograd graph (no_grad, inference_mode, nothing requiring grad, detached outputs)."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..display import display_name
from ..model.nested import output_tensors


def no_graph_reason(model: nn.Module, output: Any, grad_mode: tuple[bool, bool], inputs_grad: bool) -> str:
    """Why a forward left no autograd graph, and what to do about it."""
    name = display_name(type(model).__name__)
    grad_enabled, inference = grad_mode
    if inference:
        return f"no graph: {name} ran under torch.inference_mode(), so autograd recorded nothing; run it outside"
    if not grad_enabled:
        return (
            f"no graph: {name} ran with grad disabled (torch.no_grad()), so autograd recorded nothing; "
            "run it under torch.enable_grad()"
        )
    tensors = output_tensors(output)
    if not tensors:
        return f"no graph: the output of {name} holds no tensor (got {type(output).__name__}); return tensors"
    if any(t.requires_grad for t in tensors):  # requires grad without a grad_fn: a leaf returned as is
        return (
            f"no graph: {name} returned leaf tensors (a parameter or an input, as is), which have no grad_fn: "
            "no op of the forward lies between them and the output"
        )
    if not inputs_grad and not any(p.requires_grad for p in model.parameters()):
        return (
            f"no graph: nothing in {name}'s forward requires grad (no parameter has requires_grad=True, "
            "and no tensor argument does); call model.requires_grad_() or pass an input with requires_grad=True"
        )
    if not any(t.is_floating_point() or t.is_complex() for t in tensors):
        dtypes = ", ".join(sorted({str(t.dtype).removeprefix("torch.") for t in tensors}))
        return (
            f"no graph: {name} returned only {dtypes} tensors (argmax, a comparison or a cast), which carry no "
            "gradient; return the floating-point scores to see their graph"
        )
    return (
        f"no graph: no output tensor of {name} has a grad_fn although its parameters require grad: the forward "
        "detached its outputs (.detach(), .data, a NumPy round trip) or made them under torch.no_grad() inside"
    )
