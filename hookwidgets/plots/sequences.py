"""Sequences: tokens × features with token labels, attention heads, a vision transformer's tokens on its patch grid."""

from __future__ import annotations

import math
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
from .theme import ThemeLike, themed

MAX_FEATURES = 128
"""Features (columns) a token map draws by default; each token's norm is over all of them."""
MAX_TICKS = 64
"""Labelled positions on one axis at most; a longer sequence labels every k-th token and says so in the title."""
TICK_POINTS = 8.0  # points of axis length per labelled tick: 7-point labels, a little apart


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


@themed
def token_map_figure(
    tensor: torch.Tensor | np.ndarray,
    tokens: Sequence[str] | None = None,
    *,
    item: int = 0,
    title: str = "",
    max_features: int = MAX_FEATURES,
    diverging: bool = False,
    theme: ThemeLike = None,
) -> Figure:
    """A sequence ``(N, T, D)`` or ``(T, D)`` as a tokens × features heatmap, one row per token labelled with
    ``tokens``, and each token's norm (over all its features) as a bar beside it.

    Dimensions after T are flattened into features; the first ``max_features`` are drawn. NaN/Inf cells and the
    norm bars of their tokens are magenta; complex values are drawn as their magnitude.
    """
    if is_empty(tensor):
        return empty_figure(title, tensor.shape)
    if tensor.ndim < 2:
        raise ValueError(f"a token map needs (N, T, D) or (T, D), got shape {tuple(tensor.shape)}")
    one = _item(tensor, item, 3)
    values = as_float_array(one.reshape(one.shape[0], -1))
    count, features = values.shape
    _check_labels(tokens, count, "tokens (rows)")
    shown = values[:, :max_features]
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.square(values.astype(np.float64)).sum(axis=1))
    height = min(12.0, max(1.6, 0.16 * count))
    heat_w = min(7.0, max(2.0, 0.06 * shown.shape[1]))
    left, bottom, top, gap, bar_w, cbar_w = _room(tokens, count) + 0.15, 0.45, 0.45, 0.12, 1.0, 0.12
    width = left + heat_w + gap + bar_w + 0.5 + cbar_w + 0.45
    fig = Figure(figsize=(width, height + bottom + top))
    fw, fh = fig.get_size_inches()
    ax = fig.add_axes((left / fw, bottom / fh, heat_w / fw, height / fh))
    bar_ax = fig.add_axes(((left + heat_w + gap) / fw, bottom / fh, bar_w / fw, height / fh), sharey=ax)
    cbar_ax = fig.add_axes(((left + heat_w + gap + bar_w + 0.5) / fw, bottom / fh, cbar_w / fw, height / fh))
    vmin, vmax = finite_range(shown, diverging)
    image = show_image(ax, shown, "RdBu_r" if diverging else "viridis", vmin, vmax, aspect="auto", interpolation="none")
    step = label_tokens(ax, "y", tokens, count, height)
    ax.set_xlabel("feature", fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    finite = np.isfinite(norms)
    bar_ax.barh(np.arange(count), np.where(finite, norms, 0.0), height=0.85, color="#2e86c1")
    if not finite.all():
        top_norm = float(norms[finite].max()) if finite.any() else 1.0
        bar_ax.barh(np.flatnonzero(~finite), top_norm or 1.0, height=0.85, color=NONFINITE_COLOR)
    bar_ax.set_ylim(count - 0.5, -0.5)  # row 0 on top, as in the heatmap
    bar_ax.tick_params(axis="y", left=False, labelleft=False)
    bar_ax.tick_params(axis="x", labelsize=7)
    bar_ax.set_xlabel("norm", fontsize=7)
    colorbar = fig.colorbar(image, cax=cbar_ax)
    colorbar.ax.tick_params(labelsize=7)
    more = f" (first {shown.shape[1]} of {features} features)" if features > shown.shape[1] else ""
    text = f"{literal(title)}{magnitude_note(tensor)}{more}{nonfinite_note(values)}{_step_note(step)}"
    fit_title(fig, ax, text)
    return fig


@themed
def attention_heads_figure(
    probs: torch.Tensor | np.ndarray,
    tokens: Sequence[str] | None = None,
    *,
    item: int = 0,
    heads: int | Sequence[int] | None = None,
    title: str = "",
    key_tokens: Sequence[str] | None = None,
    theme: ThemeLike = None,
) -> Figure:
    """Attention probabilities ``(N, H, T_q, T_k)``, ``(H, T_q, T_k)`` or ``(T_q, T_k)``: one heatmap per head,
    queries as rows and keys as columns, all on one scale.

    ``tokens`` label the queries, and the keys too unless ``key_tokens`` (cross-attention) is given;
    ``heads`` is one head, a list of heads, or None for all of them.
    """
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
    columns = math.ceil(math.sqrt(len(chosen)))
    rows = math.ceil(len(chosen) / columns)
    panel = min(4.0, 1.5 + 0.16 * max(queries, keys)) if len(chosen) > 1 else min(7.0, 2.5 + 0.16 * keys)
    fig = Figure(figsize=(min(12.0, panel * columns + 1.0), min(12.0, panel * rows + 0.6)))
    axes = fig.subplots(rows, columns, squeeze=False)
    inches = min(panel, 12.0 / max(rows, columns))
    vmin, vmax = finite_range(values[chosen])
    step = 1  # chosen holds a head at least (checked above): the loop draws the image the colour bar reads
    for ax, head in zip(axes.flat, chosen, strict=False):
        image = show_image(ax, values[head], "magma", vmin, vmax, aspect="auto" if queries != keys else "equal")
        if key_tokens is not None or tokens is not None:
            step = max(step, label_tokens(ax, "x", key_tokens, keys, inches))
            step = max(step, label_tokens(ax, "y", tokens, queries, inches))
        ax.set_title(f"head {head}", fontsize=8)
    for ax in list(axes.flat)[len(chosen) :]:
        ax.set_axis_off()
    axes[0, 0].set_ylabel("query", fontsize=7)
    axes[-1, 0].set_xlabel("key", fontsize=7)
    text = f"{literal(title)}{magnitude_note(probs)}{nonfinite_note(values[chosen])}{_step_note(step)}"
    fig.suptitle(text, fontsize=9)
    fig.colorbar(image, ax=list(axes.flat), fraction=0.03, pad=0.02)
    return fig


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
