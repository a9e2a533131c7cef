"""Feature maps and gradient maps: the channels of one item as one tiled image with labels and a colour bar."""

from __future__ import annotations

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
)
from ._labels import add_labels, box_size, label_size
from ._tiles import WHITE, choose, compose, per_channel, plan
from .tensors import bars_figure
from .theme import ThemeLike, as_theme, themed

MAX_CHANNELS = 32
"""Channels drawn by default."""
DPI = 96
MARGIN = {"left": 6, "right": 64, "bottom": 6, "top": 24}  # pixels: colour bar with ticks on the right, title on top


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
    theme: ThemeLike = None,
) -> Figure:
    """Channels of one batch item as a tiled grid with channel labels, one-pixel separators and a colour bar.

    Accepts ``(N, C, H, W)`` or ``(C, H, W)``; ``(N, F)`` and ``(F,)`` are drawn as bars. ``order="mean"``
    draws the ``max_channels`` channels of highest mean activation first (labels keep channel numbers);
    ``scale="channel"`` gives each tile its own range. ``diverging`` centres a red–blue scale on zero.
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
    limits = finite_range(shown, diverging)
    if scale == "channel":
        shown = per_channel(shown, diverging)
        limits = (-1.0, 1.0) if diverging else (0.0, 1.0)
    colormap = matplotlib.colormaps[cmap or ("RdBu_r" if diverging else "viridis")]
    marker = cast(
        "tuple[int, int, int, int]", tuple(round(255 * c) for c in matplotlib.colors.to_rgba(NONFINITE_COLOR))
    )
    layout = plan(*shown.shape)
    labels = [str(c) for c in chosen]
    size = label_size(max(labels, key=len), layout.tile, DPI)
    boxes = [box_size(label, size, DPI) for label in labels] if size else []
    theme = as_theme(theme)  # @themed passes a Theme or None
    grid = compose(shown, layout, colormap, limits, marker, boxes, theme.rgba(theme.background) if theme else WHITE)
    fig, ax, bar_ax = _figure(*grid.shape[:2])
    image = ax.imshow(grid, interpolation="none")  # the axes is the grid's size in pixels: drawn 1:1
    if size:
        add_labels(ax, labels, [layout.origin(p) for p in range(len(labels))], size, DPI)
    image.set_cmap(colormap)  # the colour bar and get_clim() speak for the pre-coloured pixels
    image.set_clim(*limits)
    ax.set_axis_off()
    which = "top" if order == "mean" else "first"
    more = f" ({which} {len(shown)} of {len(values)} channels)" if len(values) > len(shown) else ""
    unlabelled = "" if size else " [tiles too small for channel numbers]"
    # An explicit y keeps the title where it is: the automatic placement measures hidden ticks on every draw.
    text = f"{literal(title)}{magnitude_note(tensor)}{more}{nonfinite_note(values[chosen])}{unlabelled}"
    ax.set_title(text, fontsize=9, y=1.0, pad=5)
    bar = fig.colorbar(image, cax=bar_ax)
    bar.ax.tick_params(labelsize=7)
    if scale == "channel":
        bar.set_label("per-channel scale", fontsize=7)
    return fig


def _figure(height_px: int, width_px: int) -> tuple[Figure, Axes, Axes]:
    """A figure whose image axes is exactly ``height_px`` × ``width_px`` at DPI (1:1), and a colour-bar axes.

    Sized by hand rather than by ``tight_layout``, which draws the whole figure once more only to measure it.
    """
    left, right, bottom, top = MARGIN["left"], MARGIN["right"], MARGIN["bottom"], MARGIN["top"]
    fig_w, fig_h = max(width_px + left + right, 160), height_px + bottom + top
    fig = Figure(figsize=(fig_w / DPI, fig_h / DPI), dpi=DPI)
    ax = fig.add_axes((left / fig_w, bottom / fig_h, width_px / fig_w, height_px / fig_h))
    bar_ax = fig.add_axes(((left + width_px + 8) / fig_w, bottom / fig_h, 10 / fig_w, height_px / fig_h))
    return fig, ax, bar_ax


def gradient_map_figure(tensor: torch.Tensor, *, title: str = "", theme: ThemeLike = None, **kwargs) -> Figure:
    """Like :func:`feature_map_figure`, on a diverging scale centred on zero: for gradients."""
    return feature_map_figure(tensor, title=title, diverging=True, theme=theme, **kwargs)
