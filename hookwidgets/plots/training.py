"""Matplotlib figures of training-loop hooks: the update-to-weight ratio per parameter (no widgets)."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ._common import fit_title, name_label, set_margins
from ._text_fit import add_legend, plan_legend
from .frame import CSS_DPI, current_frame
from .hover import describe_lines
from .theme import ThemeLike, themed

# The rule of thumb for the update-to-weight ratio: about 1e-3 per step is healthy; far below means
# a learning rate too low, far above one too high.
HEALTHY_RATIO = 1e-3


RATIOS_AXES_HEIGHT = 2.4
"""Inches (230 CSS px): the axes of update ratios, whatever the width."""


@themed
def update_ratio_figure(
    records: list[dict[str, Any]],
    params: list[str] | None = None,
    max_params: int = 12,
    *,
    theme: ThemeLike = None,
) -> Figure:
    """‖Δw‖/‖w‖ per step, one line per parameter (the first ``max_params``), on a log scale with the 1e-3 guide.

    The legend names each parameter beside the axes, or below them in the columns that fit the frame's width;
    under the mouse, each parameter's recorded ratio at each step (NaN where it has none).
    """
    series: dict[str, dict[int, float]] = {}
    for r in records:
        if params is not None and r["param"] not in params:
            continue
        if r["param"] not in series and len(series) >= max_params:
            continue
        series.setdefault(r["param"], {})[r["step"]] = r["ratio"]
    # An all-zero weight or a frozen step (ratio 0, NaN) has no place on a log scale: not drawn, still read on hover.
    drawn = {
        name: [(step, ratio) for step, ratio in sorted(ratios.items()) if math.isfinite(ratio) and ratio > 0]
        for name, ratios in series.items()
    }
    drawn = {name: points for name, points in drawn.items() if points}
    width = current_frame().width / CSS_DPI
    fig = Figure(figsize=(width, RATIOS_AXES_HEIGHT + 0.9), dpi=CSS_DPI)
    ax = fig.add_subplot()
    lines = []
    for name, points in drawn.items():
        steps, ratios = zip(*points, strict=True)
        lines.extend(ax.plot(steps, ratios, marker="o", ms=2.5, linewidth=1, label=name_label(name)))
    # The guide first in the legend: one too long for the frame names its first entries and counts the rest.
    lines.insert(0, ax.axhline(HEALTHY_RATIO, color="#888", linestyle="--", linewidth=0.8, label="1e-3 guide"))
    plotted = [ratio for points in drawn.values() for _, ratio in points] + [HEALTHY_RATIO]
    ax.set_ylim(min(plotted) / 3, max(plotted) * 3)  # some room, and a range even when every ratio is equal
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at 2.5
    ax.set_ylabel("‖Δw‖ / ‖w‖", fontsize=8)
    ax.tick_params(labelsize=7)
    left = 0.75  # "‖Δw‖ / ‖w‖" and log tick labels such as 10⁻⁴
    labels = [str(line.get_label()) for line in lines]
    plan = plan_legend(labels, width, margins=left + 0.15, axes_height=RATIOS_AXES_HEIGHT)
    top = 0.35
    fig.set_size_inches(width, RATIOS_AXES_HEIGHT + 0.5 + plan.height + top)
    set_margins(fig, left=left, right=0.15 + plan.width, bottom=0.5 + plan.height, top=top)
    fit_title(fig, ax, "update-to-weight ratio per parameter" if series else "no update ratios recorded yet")
    add_legend(fig, ax, lines, plan, bottom=plan.height + 0.05)
    if series:
        steps_all = sorted({step for ratios in series.values() for step in ratios})
        values = {name: [ratios.get(step, math.nan) for step in steps_all] for name, ratios in series.items()}
        describe_lines(ax, steps_all, values, x_name="step", label="update-to-weight ratio")
    return fig
