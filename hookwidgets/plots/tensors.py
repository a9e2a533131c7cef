"""1-D and 2-D tensors: a vector as bars, a matrix as a heatmap, attention weights with token labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ._common import (
    NONFINITE_COLOR,
    as_float_array,
    empty_figure,
    finite_range,
    fit_title,
    is_empty,
    label_width,
    literal,
    magnitude_note,
    name_label,
    nonfinite_note,
    show_image,
)
from ._grid_fit import BAR_ROOM, BAR_WIDTH, MAX_HOVER_VALUES, blocks_note, bounded, fitted, pixels
from .frame import CSS_DPI, current_frame
from .hover import axis as hover_axis
from .hover import describe_cells, describe_lines
from .scales import Limits, scaled_colorbar, signed_limits
from .sequences import attention_heads_figure
from .theme import ThemeLike, as_theme, themed

MAX_LABELS = 64  # beyond this, tick labels overlap into a black bar


@themed
def bars_figure(
    values: torch.Tensor | np.ndarray, *, title: str = "", diverging: bool = False, theme: ThemeLike = None
) -> Figure:
    """A 1-D tensor (a Linear output, logits) as one bar per feature, as wide as the frame holds (more features than
    pixels: each block's range drawn, said); NaN/Inf bars are drawn magenta at full height."""
    if is_empty(values):
        return empty_figure(title, values.shape)
    magnitude = magnitude_note(values)
    values = as_float_array(values).reshape(-1)
    frame = current_frame()
    width = min(frame.inches, max(2.5, 2.0 + 0.12 * len(values)))
    fig = Figure(figsize=(width, 2.6), dpi=CSS_DPI)
    left, right = 0.55, 0.15
    ax = fig.add_axes((left / width, 0.45 / 2.6, (width - left - right) / width, 1.7 / 2.6))
    finite = np.isfinite(values)
    shown = np.where(finite, values, 0.0)
    theme = as_theme(theme)  # @themed passes a Theme or None
    stride = -(-len(values) // pixels(width - left - right))
    if stride > 1:  # more bars than pixels: each block's lowest and highest, filled between
        blocks = -(-len(values) // stride)
        padded = np.pad(shown, (0, blocks * stride - len(values)), mode="edge").reshape(blocks, stride)
        low, high = np.minimum(padded.min(axis=1), 0.0), np.maximum(padded.max(axis=1), 0.0)
        x = np.arange(blocks) * stride + (stride - 1) / 2
        ax.fill_between(x, low, high, step="mid", color="#2e86c1", linewidth=0)
        describe_lines(ax, x, {"highest": padded.max(axis=1), "lowest": padded.min(axis=1)}, x_name="feature")
    else:
        colors = np.where(shown >= 0, "#c0392b" if diverging else "#2e86c1", "#2e86c1" if diverging else "#85929e")
        ax.bar(np.arange(len(values)), shown, color=colors, width=0.85)
        describe_lines(ax, np.arange(len(values)), {"value": values}, x_name="feature")
    if not finite.all():
        low_, high_ = finite_range(values)
        ax.bar(
            np.flatnonzero(~finite), high_ - min(low_, 0.0), bottom=min(low_, 0.0), color=NONFINITE_COLOR, width=0.85
        )
    ax.axhline(0, color=theme.muted if theme else "#444", linewidth=0.6)
    ax.set_xlabel("feature", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(labelsize=7)
    ranged = f" · features in blocks of {stride}: each block's range" if stride > 1 else ""
    fit_title(fig, ax, f"{literal(title)}{magnitude}{ranged}{nonfinite_note(values)}".lstrip(" ·"))
    return fig


def _label_axis(ax: Axes, axis: str, labels: Sequence[str] | None, count: int, stride: int) -> None:
    if labels is not None and len(labels) != count:
        raise ValueError(f"{len(labels)} {axis} labels for {count} {'rows' if axis == 'y' else 'columns'}")
    if labels is None or count > MAX_LABELS or stride > 1:
        (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))
        return
    ticks = np.arange(count)
    if axis == "x":
        ax.set_xticks(ticks, [name_label(t) for t in labels], rotation=90, fontsize=7)
    else:
        ax.set_yticks(ticks, [name_label(t) for t in labels], fontsize=7)


def _label_room(labels: Sequence[str] | None, count: int) -> float:
    """Inches the longest tick label of an axis needs (a number's when the labels are not drawn)."""
    if labels is None or count > MAX_LABELS or not labels:
        return 0.06 * len(str(count)) + 0.1
    return label_width([name_label(t) for t in labels], 7) + 0.1


@themed
def matrix_figure(
    tensor: torch.Tensor,
    *,
    title: str = "",
    row_labels: Sequence[str] | None = None,
    column_labels: Sequence[str] | None = None,
    diverging: bool = False,
    item: int | None = None,
    theme: ThemeLike = None,
) -> Figure:
    """A 2-D tensor as a heatmap (rows × columns) within the frame's width, e.g. a batch of Linear outputs;
    ``item`` picks from a 3-D one. Cells are averaged in blocks when more than the map's pixels (said);
    ``diverging``: a scale symmetric around zero, its clip said."""
    if is_empty(tensor):
        return empty_figure(title, tensor.shape)
    values = as_float_array(tensor)
    if values.ndim == 3 and item is not None:
        values = values[item]
    if values.ndim != 2:
        raise ValueError(f"a heatmap needs a 2-D tensor (or 3-D with item=), got shape {tuple(tensor.shape)}")
    rows, columns = values.shape
    frame = current_frame()
    left, bottom, top = _label_room(row_labels, rows) + 0.1, _label_room(column_labels, columns) + 0.1, 0.45
    room = frame.inches - left - 0.15 - BAR_WIDTH - BAR_ROOM
    heat_w = max(0.5, min(room, max(2.0, 0.18 * columns)))
    heat_h = min(12.0, max(1.2, 0.18 * rows))
    shown, row_stride, col_stride = fitted(values, heat_w, heat_h)
    width = left + heat_w + 0.15 + BAR_WIDTH + BAR_ROOM
    fig = Figure(figsize=(width, bottom + heat_h + top), dpi=CSS_DPI)
    fw, fh = fig.get_size_inches()
    ax = fig.add_axes((left / fw, bottom / fh, heat_w / fw, heat_h / fh))
    cbar_ax = fig.add_axes(((left + heat_w + 0.15) / fw, bottom / fh, BAR_WIDTH / fw, heat_h / fh))
    limits = signed_limits(values) if diverging else Limits(*finite_range(values))
    extent = (-0.5, shown.shape[1] * col_stride - 0.5, shown.shape[0] * row_stride - 0.5, -0.5)
    cmap = "RdBu_r" if diverging else "viridis"
    image = show_image(ax, shown, cmap, limits.vmin, limits.vmax, aspect="auto", interpolation="none", extent=extent)
    ax.set_xlim(-0.5, columns - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    _label_axis(ax, "x", column_labels, columns, col_stride)
    _label_axis(ax, "y", row_labels, rows, row_stride)
    ax.tick_params(labelsize=7)
    cells, hover_rows, hover_cols = bounded(shown, MAX_HOVER_VALUES)
    rs, cs = row_stride * hover_rows, col_stride * hover_cols
    describe_cells(
        ax,
        cells,
        row=hover_axis("row", list(row_labels) if row_labels is not None and rs == 1 else None, stride=rs, count=rows),
        col=hover_axis(
            "column", list(column_labels) if column_labels is not None and cs == 1 else None, stride=cs, count=columns
        ),
        extent=(-0.5, cells.shape[1] * cs - 0.5, cells.shape[0] * rs - 0.5, -0.5),
        aggregate="mean" if rs * cs > 1 else "",
    )
    scaled_colorbar(fig.colorbar(image, cax=cbar_ax))
    averaged = blocks_note("columns", col_stride) + blocks_note("rows", row_stride)
    clip = f" · {limits.note}" if limits.note else ""
    text = f"{literal(title)}{magnitude_note(tensor)}{averaged}{clip}{nonfinite_note(values)}"
    fit_title(fig, ax, text.lstrip(" ·"))
    return fig


@themed
def attention_figure(
    weights: torch.Tensor,
    tokens: Sequence[str] | None = None,
    *,
    title: str = "",
    item: int = 0,
    heads: Sequence[int] | None = None,
    scale: str = "linear",
    theme: ThemeLike = None,
) -> Figure:
    """Self-attention weights ``(L, L)``, ``(heads, L, L)`` or ``(N, heads, L, L)``: one heatmap per head.

    Rows are queries, columns keys, both labelled with ``tokens``; all heads share one ``scale`` ("linear",
    "per-row", "log"). The same figure as ``attention_heads_figure``, which also draws cross-attention (T_q ≠ T_k).
    """
    if weights.ndim not in (2, 3, 4) or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"attention weights must be (L, L), (heads, L, L) or (N, heads, L, L), got {tuple(weights.shape)}"
        )
    return attention_heads_figure(weights, tokens, item=item, heads=heads, title=title, scale=scale)
