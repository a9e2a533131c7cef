"""One layer's activations and the gradient edge of its output, taken by a forward hook during one forward."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.autograd.graph import GradientEdge, get_gradient_edge

from ..display import quoted
from ..model.nested import first_tensor as first_tensor  # re-exported: layers.py imports it here


class LayerTap:
    """A context manager: while open, the layer's forward hook keeps a copy of its output and its gradient edge.

    The copy matters because a later in-place op (``ReLU(inplace=True)``, ``out += identity``)
    would otherwise change the captured activations; the gradient edge is taken in the hook for the
    same reason: it names the output as the layer produced it, so ``torch.autograd.grad`` returns
    the gradient of that version even when an in-place op rewrote the tensor afterwards. For a
    module called several times in one forward, the last call wins.
    """

    def __init__(self, module: nn.Module, path: str) -> None:
        self.module, self.path = module, path
        self.activations: torch.Tensor | None = None
        self.edge: GradientEdge | None = None
        self._handle: torch.utils.hooks.RemovableHandle | None = None

    def __enter__(self) -> LayerTap:
        self._handle = self.module.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _hook(self, module: nn.Module, args: Any, output: Any) -> None:
        tensor = first_tensor(output)
        if tensor is None:
            return
        self.activations = tensor.detach().clone()
        self.edge = get_gradient_edge(tensor) if tensor.requires_grad else None

    def gradient(self, score: torch.Tensor, retain_graph: bool = False) -> torch.Tensor:
        """∂score/∂(layer output), through ``torch.autograd.grad``: no parameter's ``.grad`` is touched."""
        if self.activations is None:
            raise RuntimeError(f"layer {quoted(self.path)} did not run in the forward, so it has nothing to attribute")
        if self.edge is None:
            raise RuntimeError(
                f"the output of layer {quoted(self.path)} does not depend on anything that requires grad "
                "(was the forward run under torch.no_grad, or detached inside the model?)"
            )
        (grad,) = torch.autograd.grad(score, [self.edge], retain_graph=retain_graph, allow_unused=True)
        # A layer the score does not depend on has a zero gradient, not an error.
        return torch.zeros_like(self.activations) if grad is None else grad
