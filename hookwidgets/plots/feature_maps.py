"""Feature maps and gradient maps: the channels of one item as one tiled image with labels and a colour bar."""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Rectangle

from ._common import as_float_array, finite_range, nonfinite_note, show_image
from .tensors import bars_figure

MAX_CHANNELS = 32
DPI = 96
TARGET_PX, MAX_PX = 420, 820  # the grid is drawn about this big, and never bigger
LABEL_PX = (5.5, 11)  # width of one digit and height of a label box at fontsize 7, in pixels


def _tile(maps: np.ndarray, columns: int) -> np.ndarray:
    """Channels ``(C, H, W)`` laid out as one image, separated by one-pixel NaN gutters."""
    channels, height, width = maps.shape
    rows = math.ceil(channels / columns)
    canvas = np.full((rows * (height + 1) - 1, columns * (width + 1) - 1), np.nan, dtype=np.float32)
    for c in range(channels):
        r, k = divmod(c, columns)
        canvas[r * (height + 1) : r * (height + 1) + height, k * (width + 1) : k * (width + 1) + width] = maps[c]
    return canvas


def _choose(values: np.ndarray, order: str, max_channels: int) -> np.ndarray:
    """Indices of the channels to draw: the first ``max_channels``, or the top ones by mean activation."""
    if order == "channel":
        return np.arange(min(max_channels, len(values)))
    if order != "mean":
        raise ValueError(f"order must be 'channel' or 'mean', not {order!r}")
    means = np.nan_to_num(np.nanmean(np.where(np.isinf(values), np.nan, values), axis=(1, 2)), nan=-np.inf)
    return np.argsort(-means, kind="stable")[:max_channels]


def _per_channel(maps: np.ndarray, diverging: bool) -> np.ndarray:
    """Each channel scaled on its own: to [0, 1] by min and max, or to [-1, 1] by |max| when ``diverging``."""
    scaled = np.empty_like(maps)
    for c, channel in enumerate(maps):
        low, high = finite_range(channel, diverging)
        scaled[c] = (2 * (channel - low) / (high - low) - 1) if diverging else (channel - low) / (high - low)
    return scaled


def feature_map_figure(
    tensor: torch.Tensor,
    *,
    title: str = "",
    diverging: bool = False,
    max_channels: int = MAX_CHANNELS,
    item: int = 0,
    order: str = "channel",
    scale: str = "shared",
) -> Figure:
    """Channels of one batch item as a tiled grid with channel labels, one-pixel separators and a colour bar.

    Accepts ``(N, C, H, W)`` or ``(C, H, W)``; ``(N, F)`` and ``(F,)`` are drawn as bars. ``order="mean"``
    draws the ``max_channels`` channels of highest mean activation first (labels keep channel numbers);
    ``scale="channel"`` gives each tile its own range. ``diverging`` centres a red–blue scale on zero.
    """
    if scale not in ("shared", "channel"):
        raise ValueError(f"scale must be 'shared' or 'channel', not {scale!r}")
    values = as_float_array(tensor)
    if values.ndim == 4:
        values = values[item]
    elif values.ndim in (1, 2):  # (N, F): a Linear output or logits
        return bars_figure(values[item] if values.ndim == 2 else values, title=title, diverging=diverging)
    if values.ndim != 3:
        raise ValueError(f"cannot draw a tensor of shape {tuple(tensor.shape)} as feature maps")
    chosen = _choose(values, order, max_channels)
    shown = values[chosen]
    vmin, vmax = finite_range(shown, diverging)
    if scale == "channel":
        shown = _per_channel(shown, diverging)
        vmin, vmax = (-1.0, 1.0) if diverging else (0.0, 1.0)
    columns = math.ceil(math.sqrt(len(shown)))
    height, width = shown.shape[1:]
    tiled = _tile(shown, columns)
    fig, ax, bar_ax, zoom = _grid_layout(*tiled.shape)
    # Gutters are transparent NaN over a white background; only real NaN/Inf inside tiles are painted.
    nonfinite = np.nan_to_num(_tile((~np.isfinite(shown)).astype(np.float32), columns), nan=0.0) > 0
    image = show_image(ax, tiled, "RdBu_r" if diverging else "viridis", vmin, vmax, nonfinite, interpolation="nearest")
    _label_tiles(ax, chosen, columns, (height, width), zoom)
    ax.set_axis_off()
    which = "top" if order == "mean" else "first"
    more = f" ({which} {len(shown)} of {len(values)} channels)" if len(values) > len(shown) else ""
    ax.set_title(f"{title}{more}{nonfinite_note(values[chosen])}", fontsize=9)
    bar = fig.colorbar(image, cax=bar_ax)
    bar.ax.tick_params(labelsize=7)
    if scale == "channel":
        bar.set_label("per-channel scale", fontsize=7)
    return fig


def _grid_layout(rows: int, columns: int) -> tuple[Figure, Axes, Axes, float]:
    """A figure whose image axes shows the grid at a whole zoom (1:1 for big grids), a colour-bar axes, the zoom.

    Sized by hand rather than by ``tight_layout``, which draws the whole figure once more only to
    measure it: that draw was a third of the time of a 64-channel grid.
    """
    zoom = max(1.0, min(12.0, float(TARGET_PX // max(rows, columns, 1))))
    if max(rows, columns) > MAX_PX:
        zoom = MAX_PX / max(rows, columns)
    width_px, height_px = columns * zoom, rows * zoom
    left, right, bottom, top = 6, 64, 6, 24  # pixels: margin, colour bar with ticks, margin, title
    fig_w, fig_h = max(width_px + left + right, 160), height_px + bottom + top
    fig = Figure(figsize=(fig_w / DPI, fig_h / DPI), dpi=DPI)
    ax = fig.add_axes((left / fig_w, bottom / fig_h, width_px / fig_w, height_px / fig_h))
    bar_ax = fig.add_axes(((left + width_px + 8) / fig_w, bottom / fig_h, 10 / fig_w, height_px / fig_h))
    return fig, ax, bar_ax, zoom


def _label_tiles(ax: Axes, channels: np.ndarray, columns: int, tile: tuple[int, int], zoom: float) -> None:
    """Each tile's channel number at its top-left corner, white on a translucent black box."""
    # One collection of boxes instead of a bbox per text: a bbox per label doubled the drawing time.
    boxes = []
    height, width = tile
    font = FontProperties(size=7)  # one shared font: each Text would otherwise build its own from rcParams
    for position, channel in enumerate(channels):
        r, k = divmod(position, columns)
        x, y = k * (width + 1) - 0.5, r * (height + 1) - 0.5
        label = str(channel)
        box = (min(width, (3 + LABEL_PX[0] * len(label)) / zoom), min(height, LABEL_PX[1] / zoom))
        boxes.append(Rectangle((x, y), *box))
        ax.text(x + 1.5 / zoom, y + 1 / zoom, label, color="white", fontproperties=font, va="top", ha="left")
    ax.add_collection(PatchCollection(boxes, facecolor="black", alpha=0.45, linewidth=0))


def gradient_map_figure(tensor: torch.Tensor, *, title: str = "", **kwargs) -> Figure:
    """Like :func:`feature_map_figure`, on a diverging scale centred on zero."""
    return feature_map_figure(tensor, title=title, diverging=True, **kwargs)
