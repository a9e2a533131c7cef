"""Matplotlib figures of training-loop hooks: the update-to-weight ratio per parameter (no widgets)."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ._common import name_label
from .theme import ThemeLike, themed

# The rule of thumb for the update-to-weight ratio: about 1e-3 per step is healthy; far below means
# a learning rate too low, far above one too high.
HEALTHY_RATIO = 1e-3


@themed
def update_ratio_figure(
    records: list[dict[str, Any]],
    params: list[str] | None = None,
    max_params: int = 12,
    *,
    theme: ThemeLike = None,
) -> Figure:
    """‖Δw‖/‖w‖ per step, one line per parameter (the first ``max_params``), on a log scale with the 1e-3 guide."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for r in records:
        if params is not None and r["param"] not in params:
            continue
        if r["param"] not in series and len(series) >= max_params:
            continue
        if not math.isfinite(r["ratio"]) or r["ratio"] <= 0:
            continue  # an all-zero weight or a frozen step has no place on a log scale
        steps, ratios = series.setdefault(r["param"], ([], []))
        steps.append(r["step"])
        ratios.append(r["ratio"])
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    for name, (steps, ratios) in series.items():
        ax.plot(steps, ratios, marker="o", ms=2.5, linewidth=1, label=name_label(name))
    ax.axhline(HEALTHY_RATIO, color="#888", linestyle="--", linewidth=0.8, label="1e-3 guide")
    plotted = [r for _, ratios in series.values() for r in ratios] + [HEALTHY_RATIO]
    ax.set_ylim(min(plotted) / 3, max(plotted) * 3)  # some room, and a range even when every ratio is equal
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at 2.5
    ax.set_ylabel("‖Δw‖ / ‖w‖", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title("update-to-weight ratio per parameter" if series else "no update ratios recorded yet", fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig
