"""Guided backpropagation's ReLU rule: at every ReLU, negative gradients are clamped to zero on the way back."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

RELUS = frozenset({F.relu, F.relu_, torch.relu, torch.relu_, torch.Tensor.relu, torch.Tensor.relu_})


class GuidedReLUs(TorchFunctionMode):
    """While active, each ReLU output of a forward gets a tensor hook that clamps its gradient at zero.

    Clamping the gradient arriving at a ReLU's output, before ReLU's own backward masks it by
    ``x > 0``, gives Springenberg et al.'s rule ``(x > 0) · max(g, 0)``. A mode, rather than module
    hooks, also catches ReLUs called as ``F.relu``/``torch.relu`` in a ``forward``, and in-place ones
    (the hook is registered on the output as the ReLU produced it). Only this thread's calls inside
    the ``with`` block are seen; the tensor hooks live as long as that forward's graph. ``enabled``
    switches the rule off for a backward that must see the true gradients (Grad-CAM in guided Grad-CAM).
    """

    def __init__(self) -> None:
        super().__init__()
        self.enabled = True
        self.relus = 0

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        if func in RELUS and isinstance(result, torch.Tensor) and result.requires_grad:
            self.relus += 1
            result.register_hook(self._clamp)  # type: ignore[no-untyped-call]  # torch: Tensor.register_hook is unannotated
        return result

    def _clamp(self, grad: torch.Tensor) -> torch.Tensor | None:
        return grad.clamp_min(0) if self.enabled else None
