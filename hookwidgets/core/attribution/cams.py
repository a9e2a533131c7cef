"""The CAM formulas: activations ``A`` and gradients ``G`` of one layer, both ``(N, C, h, w)``, to ``(N, h, w)``.

Each function is one published definition; none normalises or resizes (see ``maps.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

EPS = 1e-7


def gradcam(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """Grad-CAM (Selvaraju et al. 2017): ReLU(Σ_k mean_ij(∂y/∂A_k) · A_k)."""
    weights = grads.mean(dim=(2, 3), keepdim=True)
    return torch.relu((weights * acts).sum(dim=1))


def gradcam_plus_plus(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """Grad-CAM++ (Chattopadhay et al. 2018) with the exponential score, whose higher derivatives are powers of G."""
    grads2 = grads.pow(2)
    denominator = 2 * grads2 + acts.sum(dim=(2, 3), keepdim=True) * grads2 * grads
    # As the authors' code does: a zero denominator (zero gradient) gives α = 0 through its zero numerator.
    # No ε: with gradients of 1e-3 and below, an ε of 1e-7 would already bend the weights.
    alpha = grads2 / torch.where(denominator != 0, denominator, torch.ones_like(denominator))
    weights = (alpha * torch.relu(grads)).sum(dim=(2, 3), keepdim=True)
    return torch.relu((weights * acts).sum(dim=1))


def hirescam(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """HiResCAM (Draelos & Carin 2020): ReLU(Σ_k ∂y/∂A_k ⊙ A_k), gradients kept per position."""
    return torch.relu((grads * acts).sum(dim=1))


def xgradcam(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """XGrad-CAM (Fu et al. 2020): channel weights Σ_ij (A_kij / Σ_ij A_kij) · ∂y/∂A_kij."""
    act_sums = acts.sum(dim=(2, 3), keepdim=True)
    weights = (grads * acts / (act_sums + EPS)).sum(dim=(2, 3), keepdim=True)
    return torch.relu((weights * acts).sum(dim=1))


def layercam(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """LayerCAM (Jiang et al. 2021): ReLU(Σ_k ReLU(∂y/∂A_k) ⊙ A_k)."""
    return torch.relu((torch.relu(grads) * acts).sum(dim=1))


CAM_FUNCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "gradcam": gradcam,
    "gradcam++": gradcam_plus_plus,
    "hirescam": hirescam,
    "xgradcam": xgradcam,
    "layercam": layercam,
}
"""Each CAM method's name -> the function weighing a layer's activations by their gradients."""
