"""Matplotlib figures of DDPInspector records: a bucket table and per-rank charts (no widgets)."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Bbox

from ..distributed.summary import bucket_rows, rank_steps
from ._common import name_label
from .theme import ThemeLike, as_theme, themed

COLUMNS = ("bucket", "numel", "MiB", "params", "first params", "grad norm", "ms (median)", "fp err")


@themed
def bucket_table_figure(records: list[dict[str, Any]], step: int | None = None, *, theme: ThemeLike = None) -> Figure:
    """The buckets of one step (default: the newest) as a table: size, parameters, norm, time, error."""
    rows = bucket_rows(records, step)
    # Sized to its rows: a title band and one band per row, the table filling the axes edge to edge.
    fig = Figure(figsize=(8.0, 0.45 + 0.24 * (max(len(rows), 1) + 1)))
    ax = fig.add_axes((0.01, 0.02, 0.98, 1 - 0.4 / fig.get_figheight()))
    ax.set_axis_off()
    if not rows:
        ax.set_title("no bucket records yet: run a backward pass of the DDP model", fontsize=9)
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
    widths = [0.07, 0.1, 0.07, 0.07, 0.35, 0.11, 0.12, 0.11]  # the parameter names get the room
    table = ax.table(
        cellText=cells, colLabels=COLUMNS, colWidths=widths, cellLoc="right", bbox=Bbox.from_bounds(0, 0, 1, 1)
    )
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    theme = as_theme(theme)  # @themed passes a Theme or None
    for (row, col), cell in table.get_celld().items():
        cell.set_edgecolor(theme.muted if theme else "#cccccc")
        cell.set_facecolor(theme.background if theme else "white")
        if row == 0:
            cell.set_facecolor(theme.missing if theme else "#eeeeee")
        if col == COLUMNS.index("first params"):
            cell.set_text_props(ha="left")
            cell.PAD = 0.02
    ranks = rows[0]["ranks"]
    ax.set_title(f"DDP buckets at step {rows[0]['step']} ({ranks} rank{'s' * (ranks != 1)})", fontsize=9)
    return fig


@themed
def rank_chart_figure(records: list[dict[str, Any]], *, theme: ThemeLike = None) -> Figure:
    """Per rank, over steps: communication time (summed over buckets) and the local gradient norm."""
    per_rank = rank_steps(records)
    fig = Figure(figsize=(8.0, 3.2))
    time_ax, norm_ax = fig.subplots(1, 2)
    for rank, series in per_rank.items():
        time_ax.plot(series["steps"], [s * 1e3 for s in series["seconds"]], marker="o", ms=3, label=f"rank {rank}")
        norm_ax.plot(series["steps"], series["grad_norm"], marker="o", ms=3, label=f"rank {rank}")
    time_ax.set_title("communication per step (ms, all buckets)", fontsize=9)
    norm_ax.set_title("local gradient norm before allreduce", fontsize=9)
    for ax in (time_ax, norm_ax):
        ax.set_xlabel("step", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at 2.5
        ax.tick_params(labelsize=7)
        if per_rank:
            ax.legend(fontsize=7)
    if not per_rank:
        time_ax.text(0.5, 0.5, "no bucket records yet", ha="center", va="center", transform=time_ax.transAxes)
    fig.tight_layout()
    return fig
