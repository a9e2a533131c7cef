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
from .frame import CSS_DPI, current_frame
from .hover import axis, block_mean, describe_cells
from .scales import Limits, scaled_colorbar, signed_limits
from .sequences import _item
from .theme import ThemeLike, themed

LEFT, RIGHT, BOTTOM, TOP = 40, 96, 43, 30  # CSS px: tick labels left and below, the colour bar right, the title above
APART, CLS_CELL = 86, 48  # CSS px: the column of tokens before the patches, and its cells' width
CELL, MIN_SIDE, MAX_SIDE = 29, 192, 480  # CSS px: a patch's size, and the grid's side, before the frame limits it


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
    limits = signed_limits(per_token) if diverging else Limits(*finite_range(per_token))
    cmap = "RdBu_r" if diverging else "viridis"
    frame = current_frame()
    apart = APART - 16 if first else 0  # the column of tokens takes the left margin's place
    # Whole device pixels per patch: each patch a crisp block, at most the room the frame leaves.
    room = frame.width - LEFT - apart - RIGHT
    side = min(MAX_SIDE, max(MIN_SIDE, CELL * max(grid)), room)
    cell = max(1, math.floor(side * frame.ratio / max(grid))) / frame.ratio
    height, width = grid[0] * cell, grid[1] * cell
    fig = Figure(figsize=((LEFT + apart + width + RIGHT) / CSS_DPI, (height + BOTTOM + TOP) / CSS_DPI), dpi=CSS_DPI)
    fw, fh = fig.get_size_inches() * CSS_DPI
    ax = fig.add_axes(((LEFT + apart) / fw, BOTTOM / fh, width / fw, height / fh))
    patches = per_token[first:].reshape(grid)
    image = show_image(ax, patches, cmap, limits.vmin, limits.vmax, interpolation="nearest")
    ax.tick_params(labelsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # patches, not fractions of one
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("patch column", fontsize=7)
    ax.set_ylabel("patch row", fontsize=7)
    quantity = what
    # At most one value per CSS pixel of the grid, and 256 × 256 (65,536) in all.
    shown, row_stride, col_stride = block_mean(patches, max(1, min(int(height), 256)), max(1, min(int(width), 256)))
    aggregated = row_stride * col_stride > 1
    describe_cells(
        ax,
        shown,
        row=axis("patch row", stride=row_stride, count=grid[0]),
        col=axis("patch column", stride=col_stride, count=grid[1]),
        extent=(-0.5, shown.shape[1] * col_stride - 0.5, shown.shape[0] * row_stride - 0.5, -0.5),
        label="patches",
        quantity=quantity,
        aggregate="mean" if aggregated else "",
    )
    if first:
        tall = min(CLS_CELL * first, height)  # one cell per token before the patches, in a column
        cls_ax = fig.add_axes((24 / fw, (BOTTOM + height - tall) / fh, CLS_CELL / fw, tall / fh))
        leading = per_token[:first].reshape(first, 1)
        show_image(cls_ax, leading, cmap, limits.vmin, limits.vmax, interpolation="nearest")
        cls_ax.set_xticks([])
        cls_ax.set_yticks([])
        cls_ax.set_xlabel("class\ntoken" if first == 1 else f"{first} tokens\nbefore\npatches", fontsize=7)
        names = ["class token"] if first == 1 else [f"token {i}" for i in range(first)]
        describe_cells(
            cls_ax,
            leading,
            row=axis("token", names),
            col=axis("", count=1),
            label="class token" if first == 1 else "tokens before the patches",
            quantity=quantity,
        )
    bar_ax = fig.add_axes(((LEFT + apart + width + 14) / fw, BOTTOM / fh, 12 / fw, height / fh))
    scaled_colorbar(fig.colorbar(image, cax=bar_ax))
    notes = f"{nonfinite_note(per_token)}{f' [{limits.note}]' if limits.note else ''}"
    notes += f" [hover: means of {row_stride}×{col_stride} patches]" if aggregated else ""
    fit_title(fig, ax, f"{literal(title)}{magnitude_note(tensor)} · {what}{notes}".lstrip(" ·"))
    whole_device_pixels(fig, frame.ratio)
    return fig


def whole_device_pixels(fig: Figure, ratio: float) -> None:
    """Round the figure's height up to whole device pixels, its axes kept where they are from the bottom: a map
    drawn 1:1 stays on the pixel grid when a title has made the figure taller by a fraction of a pixel."""
    width, height = fig.get_size_inches()
    pixels = height * CSS_DPI * ratio
    if abs(pixels - round(pixels)) < 1e-6:
        return
    taller = math.ceil(pixels) / (CSS_DPI * ratio)
    boxes = [ax.get_position(original=True).bounds for ax in fig.axes]
    fig.set_size_inches(width, taller)
    for ax, (x0, y0, w, h) in zip(fig.axes, boxes, strict=True):
        ax.set_position((x0, y0 * height / taller, w, h * height / taller))
