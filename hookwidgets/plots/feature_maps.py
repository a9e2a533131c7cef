"""Feature maps and gradient maps: the channels of one item as one tiled image with labels and a colour bar."""

from __future__ import annotations

import math
from typing import cast

import matplotlib
import matplotlib.colors
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._common import (
    NONFINITE_COLOR,
    as_float_array,
    empty_figure,
    finite_range,
    is_empty,
    literal,
    magnitude_note,
    nonfinite_note,
    wrap_title,
)
from ._grid_fit import MAX_HOVER_VALUES
from ._labels import add_labels, box_size, label_size
from ._tiles import MAX_PX, WHITE, Layout, choose, compose, per_channel, plan
from .frame import CSS_DPI, current_frame
from .hover import axis, block_mean, describe_cells
from .scales import scaled_colorbar, signed_limits
from .tensors import bars_figure
from .theme import ThemeLike, as_theme, themed

MAX_CHANNELS = 32
"""Channels drawn by default."""
BAR_HEIGHT = 320
"""CSS pixels: the tallest colour bar, so that it shows whole in a pane beside a grid taller than the pane."""
DPI = CSS_DPI
MARGIN = {"left": 6, "right": 64, "bottom": 8, "top": 16}  # CSS px: the colour bar, its ticks (half a line past its
# ends) and its ×10ⁿ above


def _one_item(tensor: torch.Tensor | np.ndarray, item: int) -> np.ndarray:
    """The float32 array to draw: item ``item`` of a 4-D batch (cast alone, not the whole batch), else all of it."""
    if tensor.ndim == 4:
        if not -len(tensor) <= item < len(tensor):
            raise IndexError(f"item {item} is out of range: the tensor holds {len(tensor)} items")
        tensor = tensor[item]
    return as_float_array(tensor)


@themed
def feature_map_figure(
    tensor: torch.Tensor,
    *,
    title: str = "",
    diverging: bool = False,
    max_channels: int = MAX_CHANNELS,
    item: int = 0,
    order: str = "channel",
    scale: str = "shared",
    cmap: str | None = None,
    quantity: str = "activation",
    theme: ThemeLike = None,
) -> Figure:
    """Channels of one batch item as a tiled grid with channel labels, one-pixel separators and a colour bar,
    as wide as the current frame (``plots.frame``) and drawn 1:1 in its device pixels.

    Accepts ``(N, C, H, W)`` or ``(C, H, W)``; ``(N, F)`` and ``(F,)`` are drawn as bars. ``order="mean"``
    draws the ``max_channels`` channels of highest mean activation first (labels keep channel numbers);
    ``scale="channel"`` gives each tile its own range. ``diverging`` centres a red–blue scale on zero (clipped at
    a percentile when outliers would wash it out, said in the title). The column count is the one whose tiles
    come out biggest in the frame: small maps zoomed by whole device pixels, large ones shrunk (said).
    Each tile's values are described for the page's hover (``quantity`` names them).
    The tiles are one pre-coloured RGBA image (NaN/Inf marks and label boxes in it, shown 1:1) and the channel
    numbers the axes' texts: pass ``cmap`` to recolour the tiles; the image's ``get_clim()`` and the colour bar
    give the scale. Complex values are drawn as their magnitude; a tensor of 0 elements gives a figure saying
    "empty (0 elements)".
    """
    if scale not in ("shared", "channel"):
        raise ValueError(f"scale must be 'shared' or 'channel', not {scale!r}")
    if is_empty(tensor):
        return empty_figure(title, tensor.shape)
    if tensor.ndim in (1, 2):  # (N, F): a Linear output or logits
        return bars_figure(tensor[item] if tensor.ndim == 2 else tensor, title=title, diverging=diverging)
    if tensor.ndim not in (3, 4):
        raise ValueError(f"cannot draw a tensor of shape {tuple(tensor.shape)} as feature maps")
    values = _one_item(tensor, item)
    chosen = choose(values, order, max_channels)
    shown = values[chosen]
    clip = ""
    if diverging:
        signed = signed_limits(shown)
        limits, clip = (signed.vmin, signed.vmax), signed.note
    else:
        limits = finite_range(shown)
    colours = shown
    if scale == "channel":
        colours = per_channel(shown, diverging)
        limits, clip = ((-1.0, 1.0) if diverging else (0.0, 1.0)), ""
    colormap = matplotlib.colormaps[cmap or ("RdBu_r" if diverging else "viridis")]
    marker = cast(
        "tuple[int, int, int, int]", tuple(round(255 * c) for c in matplotlib.colors.to_rgba(NONFINITE_COLOR))
    )
    frame = current_frame()
    ratio, dpi = frame.ratio, frame.dpi
    margin = {side: math.ceil(px * ratio) for side, px in MARGIN.items()}
    room_w = int(frame.width * ratio) - margin["left"] - margin["right"]
    count, height, width = shown.shape
    layout = plan(count, height, width, (int(MAX_PX * ratio), room_w), ratio)
    labels = [str(c) for c in chosen]
    size = label_size(max(labels, key=len), layout.tile, dpi)
    boxes = [box_size(label, size, dpi) for label in labels] if size else []
    theme = as_theme(theme)  # @themed passes a Theme or None
    grid = compose(colours, layout, colormap, limits, marker, boxes, theme.rgba(theme.background) if theme else WHITE)
    which = "top" if order == "mean" else "first"
    more = f" ({which} {len(shown)} of {len(values)} channels)" if len(values) > len(shown) else ""
    unlabelled = "" if size else " [tiles too small for channel numbers]"
    shrunk = layout.tile[0] < height  # fewer device pixels than map pixels: some are not drawn
    smaller = f" [maps downsampled to {layout.tile[0] / height:.0%} to fit]" if shrunk else ""
    hover, aggregated = _hover_grids(shown, layout, ratio)
    means = f" [hover: means of {aggregated}]" if aggregated else ""
    clipped = f" [{clip}]" if clip else ""
    text = f"{literal(title)}{magnitude_note(tensor)}{more}{nonfinite_note(shown)}{unlabelled}{smaller}{clipped}{means}"
    fig, ax, bar_ax, (lines, font) = _figure(grid.shape[0], grid.shape[1], margin, frame.width, ratio, text.strip())
    image = ax.imshow(grid, interpolation="none")  # the axes is the grid's size in device pixels: drawn 1:1
    if size:
        add_labels(ax, labels, [layout.origin(p) for p in range(len(labels))], size, dpi)
    image.set_cmap(colormap)  # the colour bar and get_clim() speak for the pre-coloured pixels
    image.set_clim(*limits)
    ax.set_axis_off()
    # Centred over the figure (a narrow grid would push it past the left edge); an explicit y keeps it where it
    # is: the automatic placement measures hidden ticks on every draw.
    centre = fig.get_size_inches()[0] / 2
    box = ax.get_position()
    x = (centre / fig.get_size_inches()[0] - box.x0) / box.width
    ax.set_title("\n".join(lines), fontsize=font, x=x, y=1.0, pad=MARGIN["top"] * 72 / CSS_DPI)
    bar = fig.colorbar(image, cax=bar_ax)
    scaled_colorbar(bar)
    own = scale == "channel"
    if own:
        bar.set_label("per-channel scale", fontsize=7)
    what = f"{quantity} (colours on each channel's own scale)" if own else quantity
    for position, (channel, (cells, rows, cols)) in enumerate(zip(chosen, hover, strict=True)):
        y, x0 = layout.origin(position)
        tile_h, tile_w = layout.tile
        span_h = cells.shape[0] * rows * tile_h / shown.shape[1]
        span_w = cells.shape[1] * cols * tile_w / shown.shape[2]
        describe_cells(
            ax,
            cells,
            row=axis("row", stride=rows, count=shown.shape[1]),
            col=axis("column", stride=cols, count=shown.shape[2]),
            extent=(x0 - 0.5, x0 - 0.5 + span_w, y - 0.5 + span_h, y - 0.5),
            label=f"channel {channel}",
            quantity=what,
            aggregate="mean" if rows * cols > 1 else "",
        )
    return fig


def _hover_grids(maps: np.ndarray, layout: Layout, ratio: float) -> tuple[list[tuple[np.ndarray, int, int]], str]:
    """Each map's values for the hover (block means, strides) — at most one per CSS pixel of its tile and
    ``MAX_HOVER_VALUES`` in all — and "r×c" when they are means, else ""."""
    count, height, width = maps.shape
    rows = min(height, max(1, int(layout.tile[0] / ratio)))
    cols = min(width, max(1, int(layout.tile[1] / ratio)))
    budget = MAX_HOVER_VALUES // count
    while math.ceil(height / math.ceil(height / rows)) * math.ceil(width / math.ceil(width / cols)) > budget:
        rows, cols = max(1, rows - 1), max(1, cols - 1)
        if rows == cols == 1:
            break
    grids = [block_mean(one, rows, cols) for one in maps]
    _, row_stride, col_stride = grids[0]
    return grids, (f"{row_stride}×{col_stride}" if row_stride * col_stride > 1 else "")


def _figure(
    height_px: int, width_px: int, margin: dict[str, int], css_width: int, ratio: float, title: str
) -> tuple[Figure, Axes, Axes, tuple[list[str], float]]:
    """A figure whose image axes is exactly ``height_px`` × ``width_px`` device pixels at ``ratio`` (1:1), a
    colour-bar axes beside it, and the title's lines and font size, fitted to the figure's width.

    Sized by hand rather than by ``tight_layout``, which draws the whole figure once more only to measure it.
    """
    left, right, bottom, top = margin["left"], margin["right"], margin["bottom"], margin["top"]
    fig_w = min(max(width_px + left + right, math.ceil(160 * ratio)), int(css_width * ratio))
    lines, font = wrap_title(title, (fig_w / ratio - 8) / CSS_DPI) if title else ([], 9.0)
    # The title's lines (1.25 em each) and its padding, in whole device pixels: the grid stays on them.
    top += math.ceil((len(lines) * font * 1.25 / 72 * CSS_DPI + (6 if lines else 0)) * ratio)
    fig_h = height_px + bottom + top
    fig = Figure(figsize=(fig_w / ratio / CSS_DPI, fig_h / ratio / CSS_DPI), dpi=CSS_DPI)
    ax = fig.add_axes((left / fig_w, bottom / fig_h, width_px / fig_w, height_px / fig_h))
    bar_left = left + width_px + math.ceil(8 * ratio)
    # At most BAR_HEIGHT tall, level with the grid's top: a tall grid scrolls in its pane, its scale stays in view.
    bar_h = min(height_px, math.ceil(BAR_HEIGHT * ratio))
    bar_box = (bar_left / fig_w, (bottom + height_px - bar_h) / fig_h, math.ceil(10 * ratio) / fig_w, bar_h / fig_h)
    bar_ax = fig.add_axes(bar_box)
    return fig, ax, bar_ax, (lines, font)


def gradient_map_figure(tensor: torch.Tensor, *, title: str = "", theme: ThemeLike = None, **kwargs) -> Figure:
    """Like :func:`feature_map_figure`, on a diverging scale centred on zero: for gradients."""
    kwargs.setdefault("quantity", "gradient")
    return feature_map_figure(tensor, title=title, diverging=True, theme=theme, **kwargs)
