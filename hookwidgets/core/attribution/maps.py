"""From a layer's grid to what users look at: upsampled to the input size and scaled to [0, 1] per item."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def upsample(cam: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``(N, h, w)`` resized bilinearly (``align_corners=False``, as Captum and OpenCV do) to ``(N, *size)``."""
    if tuple(cam.shape[-2:]) == tuple(size):
        return cam
    return F.interpolate(cam[:, None], size=size, mode="bilinear", align_corners=False)[:, 0]


def normalize(cam: torch.Tensor) -> torch.Tensor:
    """Each item scaled to [0, 1] by its own min and max; a constant map becomes all zeros."""
    flat = cam.reshape(len(cam), -1)
    low = flat.min(dim=1).values[:, None, None]
    span = flat.max(dim=1).values[:, None, None] - low
    # A flat map carries no ranking: zeros say "nothing stands out" instead of dividing by zero;
    # ``cam * 0`` rather than zeros so that a map holding NaN stays visibly NaN.
    return torch.where(span > 0, (cam - low) / span.clamp_min(torch.finfo(cam.dtype).tiny), cam * 0)
