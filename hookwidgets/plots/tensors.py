"""1-D and 2-D tensors: a vector as bars, a matrix as a heatmap, attention weights with token labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from ._common import (
    NONFINITE_COLOR,
    as_float_array,
    empty_figure,
    finite_range,
    fit_title,
    is_empty,
    literal,
    magnitude_note,
    name_label,
    nonfinite_note,
    show_image,
)
from .sequences import attention_heads_figure
from .theme import ThemeLike, as_theme, themed

MAX_LABELS = 64  # beyond this, tick labels overlap into a black bar


@themed
def bars_figure(
    values: torch.Tensor | np.ndarray, *, title: str = "", diverging: bool = False, theme: ThemeLike = None
) -> Figure:
    """A 1-D tensor (a Linear output, logits) as one bar per feature; NaN/Inf bars are drawn magenta at full height."""
    if is_empty(values):
        return empty_figure(title, values.shape)
    magnitude = magnitude_note(values)
    values = as_float_array(values).reshape(-1)
    fig = Figure(figsize=(min(9.0, 2.0 + 0.12 * len(values)), 2.6))
    ax = fig.add_subplot()
    finite = np.isfinite(values)
    shown = np.where(finite, values, 0.0)
    colors = np.where(shown >= 0, "#c0392b" if diverging else "#2e86c1", "#2e86c1" if diverging else "#85929e")
    ax.bar(np.arange(len(values)), shown, color=colors, width=0.85)
    if not finite.all():
        low, high = finite_range(values)
        ax.bar(np.flatnonzero(~finite), high - min(low, 0.0), bottom=min(low, 0.0), color=NONFINITE_COLOR, width=0.85)
    theme = as_theme(theme)  # @themed passes a Theme or None
    ax.axhline(0, color=theme.muted if theme else "#444", linewidth=0.6)
    ax.set_xlabel("feature", fontsize=8)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    fit_title(fig, ax, f"{literal(title)}{magnitude}{nonfinite_note(values)}")  # a few features: a narrow figure
    return fig


def _label_axis(ax, axis: str, labels: Sequence[str] | None, count: int) -> None:
    if labels is None or count > MAX_LABELS:
        return
    if len(labels) != count:
        raise ValueError(f"{len(labels)} {axis} labels for {count} {'rows' if axis == 'y' else 'columns'}")
    ticks = np.arange(count)
    if axis == "x":
        ax.set_xticks(ticks, [name_label(t) for t in labels], rotation=90, fontsize=7)
    else:
        ax.set_yticks(ticks, [name_label(t) for t in labels], fontsize=7)


def _label_room(labels: Sequence[str] | None, count: int) -> float:
    """Inches the longest tick label of an axis needs (none when the labels are not drawn)."""
    if labels is None or count > MAX_LABELS or not labels:
        return 0.0
    return 0.06 * max(len(name_label(t)) for t in labels)


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
    """A 2-D tensor as a heatmap (rows × columns), e.g. a batch of Linear outputs; ``item`` picks from a 3-D one."""
    if is_empty(tensor):
        return empty_figure(title, tensor.shape)
    values = as_float_array(tensor)
    if values.ndim == 3 and item is not None:
        values = values[item]
    if values.ndim != 2:
        raise ValueError(f"a heatmap needs a 2-D tensor (or 3-D with item=), got shape {tuple(tensor.shape)}")
    rows, columns = values.shape
    # Room for the tick labels (7 pt, ~0.06 in a character; column labels stand rotated), so long
    # module names fit beside the cells instead of squeezing the axes away.
    row_room, column_room = _label_room(row_labels, rows), _label_room(column_labels, columns)
    fig = Figure(figsize=(min(12.0, 1.6 + 0.18 * columns + row_room), min(12.0, 1.2 + 0.18 * rows + column_room)))
    ax = fig.add_subplot()
    vmin, vmax = finite_range(values, diverging)
    image = show_image(ax, values, "RdBu_r" if diverging else "viridis", vmin, vmax, aspect="auto")
    _label_axis(ax, "x", column_labels, columns)
    _label_axis(ax, "y", row_labels, rows)
    ax.set_title(f"{literal(title)}{magnitude_note(tensor)}{nonfinite_note(values)}", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    fig.tight_layout()
    return fig


@themed
def attention_figure(
    weights: torch.Tensor,
    tokens: Sequence[str] | None = None,
    *,
    title: str = "",
    item: int = 0,
    heads: Sequence[int] | None = None,
    theme: ThemeLike = None,
) -> Figure:
    """Self-attention weights ``(L, L)``, ``(heads, L, L)`` or ``(N, heads, L, L)``: one heatmap per head.

    Rows are queries, columns keys, both labelled with ``tokens``; all heads share one scale. The same figure as
    ``attention_heads_figure``, which also draws cross-attention (T_q ≠ T_k).
    """
    if weights.ndim not in (2, 3, 4) or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"attention weights must be (L, L), (heads, L, L) or (N, heads, L, L), got {tuple(weights.shape)}"
        )
    return attention_heads_figure(weights, tokens, item=item, heads=heads, title=title)
