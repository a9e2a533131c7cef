"""Statistics over steps: a line per statistic from ``stats`` records, and the per-layer summary as a heatmap."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib
import matplotlib.colors
import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.colorbar import Colorbar
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from ..core.capture.recomputes import once_each
from ..core.display import shortened
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
from ._text_fit import add_legend, cut_left, plan_legend, text_width
from .frame import CSS_DPI, current_frame
from .hover import axis, block_mean, describe_cells, describe_lines
from .scales import scaled_colorbar, signed_limits
from .theme import ThemeLike, as_theme, themed

STATS = ("mean", "std", "min", "max")
MAX_STEP_LABELS = 12
"""Step numbers written over a heatmap at most: each label costs matplotlib a text layout on every draw,
and hundreds of them (a long run's history) would also overlap."""
MAX_LAYER_LABELS = 200
"""Layer names written at most (each costs ~3 ms to draw at a pixel ratio of 2); the page names every row on hover."""
LABEL_PITCH = 0.15
"""Inches between two written layer names at least: 7-point text is 0.1 inch tall, and a gap."""
STATS_AXES_HEIGHT = 2.15
"""Inches (206 CSS px): the axes of statistics over steps, whatever the width."""
ROW_PX, BIG_ROW_PX, MIN_GRID_PX = 12.0, 20.0, 200.0
"""CSS pixels: a summary row's height at least (more for few layers, up to BIG_ROW_PX, to fill MIN_GRID_PX)."""
MAX_GRID_PX = 8000.0
"""CSS pixels: the tallest summary grid (under the PNG's 65,536 pixels at a ratio of 4); more layers, thinner rows."""
NAMED_GRID_PX = 600.0
"""CSS pixels: a grid whose every row can be named within this height names every row (a CNN's 15 layers)."""
LABEL_SHARE = 0.45
"""The share of the figure's width layer names may take."""
COLORBAR_BAND, COLORBAR_HEIGHT, STEP_BAND = 0.75, 2.5, 0.42
"""Inches: the colour bar and its labels beside the grid, its height at most, the step numbers above the grid."""
MAX_HOVER_VALUES = 65_536
"""Values a figure sends for the page to read under the mouse at most."""


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
    for name in stats:
        if name not in kept[0].stats:
            raise ValueError(f"no statistic {name!r}; records have {', '.join(kept[0].stats)}")
    values = {name: [r.stats[name] for r in kept] for name in stats}
    width = current_frame().width / CSS_DPI
    fig = Figure(figsize=(width, STATS_AXES_HEIGHT + 0.85), dpi=CSS_DPI)
    ax = fig.add_subplot()
    lines = [ax.plot(x, v, marker="o", markersize=3, linewidth=1.2, label=name)[0] for name, v in values.items()]
    bad = sorted({r.step for r in kept if r.stats.get("nan") or r.stats.get("inf")})
    for step in bad:
        ax.axvspan(step - 0.4, step + 0.4, color=NONFINITE_COLOR, alpha=0.25, linewidth=0)
    if log:
        ax.set_yscale("symlog", linthresh=1e-6)
    ax.set_xlabel("step", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at 2.5
    ax.tick_params(labelsize=7)
    note = f" [NaN/Inf at step {', '.join(map(str, bad))}, shaded magenta]" if bad else ""
    if any(r.stats.get("magnitude") for r in kept):  # statistics of a complex tensor's magnitude
        note = f"{MAGNITUDE}{note}"
    # Margins from the tick labels this data gives, without tight_layout's extra draw of the figure.
    locator, formatter = ax.yaxis.get_major_locator(), ax.yaxis.get_major_formatter()
    low, high = ax.get_ylim()
    ticks = [t for t in locator() if low <= t <= high]
    formatter.set_locs(ticks)
    top = 0.5 if formatter.get_offset() else 0.35  # an offset ("1e-5") is written above the axes
    left = label_width([formatter(t) for t in ticks], 7) + 0.2
    # Beside the axes when they keep room, else below the step label: never past the figure's right edge.
    plan = plan_legend(list(stats), width, margins=left + 0.15, axes_height=STATS_AXES_HEIGHT)
    fig.set_size_inches(width, STATS_AXES_HEIGHT + 0.5 + plan.height + top)
    set_margins(fig, left=left, right=0.15 + plan.width, bottom=0.5 + plan.height, top=top)
    fit_title(fig, ax, f"{literal(title)}{note}")  # may make the figure taller: the legend is placed after
    add_legend(fig, ax, lines, plan, bottom=plan.height + 0.05)
    describe_lines(ax, x, values, x_name="step")
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
    """``ex.summary()`` rows as a layers × steps heatmap of one field (e.g. ``grad_norm``, ``act_mean``), as wide
    as the frame and as tall as its rows need (``ROW_PX`` each at least): the pane scrolls it, never shrinks it.

    Grey cells had no record; a magenta cell is a NaN/Inf value, a magenta frame a tensor that held
    NaN/Inf. ``log`` uses a log scale when all values are positive; signed values get a scale symmetric around 0.
    Long layer names are cut from the left; under the mouse, each cell's layer (its full path), step and value.
    """
    if not rows:
        raise ValueError("the summary is empty: attach hooks with action='stats' and run the model first")
    if not any(field in row for row in rows):
        fields = sorted({k for row in rows for k in row} - {"step", "path"})
        raise ValueError(f"no field {field!r} in the summary; fields are {', '.join(fields)}")
    order = list(layers) if layers is not None else list(dict.fromkeys(row["path"] for row in rows))
    if not order:
        raise ValueError("no layers to draw: layers=[] names none; pass layers=None for every layer of the rows")
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
    signed = finite.any() and (grid[finite] < 0).any() and (grid[finite] > 0).any()
    vmin, vmax = finite_range(grid)
    norm, scale_note = None, ""
    if log and positive:
        # The range of the values themselves: finite_range widens a single value by ±0.5, which can
        # reach zero or below, where a log scale has no place (one layer and one step, or equal norms).
        low, high = float(grid[finite].min()), float(grid[finite].max())
        norm = matplotlib.colors.LogNorm(low, high) if high > low else matplotlib.colors.LogNorm(low / 2, high * 2)
    elif signed:
        limits = signed_limits(grid)
        vmin, vmax, scale_note = limits.vmin, limits.vmax, limits.note
    # Rows of a readable height (the figure grows down, the pane scrolls it); thinner only past MAX_GRID_PX.
    count = len(order)
    row_px = min(max(ROW_PX, min(BIG_ROW_PX, MIN_GRID_PX / count)), MAX_GRID_PX / count)
    if count * LABEL_PITCH * CSS_DPI <= NAMED_GRID_PX:  # a small model: rows tall enough to name each one
        row_px = max(row_px, LABEL_PITCH * CSS_DPI)
    grid_height = count * row_px / CSS_DPI
    width = current_frame().width / CSS_DPI
    # A name per row while names are LABEL_PITCH apart (at most MAX_LAYER_LABELS: a tick is a matplotlib object
    # costing ~3 ms); beyond, evenly spaced ones, so that no name is drawn small or over another.
    every = max(1, math.ceil(LABEL_PITCH * CSS_DPI / row_px - 1e-9))
    rows_shown = _labelled_columns(count, max(2, min(MAX_LAYER_LABELS, -(-count // every) + 1)))
    # Names cut from the left to LABEL_SHARE of the width: their ends tell rows apart, the page says them whole.
    room = LABEL_SHARE * width - 0.15
    labels = [cut_left(name_label(order[i]) or "(model)", room, 7) for i in rows_shown]  # "" is the root
    left = max((text_width(t, 7) for t in labels), default=0.0) + 0.15
    fig = Figure(figsize=(width, grid_height + 0.1), dpi=CSS_DPI)
    ax = fig.add_subplot()
    theme = as_theme(theme)  # @themed passes a Theme or None
    base = "RdBu_r" if signed and norm is None else "viridis"
    colormap = matplotlib.colormaps[base].with_extremes(bad=theme.missing if theme else MISSING_COLOR)
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
        ax.imshow(
            np.ma.masked_where(~broken, np.ones(grid.shape)),
            cmap=marker,
            aspect="auto",
            interpolation="nearest",
        )
    # Statistics are taken over the finite values, so a tensor that held NaN/Inf still has a value:
    # it keeps its colour and gets a magenta frame.
    tainted = _tainted(rows, field, where_layer, where_step, grid.shape) & ~broken
    frames = [Rectangle((j - 0.45, i - 0.45), 0.9, 0.9) for i, j in zip(*np.nonzero(tainted), strict=True)]
    if frames:  # one collection: a patch each costs ~1 ms to add and draw, thousands on a big model
        ax.add_collection(PatchCollection(frames, facecolor="none", edgecolor=NONFINITE_COLOR, linewidth=2))
    broken = broken | tainted
    ax.set_yticks(rows_shown, labels, fontsize=7)
    # Step numbers above the grid, where a tall summary is first seen; the colour bar beside its top.
    shown = _labelled_columns(len(steps))
    ax.set_xticks(shown, [str(steps[j]) for j in shown], fontsize=7)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel("step", fontsize=8)
    values, stride = _hover_values(grid, width - left - COLORBAR_BAND)
    notes = [f"{int(broken.sum())} NaN/Inf, magenta"] if broken.any() else []
    if len(rows_shown) < count:
        notes.append(f"{count:,} layers, one named every {rows_shown[1]}")
    if stride > 1:
        notes.append(f"the page reads means of {stride} steps")
    notes += [scale_note] if scale_note else []
    set_margins(fig, left=left, right=COLORBAR_BAND, bottom=0.1, top=0.01)
    note = f" [{'; '.join(notes)}]" if notes else ""
    fit_title(fig, ax, f"{literal(title or field)}{' (log)' if norm else ''}{note}")
    _grow_top(fig, STEP_BAND)
    box = ax.get_position()
    bar_height = min(grid_height, COLORBAR_HEIGHT) / fig.get_size_inches()[1]
    cax = fig.add_axes((box.x1 + 0.08 / width, box.y1 - bar_height, 0.12 / width, bar_height))
    bar = fig.colorbar(image, cax=cax)
    if norm is None:
        scaled_colorbar(bar)
    else:
        _log_colorbar(bar, norm)
    columns = [
        str(steps[j]) if stride == 1 else f"{steps[j]}–{steps[min(len(steps), j + stride) - 1]}"
        for j in range(0, len(steps), stride)
    ]
    describe_cells(
        ax,
        values,
        row=axis("layer", [shortened(name) or "(model)" for name in order]),  # whole, but for a hostile 100,000
        col=axis("step", columns, stride=stride, count=len(steps)),
        extent=(-0.5, len(steps) - 0.5, count - 0.5, -0.5),
        quantity=field,
        aggregate="mean" if stride > 1 else "",
    )
    return fig


def _hover_values(grid: np.ndarray, width: float) -> tuple[np.ndarray, int]:
    """The heatmap's values for the page: every cell while steps are no more than the grid's CSS pixels across and
    cells no more than ``MAX_HOVER_VALUES``, else means over blocks of steps (every layer stays one row); the stride."""
    rows, cols = grid.shape
    max_cols = max(1, min(cols, int(width * CSS_DPI), MAX_HOVER_VALUES // max(rows, 1)))
    values, _, stride = block_mean(grid, rows, max_cols)
    return values, stride


def _log_colorbar(bar: Colorbar, norm: matplotlib.colors.LogNorm) -> None:
    """Label a log colour bar within its band: powers of ten (10⁻³) when two or more are on it, else 1, 2 and 5
    times them written short ("0.0002"), never matplotlib's "2×10⁻⁴" at every minor tick."""
    low, high = float(norm.vmin), float(norm.vmax)  # type: ignore[arg-type]
    if math.floor(math.log10(high)) - math.ceil(math.log10(low)) < 1:
        bar.locator = LogLocator(subs=(1.0, 2.0, 5.0))
        bar.formatter = FuncFormatter(lambda value, _: f"{value:.2g}")
    bar.minorformatter = NullFormatter()
    bar.ax.tick_params(which="both", labelsize=7)


def _grow_top(fig: Figure, inches: float) -> None:
    """``inches`` more room above the axes, each kept where it is from the bottom (as ``fit_title`` grows them)."""
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + inches)
    scale = height / (height + inches)
    for axes in fig.axes:
        x0, y0, w, h = axes.get_position().bounds
        axes.set_position((x0, y0 * scale, w, h * scale))
