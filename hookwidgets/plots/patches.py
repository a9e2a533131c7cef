"""A vision transformer's tokens on its patch grid: each patch's norm (or one feature), the class token apart."""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ._common import (
    as_float_array,
    empty_figure,
    finite_range,
    fit_title,
    is_empty,
    literal,
    magnitude_note,
    nonfinite_note,
    show_image,
)
from .sequences import _item
from .theme import ThemeLike, themed


@themed
def patch_grid_figure(
    tensor: torch.Tensor | np.ndarray,
    *,
    item: int = 0,
    class_token: bool | int = True,
    title: str = "",
    feature: int | None = None,
    grid: tuple[int, int] | None = None,
    theme: ThemeLike = None,
) -> Figure:
    """A vision transformer's tokens ``(N, 1+P, D)`` or ``(1+P, D)`` on their √P × √P patch grid (``grid``:
    rows × columns when not square): each patch's norm over its features, or the value of ``feature``.

    The class token (``class_token=True``: the first token) is drawn apart, on the same scale; an int is how many
    tokens precede the patches (DeiT's class and distillation tokens, register tokens), drawn apart in a column.
    """
    if is_empty(tensor):
        return empty_figure(title, tensor.shape)
    if tensor.ndim not in (2, 3):
        raise ValueError(f"a patch grid needs tokens (N, 1+P, D) or (1+P, D), got shape {tuple(tensor.shape)}")
    values = as_float_array(_item(tensor, item, 3))
    first = int(class_token)
    patches = values.shape[0] - first
    if grid is None:
        side = math.isqrt(max(patches, 0))
        if patches <= 0 or side * side != patches:
            raise ValueError(
                f"{patches} patch tokens do not fill a square grid: pass grid=(rows, columns)"
                + ("" if class_token else ", or class_token=True if the first token is a class token")
            )
        grid = (side, side)
    if grid[0] * grid[1] != patches:
        raise ValueError(f"grid {grid[0]}×{grid[1]} does not hold the {patches} patch tokens")
    if feature is None:
        with np.errstate(over="ignore", invalid="ignore"):
            per_token = np.sqrt(np.square(values.astype(np.float64)).sum(axis=1)).astype(np.float32)
        what = f"norm over {values.shape[1]} features"
    else:
        if not -values.shape[1] <= feature < values.shape[1]:
            raise IndexError(f"feature {feature} is out of range: the tokens have {values.shape[1]} features")
        per_token = values[:, feature]
        what = f"feature {feature}"
    diverging = feature is not None
    vmin, vmax = finite_range(per_token, diverging)
    cmap = "RdBu_r" if diverging else "viridis"
    side_in = min(5.0, max(2.0, 0.3 * max(grid)))
    cell = side_in / max(grid)
    height, width = grid[0] * cell, grid[1] * cell
    apart = 0.9 if first else 0.0
    bottom = 0.45  # room for the tick labels and the axis label under the grid
    fig = Figure(figsize=(0.25 + apart + width + 0.95, height + bottom + 0.55))
    fw, fh = fig.get_size_inches()
    ax = fig.add_axes(((0.25 + apart) / fw, bottom / fh, width / fw, height / fh))
    image = show_image(ax, per_token[first:].reshape(grid), cmap, vmin, vmax, interpolation="none")
    ax.tick_params(labelsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # patches, not fractions of one
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("patch column", fontsize=7)
    ax.set_ylabel("patch row", fontsize=7)
    if first:
        tall = min(0.5 * first, height)  # one cell per token before the patches, in a column
        cls_ax = fig.add_axes((0.2 / fw, (bottom + height - tall) / fh, 0.5 / fw, tall / fh))
        show_image(cls_ax, per_token[:first].reshape(first, 1), cmap, vmin, vmax)
        cls_ax.set_xticks([])
        cls_ax.set_yticks([])
        cls_ax.set_xlabel("class\ntoken" if first == 1 else f"{first} tokens\nbefore\npatches", fontsize=7)
    bar_ax = fig.add_axes(((0.25 + apart + width + 0.15) / fw, bottom / fh, 0.12 / fw, height / fh))
    fig.colorbar(image, cax=bar_ax).ax.tick_params(labelsize=7)
    fit_title(fig, ax, f"{literal(title)}{magnitude_note(tensor)} · {what}{nonfinite_note(per_token)}".lstrip(" ·"))
    return fig
