"""Sequences: tokens × features with token labels, attention heads."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..core.capture.views import ATTENTION_SCALES
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
from ._grid_fit import BAR_ROOM, BAR_WIDTH, MAX_HOVER_VALUES, blocks_note, bounded, fitted, power_of
from .frame import CSS_DPI, current_frame
from .hover import axis as hover_axis
from .hover import describe_cells
from .scales import Limits, scaled_colorbar, signed_limits
from .theme import ThemeLike, themed

MAX_TICKS = 64
"""Labelled positions on one axis at most; a longer sequence labels every k-th token and says so in the title."""
TICK_POINTS = 8.0  # points of axis length per labelled tick: 7-point labels, a little apart
ROW_INCHES, MAX_HEIGHT = 0.16, 12.0
"""A token map's row height, and the tallest its map is drawn (more tokens: rows averaged, said)."""
LABEL_SHARE = 0.3
"""A sequence axis' tick labels take at most this share of the frame's width: longer tokens are cut with "…"
(the hover names them whole)."""
MAX_NORM_VALUES = 4096
"""A token map's hover carries at most this many per-token norms (averaged in blocks beyond)."""
MIN_MAP = 1.2
"""Inches: a token map narrower than this with its colour bar beside it gets the colour bar under it instead."""
MIN_NARROW = 1.06
"""Inches (~102 CSS px): the smallest head drawn two a row where ``MIN_PANEL`` fits only one."""
MIN_PANEL = 1.25
"""Inches: the smallest a head's panel is drawn (~120 CSS px); a narrower pane gets fewer columns, more rows."""
LOG_FLOOR = 1e-4
"""The log scale of attention ends at this fraction of the largest probability: zeros have no logarithm."""


def _item(tensor: torch.Tensor | np.ndarray, item: int, batched: int) -> torch.Tensor | np.ndarray:
    """Item ``item`` of a tensor with ``batched`` dimensions (a smaller one is one item already)."""
    if tensor.ndim < batched:
        return tensor
    if not -len(tensor) <= item < len(tensor):
        raise IndexError(f"item {item} is out of range: the tensor holds {len(tensor)} items")
    return tensor[item]


def _check_labels(labels: Sequence[str] | None, count: int, what: str) -> None:
    if labels is not None and len(labels) != count:
        raise ValueError(f"{len(labels)} token labels for {count} {what}: give one label per token")


def label_tokens(ax: Axes, axis: str, labels: Sequence[str] | None, count: int, inches: float) -> int:
    """Tick ``axis`` of ``ax`` with ``labels`` (indices when None) at as many positions as ``inches`` of axis hold
    (at most ``MAX_TICKS``); returns the step between labelled tokens (1: every token labelled)."""
    room = max(2, min(MAX_TICKS, int(inches * 72 / TICK_POINTS)))
    step = max(1, math.ceil(count / room))
    ticks = np.arange(0, count, step)
    texts = [name_label(labels[int(i)]) if labels is not None else str(i) for i in ticks]
    if axis == "x":
        ax.set_xticks(ticks, texts, rotation=90, fontsize=7)
    else:
        ax.set_yticks(ticks, texts, fontsize=7)
    return step


def _step_note(step: int) -> str:
    return f" [every {step}th token labelled]" if step > 1 else ""


def _room(labels: Sequence[str] | None, count: int) -> float:
    """Inches the tick labels of a sequence axis take (the longest few measured)."""
    if labels is None:
        return 0.25 + 0.06 * len(str(count))
    return label_width([name_label(t) for t in labels[:: max(1, math.ceil(count / MAX_TICKS))]], 7) + 0.1


def _cut(labels: Sequence[str] | None, inches: float) -> list[str] | None:
    """``labels`` cut with "…" to what ``inches`` of 7-point tick labels hold."""
    if labels is None:
        return None
    chars = max(4, int(inches * 72 / (7 * 0.6)))  # ~0.6 em a character
    return [t if len(t) <= chars else t[: chars - 1] + "…" for t in labels]


def _labels_of(labels: Sequence[str] | None, stride: int) -> list[str] | None:
    """The hover's labels of an axis drawn with ``stride`` (averaged blocks have no one label)."""
    return list(labels) if labels is not None and stride == 1 else None


@themed
def token_map_figure(
    tensor: torch.Tensor | np.ndarray,
    tokens: Sequence[str] | None = None,
    *,
    item: int = 0,
    title: str = "",
    max_features: int | None = None,
    diverging: bool = False,
    theme: ThemeLike = None,
) -> Figure:
    """A sequence ``(N, T, D)`` or ``(T, D)`` as a tokens × features heatmap as wide as the frame, one row per token
    labelled with ``tokens``, each token's norm (over all its features) as a bar beside it, and its colour bar.

    Dimensions after T are flattened into features, all drawn (``max_features``: the first that many): averaged in
    blocks when more than the map's pixels, said in the title. ``diverging`` (gradients): a scale symmetric around
    zero. NaN/Inf cells and the norm bars of their tokens are magenta; complex values are drawn as their magnitude.
    """
    if is_empty(tensor):
        return empty_figure(title, tensor.shape)
    if tensor.ndim < 2:
        raise ValueError(f"a token map needs (N, T, D) or (T, D), got shape {tuple(tensor.shape)}")
    one = _item(tensor, item, 3)
    values = as_float_array(one.reshape(one.shape[0], -1))
    count, features = values.shape
    _check_labels(tokens, count, "tokens (rows)")
    cut = values[:, :max_features] if max_features is not None else values
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.square(values.astype(np.float64)).sum(axis=1))
    frame = current_frame()
    height = min(MAX_HEIGHT, max(1.6, ROW_INCHES * count))
    shown_tokens = _cut(tokens, LABEL_SHARE * frame.inches)
    left, bottom, top, gap = _room(shown_tokens, count) + 0.1, 0.45, 0.45, 0.2
    bar_w = min(1.0, max(0.5, 0.12 * frame.inches))
    heat_w = frame.inches - left - gap - bar_w - 0.15 - BAR_WIDTH - BAR_ROOM
    below = heat_w < MIN_MAP  # a narrow pane: the colour bar goes under the map, which keeps the width
    if below:
        heat_w, bottom = frame.inches - left - gap - bar_w - 0.1, bottom + 0.8
    shown, row_stride, col_stride = fitted(cut, heat_w, height)
    fig = Figure(figsize=(frame.inches, height + bottom + top), dpi=CSS_DPI)
    fw, fh = fig.get_size_inches()
    ax = fig.add_axes((left / fw, bottom / fh, heat_w / fw, height / fh))
    bar_ax = fig.add_axes(((left + heat_w + gap) / fw, bottom / fh, bar_w / fw, height / fh), sharey=ax)
    if below:
        cbar_ax = fig.add_axes((left / fw, 0.45 / fh, heat_w / fw, 0.1 / fh))  # its ×10ⁿ is under its labels
    else:
        cbar_ax = fig.add_axes(((left + heat_w + gap + bar_w + 0.15) / fw, bottom / fh, BAR_WIDTH / fw, height / fh))
    limits = signed_limits(cut) if diverging else Limits(*finite_range(cut))
    extent = (-0.5, shown.shape[1] * col_stride - 0.5, shown.shape[0] * row_stride - 0.5, -0.5)
    cmap = "RdBu_r" if diverging else "viridis"
    image = show_image(ax, shown, cmap, limits.vmin, limits.vmax, aspect="auto", interpolation="none", extent=extent)
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(count - 0.5, -0.5)
    step = label_tokens(ax, "y", shown_tokens, count, height)
    ax.set_xlabel("feature", fontsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=max(2, int(heat_w * 1.5)), integer=True))
    ax.tick_params(axis="x", labelsize=7)
    norm_cells, norm_stride, _ = bounded(norms[:, None], MAX_NORM_VALUES)
    hover_cells, hover_rows, hover_cols = bounded(shown, MAX_HOVER_VALUES - norm_cells.size)
    rows_stride, cols_stride = row_stride * hover_rows, col_stride * hover_cols
    describe_cells(
        ax,
        hover_cells,
        row=hover_axis("token", _labels_of(tokens, rows_stride), stride=rows_stride, count=count),
        col=hover_axis("feature", stride=cols_stride, count=cut.shape[1]),
        extent=(-0.5, hover_cells.shape[1] * cols_stride - 0.5, hover_cells.shape[0] * rows_stride - 0.5, -0.5),
        quantity="gradient" if diverging else "activation",
        aggregate="mean" if rows_stride * cols_stride > 1 else "",
    )
    divisor, power = power_of(norms)
    norms = norms / divisor
    finite = np.isfinite(norms)
    bar_ax.barh(np.arange(count), np.where(finite, norms, 0.0), height=0.85, color="#2e86c1")
    if not finite.all():
        top_norm = float(norms[finite].max()) if finite.any() else 1.0
        bar_ax.barh(np.flatnonzero(~finite), top_norm or 1.0, height=0.85, color=NONFINITE_COLOR)
    bar_ax.set_ylim(count - 0.5, -0.5)  # row 0 on top, as in the heatmap
    bar_ax.tick_params(axis="y", left=False, labelleft=False)
    bar_ax.tick_params(axis="x", labelsize=7)
    bar_ax.xaxis.set_major_locator(MaxNLocator(nbins=2))
    bar_ax.set_xlabel(f"norm{power}", fontsize=7)  # "0.004" would run into the feature axis' last label
    low, high = bar_ax.get_xlim()
    describe_cells(
        bar_ax,
        norm_cells,  # the norms themselves, not the ×10ⁿ-scaled bar lengths
        row=hover_axis("token", _labels_of(tokens, norm_stride), stride=norm_stride, count=count),
        col=hover_axis("norm", ["over all features"]),
        extent=(low, high, norm_cells.shape[0] * norm_stride - 0.5, -0.5),
        quantity="norm",
        aggregate="mean" if norm_stride > 1 else "",
    )
    scaled_colorbar(fig.colorbar(image, cax=cbar_ax, orientation="horizontal" if below else "vertical"))
    more = f" (first {cut.shape[1]} of {features} features)" if features > cut.shape[1] else ""
    averaged = blocks_note("features", col_stride) + blocks_note("tokens", row_stride)
    clip = f" · {limits.note}" if limits.note else ""
    text = f"{literal(title)}{magnitude_note(tensor)}{more}{averaged}{clip}{nonfinite_note(values)}{_step_note(step)}"
    fit_title(fig, ax, text.lstrip(" ·"))
    return fig


def _head_scale(values: np.ndarray, scale: str) -> tuple[np.ndarray, Normalize, str]:
    """The heads' values as coloured under ``scale``, their colour norm, and what the figure says of it."""
    if scale == "per-row":
        finite = np.where(np.isfinite(values), values, -np.inf)
        top = finite.max(axis=-1, keepdims=True)
        top = np.where(np.isfinite(top) & (top > 0), top, 1.0)
        return values / top, Normalize(0.0, 1.0), " · each query row scaled to its own max"
    low, high = finite_range(values)
    if scale == "log":
        high = high if high > 0 else 1.0
        floor = high * LOG_FLOOR
        with np.errstate(invalid="ignore"):  # below the floor: the floor's colour, not a hole where log(0) is
            clipped = np.where(np.isfinite(values), np.maximum(values, floor), values)
        return clipped, LogNorm(floor, high), f" · log scale, floored at {floor:.3g}"
    return values, Normalize(low, high), ""


@themed
def attention_heads_figure(
    probs: torch.Tensor | np.ndarray,
    tokens: Sequence[str] | None = None,
    *,
    item: int = 0,
    heads: int | Sequence[int] | None = None,
    title: str = "",
    key_tokens: Sequence[str] | None = None,
    scale: str = "linear",
    theme: ThemeLike = None,
) -> Figure:
    """Attention probabilities ``(N, H, T_q, T_k)``, ``(H, T_q, T_k)`` or ``(T_q, T_k)``: one heatmap per head,
    queries as rows and keys as columns, as many heads a row as the frame holds, all on one ``scale``.

    ``scale``: "linear", "per-row" (each query row divided by its own max) or "log" (from ``LOG_FLOOR`` × the
    max). ``tokens`` label the queries, and the keys too unless ``key_tokens`` (cross-attention) is given;
    ``heads`` is one head, a list of heads, or None for all of them.
    """
    if scale not in ATTENTION_SCALES:
        raise ValueError(f"scale must be one of {', '.join(map(repr, ATTENTION_SCALES))}, not {scale!r}")
    if is_empty(probs):
        return empty_figure(title, probs.shape)
    if probs.ndim not in (2, 3, 4):
        raise ValueError(
            "attention probabilities must be (T_q, T_k), (heads, T_q, T_k) or (N, heads, T_q, T_k), "
            f"got {tuple(probs.shape)}"
        )
    values = as_float_array(_item(probs, item, 4))
    if values.ndim == 2:
        values = values[None]
    count, queries, keys = values.shape
    chosen = list(range(count)) if heads is None else [heads] if isinstance(heads, int) else list(heads)
    wrong = [h for h in chosen if not 0 <= h < count]
    if wrong or not chosen:
        raise IndexError(f"head {wrong[0] if wrong else '[]'} is out of range: the probabilities hold {count} heads")
    key_tokens = tokens if key_tokens is None and queries == keys else key_tokens
    _check_labels(tokens, queries, "queries (rows)")
    _check_labels(key_tokens, keys, "keys (columns)")
    picked = values[chosen]
    frame = current_frame()
    query_ticks, key_ticks = _cut(tokens, LABEL_SHARE * frame.inches), _cut(key_tokens, LABEL_SHARE * frame.inches)
    left = _room(query_ticks, queries) + 0.3  # the tick labels and "query"
    bottom = _room(key_ticks, keys) + 0.3  # the rotated tick labels and "key"
    gap, title_h, top = 0.15, 0.25, 0.4
    room = frame.inches - left - 0.2 - BAR_WIDTH - BAR_ROOM
    preferred = min(4.0, 1.5 + 0.16 * max(queries, keys)) if len(chosen) > 1 else min(7.0, 2.5 + 0.16 * keys)
    columns = max(1, min(len(chosen), int((room + gap) / (min(preferred, MIN_PANEL) + gap))))
    if columns == 1 and len(chosen) > 1 and (room - gap) / 2 >= MIN_NARROW:  # a narrow pane: two smaller heads a row
        columns = 2
    rows = math.ceil(len(chosen) / columns)
    columns = math.ceil(len(chosen) / rows)  # as many rows, the last one as full as it can be
    panel = max(0.5, min(preferred, (room + gap) / columns - gap))
    tall = panel * max(0.3, min(1.0, queries / keys))  # a few queries over many keys: a wide panel, not a square
    grid_w, grid_h = columns * (panel + gap) - gap, rows * (tall + title_h) - title_h
    fig = Figure(figsize=(frame.inches, top + title_h + grid_h + bottom), dpi=CSS_DPI)
    fw, fh = fig.get_size_inches()
    # One axes in inches of grid (y down), every head an image at its place in it: an axes a head cost ~10 ms.
    ax = fig.add_axes((left / fw, bottom / fh, grid_w / fw, (title_h + grid_h) / fh))
    ax.set_xlim(0, grid_w)
    ax.set_ylim(title_h + grid_h, 0)
    ax.set_frame_on(False)
    budget = max(1, MAX_HOVER_VALUES // len(chosen))
    # What is drawn: each head at most a cell a CSS pixel (block means), coloured on the scale of those cells.
    drawn = [fitted(picked[position], tall, panel) for position in range(len(chosen))]
    row_stride, col_stride = drawn[0][1], drawn[0][2]
    coloured, norm, said = _head_scale(np.stack([cells for cells, _, _ in drawn]), scale)
    for position, head in enumerate(chosen):
        r, c = divmod(position, columns)
        x0, y0 = c * (panel + gap), title_h + r * (tall + title_h)
        box = (x0, x0 + panel, y0 + tall, y0)
        image = show_image(ax, coloured[position], "magma", 0.0, 1.0, aspect="auto", interpolation="none", extent=box)
        image.set_norm(norm)  # one norm for every head: the same scale, linear or not
        ax.text(x0 + panel / 2, y0 - 0.04, f"head {head}", ha="center", va="bottom", fontsize=8)
        cells, rs, cs = bounded(drawn[position][0], budget)
        rs, cs = rs * row_stride, cs * col_stride
        describe_cells(
            ax,
            cells,
            row=hover_axis("query", _labels_of(tokens, rs), stride=rs, count=queries),
            col=hover_axis("key", _labels_of(key_tokens, cs), stride=cs, count=keys),
            extent=box,
            label=f"head {head}",
            quantity="attention",
            aggregate="mean" if rs * cs > 1 else "",
        )
    step = max(
        _grid_ticks(ax, "y", query_ticks, queries, [title_h + r * (tall + title_h) for r in range(rows)], tall),
        _grid_ticks(ax, "x", key_ticks, keys, [c * (panel + gap) for c in range(columns)], panel),
    )
    ax.set_ylabel("query", fontsize=7)
    ax.set_xlabel("key", fontsize=7)
    bar_h = min(grid_h, 3.0)
    cbar_ax = fig.add_axes(((left + grid_w + 0.2) / fw, (bottom + grid_h - bar_h) / fh, BAR_WIDTH / fw, bar_h / fh))
    bar = fig.colorbar(image, cax=cbar_ax)
    if scale == "log":
        bar.ax.tick_params(labelsize=7)
    else:
        scaled_colorbar(bar)
    averaged = blocks_note("queries", row_stride) + blocks_note("keys", col_stride)
    text = f"{literal(title)}{magnitude_note(probs)}{said}{averaged}{nonfinite_note(picked)}{_step_note(step)}"
    fit_title(fig, ax, text.lstrip(" ·"))  # over the grid, smaller or on more lines rather than past the edges
    return fig


def _grid_ticks(
    ax: Axes, axis: str, labels: Sequence[str] | None, count: int, starts: list[float], inches: float
) -> int:
    """Tick ``axis`` of the heads' grid at each token of each panel starting at ``starts`` (``inches`` long), with
    ``labels`` (indices when None), as many a panel as its length holds; returns the step between labelled tokens."""
    room = max(2, min(MAX_TICKS, int(inches * 72 / TICK_POINTS)))
    step = max(1, math.ceil(count / room))
    shown = np.arange(0, count, step)
    texts = [name_label(labels[int(i)]) if labels is not None else str(i) for i in shown]
    cell = inches / count
    ticks = [start + (i + 0.5) * cell for start in starts for i in shown]
    if axis == "x":
        ax.set_xticks(ticks, texts * len(starts), rotation=90, fontsize=7)
    else:
        ax.set_yticks(ticks, texts * len(starts), fontsize=7)
    return step
