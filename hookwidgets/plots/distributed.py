"""Matplotlib figures of DDPInspector records: a bucket table and per-rank charts (no widgets), drawn for the frame's
width: the table's columns sized to what they hold, the charts side by side when both keep room, else stacked."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Bbox

from ..distributed.summary import bucket_rows, rank_steps
from ._common import MIN_FONT, fit_title, name_label
from ._text_fit import MIN_AXES, add_legend, plan_legend, text_width
from .frame import CSS_DPI, current_frame
from .hover import describe_lines
from .theme import ThemeLike, as_theme, themed

COLUMNS = ("bucket", "numel", "MiB", "params", "first params", "grad norm", "ms (median)", "fp err")
NAMES = COLUMNS.index("first params")
CHART_HEIGHT = 2.0
"""Inches (192 CSS px): each per-rank chart's axes."""


@themed
def bucket_table_figure(records: list[dict[str, Any]], step: int | None = None, *, theme: ThemeLike = None) -> Figure:
    """The buckets of one step (default: the newest) as a table: size, parameters, norm, time, error; as wide as
    the frame, each column as wide as what it holds, the parameter names given the rest (cut with "…")."""
    rows = bucket_rows(records, step)
    width = current_frame().width / CSS_DPI
    # Sized to its rows: a title band and one band per row, the table filling the axes edge to edge.
    fig = Figure(figsize=(width, 0.45 + 0.24 * (max(len(rows), 1) + 1)), dpi=CSS_DPI)
    ax = fig.add_axes((0.01, 0.02, 0.98, 1 - 0.4 / fig.get_figheight()))
    ax.set_axis_off()
    if not rows:
        fit_title(fig, ax, "no bucket records yet: run a backward pass of the DDP model")
        return fig
    cells = [
        [
            str(r["bucket"]),
            f"{r['numel']:,}",
            f"{r['bytes'] / 2**20:.2f}",
            str(r["params"]),
            name_label(r["names"]),
            f"{r['grad_norm_mean']:.3g}",
            f"{r['seconds_median'] * 1e3:.2f}",
            "—" if r["compression_error_max"] is None else f"{r['compression_error_max']:.2e}",
        ]
        for r in rows
    ]
    room = 0.98 * width
    size, inches = 9.0, _column_inches(cells, 9.0)
    header = text_width(COLUMNS[NAMES], 9.0) + 0.12
    if sum(inches) - inches[NAMES] + header > room:  # the numbers do not fit at 9 points: at the smallest text
        size, inches = MIN_FONT, _column_inches(cells, MIN_FONT)
        header = text_width(COLUMNS[NAMES], MIN_FONT) + 0.12
    others = sum(inches) - inches[NAMES]
    inches[NAMES] = max(header, room - others)  # the parameter names get the rest, cut to it
    for row in cells:
        row[NAMES] = _cut_right(row[NAMES], inches[NAMES] - 0.1, size)
    total = sum(inches)
    table = ax.table(
        cellText=cells,
        colLabels=COLUMNS,
        colWidths=[w / total for w in inches],
        cellLoc="right",
        bbox=Bbox.from_bounds(0, 0, 1, 1),
    )
    table.auto_set_font_size(False)
    table.set_fontsize(size)
    theme = as_theme(theme)  # @themed passes a Theme or None
    for (line, col), cell in table.get_celld().items():
        cell.set_edgecolor(theme.muted if theme else "#cccccc")
        cell.set_facecolor(theme.background if theme else "white")
        if line == 0:
            cell.set_facecolor(theme.missing if theme else "#eeeeee")
        if col == NAMES:
            cell.set_text_props(ha="left")
            cell.PAD = 0.02
    ranks = rows[0]["ranks"]
    fit_title(fig, ax, f"DDP buckets at step {rows[0]['step']} ({ranks} rank{'s' * (ranks != 1)})")
    return fig


def _column_inches(cells: list[list[str]], size: float) -> list[float]:
    """Inches each column needs at ``size`` points: its widest text (header included) and the cell's padding."""
    return [
        max(text_width(text, size) for text in [COLUMNS[k], *(row[k] for row in cells)]) + 0.12
        for k in range(len(COLUMNS))
    ]


def _cut_right(text: str, inches: float, size: float) -> str:
    """``text`` cut at its end with "…" to take at most ``inches``: a list of names keeps its first ones."""
    if text_width(text, size) <= inches:
        return text
    while text and text_width(text + "…", size) > inches:
        text = text[:-1]
    return text + "…"


@themed
def rank_chart_figure(records: list[dict[str, Any]], *, theme: ThemeLike = None) -> Figure:
    """Per rank, over steps: communication time (summed over buckets) and the local gradient norm; side by side
    when the frame is wide enough, else one above the other; the legend below them, as many columns as fit."""
    per_rank = rank_steps(records)
    width = current_frame().width / CSS_DPI
    left, right, gap = 0.55, 0.15, 0.55
    side = width - left - right - gap - left >= 2 * MIN_AXES
    labels = [f"rank {rank}" for rank in per_rank]
    plan = plan_legend(labels, width, margins=width, axes_height=0.0)  # below: one legend for both charts
    band = 0.5  # each chart's step label and ticks under it
    title = 0.35
    height = CHART_HEIGHT + band + title if side else 2 * (CHART_HEIGHT + band + title)
    fig = Figure(figsize=(width, height + plan.height), dpi=CSS_DPI)
    bottom = band + plan.height
    inner = width - left - right
    if side:
        each = (inner - gap - left) / 2
        boxes = [(left, bottom, each), (left + each + gap + left, bottom, each)]
    else:
        boxes = [(left, bottom + CHART_HEIGHT + band + title, inner), (left, bottom, inner)]
    total = fig.get_size_inches()[1]
    time_ax, norm_ax = (fig.add_axes((x / width, y / total, w / width, CHART_HEIGHT / total)) for x, y, w in boxes)
    steps = sorted({s for series in per_rank.values() for s in series["steps"]})
    times: dict[str, list[float]] = {}
    norms: dict[str, list[float]] = {}
    lines = []
    for label, series in zip(labels, per_rank.values(), strict=True):
        ms = [s * 1e3 for s in series["seconds"]]
        lines.extend(time_ax.plot(series["steps"], ms, marker="o", ms=3, label=label))
        norm_ax.plot(series["steps"], series["grad_norm"], marker="o", ms=3, label=label)
        at = {s: k for k, s in enumerate(series["steps"])}
        times[label] = [ms[at[s]] if s in at else math.nan for s in steps]
        norms[label] = [series["grad_norm"][at[s]] if s in at else math.nan for s in steps]
    for ax in (time_ax, norm_ax):
        ax.set_xlabel("step", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at 2.5
        ax.tick_params(labelsize=7)
    fit_title(fig, time_ax, "communication per step (ms, all buckets)")
    fit_title(fig, norm_ax, "local gradient norm before allreduce")
    if not per_rank:
        time_ax.text(0.5, 0.5, "no bucket records yet", ha="center", va="center", transform=time_ax.transAxes)
        return fig
    add_legend(fig, time_ax, lines, plan, bottom=plan.height + 0.05)
    describe_lines(time_ax, steps, times, x_name="step", label="communication ms")
    describe_lines(norm_ax, steps, norms, x_name="step", label="local gradient norm")
    return fig
