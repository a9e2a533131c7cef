"""Matplotlib figures of captured tensors, and PNG bytes for the widget. No widget code here."""

from __future__ import annotations

import io
import math

import matplotlib
import matplotlib.colors
import numpy as np
import torch
from matplotlib.figure import Figure

MAX_CHANNELS = 32
NONFINITE_COLOR = "#ff00ff"


def _as_float_array(tensor: torch.Tensor) -> np.ndarray:
    """A float32 NumPy copy of ``tensor`` (half precision and bfloat16 cast first)."""
    return tensor.detach().to("cpu", torch.float32).numpy()


def _nonfinite_note(values: np.ndarray) -> str:
    nan, inf = int(np.isnan(values).sum()), int(np.isinf(values).sum())
    parts = [f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else ""]
    text = ", ".join(p for p in parts if p)
    return f" [{text}, drawn magenta]" if text else ""


def _tile(maps: np.ndarray, columns: int) -> np.ndarray:
    """Channels ``(C, H, W)`` laid out as one image, separated by one-pixel NaN gutters."""
    channels, height, width = maps.shape
    rows = math.ceil(channels / columns)
    canvas = np.full((rows * (height + 1) - 1, columns * (width + 1) - 1), np.nan, dtype=np.float32)
    for c in range(channels):
        r, k = divmod(c, columns)
        canvas[r * (height + 1) : r * (height + 1) + height, k * (width + 1) : k * (width + 1) + width] = maps[c]
    return canvas


def feature_map_figure(
    tensor: torch.Tensor,
    *,
    title: str = "",
    diverging: bool = False,
    max_channels: int = MAX_CHANNELS,
    item: int = 0,
) -> Figure:
    """Channels of one batch item as a tiled grid with channel labels and a shared colour bar.

    Accepts ``(N, C, H, W)`` or ``(C, H, W)``; ``(N, F)`` and ``(F,)`` are drawn as bars.
    ``diverging`` centres a red–blue scale on zero, as suits gradients.
    """
    values = _as_float_array(tensor)
    if values.ndim == 4:
        values = values[item]
    elif values.ndim == 2:  # (N, F): a Linear output or logits
        return _bars_figure(values[item], title=title, diverging=diverging)
    elif values.ndim == 1:
        return _bars_figure(values, title=title, diverging=diverging)
    if values.ndim != 3:
        raise ValueError(f"cannot draw a tensor of shape {tuple(tensor.shape)} as feature maps")
    shown = values[:max_channels]
    finite = shown[np.isfinite(shown)]
    if diverging:
        bound = float(np.abs(finite).max()) if finite.size else 1.0
        vmin, vmax, cmap = -(bound or 1.0), bound or 1.0, "RdBu_r"
    else:
        vmin = float(finite.min()) if finite.size else 0.0
        vmax = float(finite.max()) if finite.size else 1.0
        cmap = "viridis"
    columns = math.ceil(math.sqrt(len(shown)))
    rows = math.ceil(len(shown) / columns)
    height, width = shown.shape[1:]
    tiled = _tile(shown, columns)
    nonfinite = _tile(np.where(np.isfinite(shown), np.nan, 1.0).astype(np.float32), columns)

    fig = Figure(figsize=(min(9.0, 1.1 * columns + 1.4), min(9.0, 1.1 * rows * height / max(width, 1) + 0.8)))
    ax = fig.add_subplot()
    # Gutters and non-finite values are transparent over a white background; NaN/Inf are then
    # painted magenta on top, so they are never mistaken for a value on the colour scale.
    colormap = matplotlib.colormaps[cmap].with_extremes(bad=(0, 0, 0, 0))
    image = ax.imshow(np.ma.masked_invalid(tiled), cmap=colormap, vmin=vmin, vmax=vmax, interpolation="nearest")
    if np.isfinite(nonfinite).any():
        marker = matplotlib.colors.ListedColormap([NONFINITE_COLOR]).with_extremes(bad=(0, 0, 0, 0))
        ax.imshow(np.ma.masked_invalid(nonfinite), cmap=marker, interpolation="nearest")
    for c in range(len(shown)):
        r, k = divmod(c, columns)
        ax.text(
            k * (width + 1) + 0.5,
            r * (height + 1) + 0.5,
            str(c),
            color="white",
            fontsize=7,
            va="top",
            ha="left",
            bbox={"facecolor": "black", "alpha": 0.45, "pad": 0.6, "linewidth": 0},
        )
    ax.set_axis_off()
    more = f" (first {len(shown)} of {len(values)} channels)" if len(values) > len(shown) else ""
    ax.set_title(f"{title}{more}{_nonfinite_note(shown)}", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.035, pad=0.02)
    fig.tight_layout()
    return fig


def _bars_figure(values: np.ndarray, *, title: str, diverging: bool) -> Figure:
    """A 1-D tensor (a Linear output, logits) as one bar per feature."""
    fig = Figure(figsize=(min(9.0, 2.0 + 0.12 * len(values)), 2.6))
    ax = fig.add_subplot()
    shown = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
    colors = np.where(shown >= 0, "#c0392b" if diverging else "#2e86c1", "#2e86c1" if diverging else "#85929e")
    ax.bar(np.arange(len(values)), shown, color=colors, width=0.85)
    ax.axhline(0, color="#444", linewidth=0.6)
    ax.set_xlabel("feature", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(f"{title}{_nonfinite_note(values)}", fontsize=9)
    fig.tight_layout()
    return fig


def gradient_map_figure(tensor: torch.Tensor, *, title: str = "", **kwargs) -> Figure:
    """Like :func:`feature_map_figure`, on a diverging scale centred on zero."""
    return feature_map_figure(tensor, title=title, diverging=True, **kwargs)


def figure_png(fig: Figure, dpi: int = 96) -> bytes:
    """The figure rendered as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
