"""Statistics over steps: a line per statistic from ``stats`` records, and the per-layer summary as a heatmap."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib
import matplotlib.colors
import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from ..core.capture.recomputes import once_each
from ._common import (
    MAGNITUDE,
    MISSING_COLOR,
    NONFINITE_COLOR,
    finite_range,
    fit_title,
    label_width,
    literal,
    name_label,
    set_margins,
)
from .theme import ThemeLike, as_theme, themed

STATS = ("mean", "std", "min", "max")
MAX_STEP_LABELS = 12
MAX_LAYER_LABELS = 80
"""Step numbers written under a heatmap at most: each label costs matplotlib a text layout on every draw,
and hundreds of them (a long run's history) would also overlap."""
LABEL_PITCH = 0.15
"""Inches between two written layer names at least: 7-point text is 0.1 inch tall, and a gap."""
MAX_HEATMAP_HEIGHT = 16.0
"""Inches: a model of many layers gets a tall heatmap (the widget scrolls it, never shrinks it), up to this."""


@themed
def stats_figure(
    records: Iterable[Any],
    *,
    stats: Sequence[str] = STATS,
    title: str = "",
    log: bool = False,
    theme: ThemeLike = None,
) -> Figure:
    """One line per statistic over steps, from the Records of a ``stats`` hook; steps with NaN/Inf are shaded.

    A module called several times per step gives one point per call, at ``step + call / calls``. Statistics of
    a complex tensor (of its magnitude) say "(magnitude)" in the title. A forward a checkpoint recomputes counts once.
    """
    kept = [r for r in once_each(records) if getattr(r, "stats", None)]
    if not kept:
        raise ValueError("no statistics to draw: attach the hook with action='stats' and run the model")
    calls: dict[int, int] = {}
    for record in kept:
        calls[record.step] = max(calls.get(record.step, 0), record.call + 1)
    x = np.array([r.step + r.call / calls[r.step] for r in kept])
    legend = label_width(list(stats), 7) + 0.55  # inches: the names, their line samples and the padding
    fig = Figure(figsize=(5.6 + legend, 3.0))  # the legend beside the axes, which keep their width
    ax = fig.add_subplot()
    for name in stats:
        if name not in kept[0].stats:
            raise ValueError(f"no statistic {name!r}; records have {', '.join(kept[0].stats)}")
        ax.plot(x, [r.stats[name] for r in kept], marker="o", markersize=3, linewidth=1.2, label=name)
    bad = sorted({r.step for r in kept if r.stats.get("nan") or r.stats.get("inf")})
    for step in bad:
        ax.axvspan(step - 0.4, step + 0.4, color=NONFINITE_COLOR, alpha=0.25, linewidth=0)
    if log:
        ax.set_yscale("symlog", linthresh=1e-6)
    ax.set_xlabel("step", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at 2.5
    ax.tick_params(labelsize=7)
    # Beside the axes, not over the lines: "best" still covers data when every corner has some.
    ax.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    note = f" [NaN/Inf at step {', '.join(map(str, bad))}, shaded magenta]" if bad else ""
    if any(r.stats.get("magnitude") for r in kept):  # statistics of a complex tensor's magnitude
        note = f"{MAGNITUDE}{note}"
    # Margins from the tick labels this data gives, without tight_layout's extra draw of the figure.
    locator, formatter = ax.yaxis.get_major_locator(), ax.yaxis.get_major_formatter()
    low, high = ax.get_ylim()
    ticks = [t for t in locator() if low <= t <= high]
    formatter.set_locs(ticks)
    top = 0.5 if formatter.get_offset() else 0.35  # an offset ("1e-5") is written above the axes
    set_margins(fig, left=label_width([formatter(t) for t in ticks], 7) + 0.2, right=0.15 + legend, bottom=0.5, top=top)
    fit_title(fig, ax, f"{literal(title)}{note}")
    return fig


def _tainted(
    rows: Sequence[dict[str, Any]], field: str, layers: dict[str, int], steps: dict[int, int], shape: tuple[int, int]
) -> np.ndarray:
    """Cells whose tensor held NaN/Inf, from the ``<prefix>_nan``/``<prefix>_inf`` counts beside ``field``."""
    prefix = field.split("_", 1)[0]
    tainted = np.zeros(shape, dtype=bool)
    for row in rows:
        if row["path"] in layers and (row.get(f"{prefix}_nan") or row.get(f"{prefix}_inf")):
            tainted[layers[row["path"]], steps[row["step"]]] = True
    return tainted


def _labelled_columns(count: int, most: int = MAX_STEP_LABELS) -> list[int]:
    """The columns (or rows) whose label is written: all of up to ``most``, else every k-th and the last."""
    if count <= most:
        return list(range(count))
    every = -(-count // (most - 1))  # ceil: evenly spaced ones, leaving room for the last
    shown = list(range(0, count - 1, every))
    if count - 1 - shown[-1] < every:
        shown.pop()  # closer to the last column than the others are apart: its label could touch the last one
    return [*shown, count - 1]


@themed
def summary_heatmap_figure(
    rows: Sequence[dict[str, Any]],
    field: str = "grad_norm",
    *,
    layers: Sequence[str] | None = None,
    log: bool = True,
    title: str = "",
    theme: ThemeLike = None,
) -> Figure:
    """``ex.summary()`` rows as a layers × steps heatmap of one field (e.g. ``grad_norm``, ``act_mean``).

    Grey cells had no record; a magenta cell is a NaN/Inf value, a magenta frame a tensor that held
    NaN/Inf. ``log`` uses a log scale when all values are positive.
    """
    if not rows:
        raise ValueError("the summary is empty: attach hooks with action='stats' and run the model first")
    if not any(field in row for row in rows):
        fields = sorted({k for row in rows for k in row} - {"step", "path"})
        raise ValueError(f"no field {field!r} in the summary; fields are {', '.join(fields)}")
    order = list(layers) if layers is not None else list(dict.fromkeys(row["path"] for row in rows))
    steps = sorted({row["step"] for row in rows})
    grid = np.full((len(order), len(steps)), np.nan, dtype=np.float64)
    present = np.zeros(grid.shape, dtype=bool)
    where_layer, where_step = {t: i for i, t in enumerate(order)}, {s: j for j, s in enumerate(steps)}
    for row in rows:
        if row["path"] in where_layer and field in row:
            i, j = where_layer[row["path"]], where_step[row["step"]]
            grid[i, j], present[i, j] = row[field], True
    finite = np.isfinite(grid)
    positive = finite.any() and (grid[finite] > 0).all()
    vmin, vmax = finite_range(grid)
    norm = None
    if log and positive:
        # The range of the values themselves: finite_range widens a single value by ±0.5, which can
        # reach zero or below, where a log scale has no place (one layer and one step, or equal norms).
        low, high = float(grid[finite].min()), float(grid[finite].max())
        norm = matplotlib.colors.LogNorm(low, high) if high > low else matplotlib.colors.LogNorm(low / 2, high * 2)
    height = min(MAX_HEATMAP_HEIGHT, 1.2 + 0.22 * len(order))
    fig = Figure(figsize=(min(10.0, 2.6 + 0.35 * len(steps)), height))
    ax = fig.add_subplot()
    theme = as_theme(theme)  # @themed passes a Theme or None
    colormap = matplotlib.colormaps["viridis"].with_extremes(bad=theme.missing if theme else MISSING_COLOR)
    image = ax.imshow(
        np.ma.masked_invalid(grid),
        cmap=colormap,
        norm=norm,
        vmin=None if norm else vmin,
        vmax=None if norm else vmax,
        aspect="auto",
        interpolation="nearest",
    )
    broken = present & ~finite
    if broken.any():
        marker = matplotlib.colors.ListedColormap([NONFINITE_COLOR]).with_extremes(bad=(0, 0, 0, 0))
        ax.imshow(np.ma.masked_where(~broken, np.ones(grid.shape)), cmap=marker, aspect="auto", interpolation="nearest")
    # Statistics are taken over the finite values, so a tensor that held NaN/Inf still has a value:
    # it keeps its colour and gets a magenta frame.
    tainted = _tainted(rows, field, where_layer, where_step, grid.shape) & ~broken
    frames = [Rectangle((j - 0.45, i - 0.45), 0.9, 0.9) for i, j in zip(*np.nonzero(tainted), strict=True)]
    if frames:  # one collection: a patch each costs ~1 ms to add and draw, thousands on a big model
        ax.add_collection(PatchCollection(frames, facecolor="none", edgecolor=NONFINITE_COLOR, linewidth=2))
    broken = broken | tainted
    # A tick per layer while names are LABEL_PITCH apart (at most MAX_LAYER_LABELS: a tick is a matplotlib
    # object costing ~1 ms); beyond, evenly spaced ones, so that no name is drawn small or over another.
    readable = int((height - 0.85) / LABEL_PITCH)  # the axes' height: the figure's less its margins
    rows_shown = _labelled_columns(len(order), max(2, min(MAX_LAYER_LABELS, readable)))
    labels = [name_label(order[i]) or "(model)" for i in rows_shown]  # "" is the root
    ax.set_yticks(rows_shown, labels, fontsize=7)
    if len(rows_shown) < len(order):
        ax.set_ylabel(f"{len(order):,} layers in model order (one named every {rows_shown[1]})", fontsize=8)
    shown = _labelled_columns(len(steps))
    ax.set_xticks(shown, [str(steps[j]) for j in shown], fontsize=7)
    ax.set_xlabel("step", fontsize=8)
    note = f" [{int(broken.sum())} NaN/Inf, magenta]" if broken.any() else ""
    # Margins from the widest row label, not tight_layout: that draws the whole figure once more, a third
    # of the heatmap's time with a label per layer, on every live redraw of the summary.
    ylabel = 0.25 if len(rows_shown) < len(order) else 0.0  # room for the axis label beside the names
    set_margins(fig, left=label_width(labels, 7) + 0.2 + ylabel, right=0.75, bottom=0.5, top=0.35)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    fit_title(fig, ax, f"{literal(title or field)}{' (log)' if norm else ''}{note}")
    return fig
