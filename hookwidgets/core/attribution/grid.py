"""Which layer outputs are spatial, and ViT token outputs ``(N, k+H·W, C)`` turned into ``(N, C, H, W)`` grids."""

from __future__ import annotations

import math

import torch

from ..model.tokens import leading_tokens


def token_grid(
    tokens: int, image_size: tuple[int, int], patches: tuple[int, int] | None = None
) -> tuple[int, int, int] | None:
    """``(dropped, h, w)`` for a token count: ``dropped`` tokens precede the ``h × w`` patches.

    With ``patches``, the model's patch grid (``patch_grid``), a count of that many patches and fewer leading tokens
    (a class token, a distillation token, register tokens) is the grid itself. Otherwise, of the grids that
    ``tokens - 1`` or ``tokens`` patches can form, the one whose aspect ratio is closest to the image's wins
    (197 → class token + 14×14; 196 → 14×14, not class token + 15×13). None when no grid of at least 2×2 is within
    25% of the image's ratio (not a token output).
    """
    dropped = leading_tokens(tokens, patches)
    if patches is not None and dropped is not None:
        return (dropped, *patches)
    image_ratio = image_size[0] / image_size[1]
    best: tuple[float, tuple[int, int, int]] | None = None
    for dropped in (1, 0):
        count = tokens - dropped
        for h in range(2, count // 2 + 1):
            if count % h or count // h < 2:
                continue
            error = abs(math.log(h / (count // h) / image_ratio))
            if error <= math.log(1.25) and (best is None or error < best[0]):
                best = (error, (dropped, h, count // h))
    return None if best is None else best[1]


def is_spatial(shape: tuple[int, ...], image_size: tuple[int, int], patches: tuple[int, int] | None = None) -> bool:
    """Whether a layer output of ``shape`` can carry a CAM: ``(N, C, h, w)`` with h·w > 1, or ViT tokens
    (``patches``: the model's patch grid, see ``token_grid``)."""
    if len(shape) == 4:
        return shape[2] * shape[3] > 1
    return len(shape) == 3 and token_grid(shape[1], image_size, patches) is not None


def as_grid(tensor: torch.Tensor, image_size: tuple[int, int], patches: tuple[int, int] | None = None) -> torch.Tensor:
    """A layer output as ``(N, C, h, w)``: 4-D is returned as is, ViT tokens ``(N, T, C)`` are reshaped (the tokens
    before the patches dropped; ``patches``: the model's patch grid, see ``token_grid``)."""
    if tensor.dim() == 4:
        return tensor
    found = token_grid(tensor.shape[1], image_size, patches) if tensor.dim() == 3 else None
    if found is None:
        raise ValueError(f"a layer output of shape {tuple(tensor.shape)} is not a spatial grid")
    dropped, h, w = found
    batch, _, channels = tensor.shape
    return tensor[:, dropped:].reshape(batch, h, w, channels).permute(0, 3, 1, 2)
