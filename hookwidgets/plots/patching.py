"""Activation patching: a sweep's layers × positions as a diverging heatmap, positions labelled with tokens, red
always toward the clean run (``restoration``: the colours and the words that say them, from one place)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..core.display import shortened
from ._common import (
    as_float_array,
    empty_figure,
    fit_title,
    label_width,
    literal,
    name_label,
    nonfinite_note,
    show_image,
)
from .frame import CSS_DPI, current_frame
from .hover import axis, block_mean, describe_cells
from .scales import scaled_colorbar, signed_limits
from .sequences import _check_labels, _room, _step_note, label_tokens
from .theme import ThemeLike, themed

LABEL_SHARE = 0.35
"""The share of the figure's width layer names may take; longer ones keep their ends."""
MAX_SIDE = 256
"""Layers or positions described for the hover at most (block means past that: 65,536 values)."""
DIFFERS = "▼"
"""Drawn over each position where the clean and the corrupted tokens differ."""
MARK_POINTS = 7
"""Its height: the room kept between the heatmap and the title."""
QUANTITIES = {"recovered": "fraction recovered", "logit_diff": "logit difference gained"}
"""What the hover calls a cell's value, by the sweep's ``.metric``; "patching effect" for the others."""


@dataclass(frozen=True)
class Restoration:
    """How a sweep is coloured: the colour map (red toward the clean run), the value drawn white (the corrupted
    run's: no effect), and the words saying it (``legend`` for a caption, ``short`` for the figure's title)."""

    cmap: str
    centre: float
    legend: str
    short: str


def restoration(clean: float | None, corrupted: float | None) -> Restoration:
    """The colouring of a sweep whose metric is ``clean`` on the clean run and ``corrupted`` on the corrupted one:
    red is the clean side whichever sign it has; with no clean side known (None, equal), red is higher and says so."""
    centre = corrupted if corrupted is not None and math.isfinite(corrupted) else 0.0
    if clean is None or not math.isfinite(clean) or clean == centre:
        why = "the clean and corrupted runs measure the same" if clean is not None else "no clean value is known"
        legend = f"red: above {centre:.3g}, blue: below ({why}, so neither colour means restored)"
        return Restoration("RdBu_r", centre, legend, "red: higher")
    legend = (
        f"red: toward the clean run (a full restoration: {clean:.3g}), blue: away from it (white: no effect, "
        f"{centre:.3g})"
    )
    return Restoration("RdBu_r" if clean > centre else "RdBu", centre, legend, "red: toward clean")


@themed
def patch_sweep_figure(
    result: torch.Tensor | np.ndarray,
    *,
    tokens: Sequence[str] | None = None,
    layers: Sequence[str] | None = None,
    differs: Sequence[int] | None = None,
    title: str = "",
    theme: ThemeLike = None,
) -> Figure:
    """A patch sweep ``(L, T)`` (``ex.patch_sweep()``) as layers (rows) × positions (columns), on a scale symmetric
    around the corrupted run's value (clipped at a percentile when outliers would wash it out, said), red toward the
    clean run's (``restoration``), within the current frame's width. Each cell is described for the hover: the layer's
    name, the position's token, the effect.

    ``tokens``, ``layers`` and ``differs`` (positions marked ▼: clean and corrupted differ there) default to the
    result's own ``.tokens``, ``.layers`` and ``.differs``; ``.clean`` and ``.corrupted`` give the colours' direction.
    NaN/Inf cells are magenta and counted in the title.
    """
    tokens = getattr(result, "tokens", None) if tokens is None else tokens
    layers = getattr(result, "layers", None) if layers is None else layers
    differs = getattr(result, "differs", None) if differs is None else differs
    colours = restoration(getattr(result, "clean", None), getattr(result, "corrupted", None))
    if result.ndim != 2:
        raise ValueError(f"a patch sweep is (layers, positions), got shape {tuple(result.shape)}")
    if 0 in result.shape:
        return empty_figure(title, result.shape)
    values = as_float_array(result)
    rows, count = values.shape
    _check_labels(tokens, count, "positions (columns)")
    if layers is not None and len(layers) != rows:
        raise ValueError(f"{len(layers)} layer names for {rows} rows: give one name per layer")
    full = [shortened(str(name)) for name in layers] if layers is not None else [str(i) for i in range(rows)]
    fig_w = current_frame().width / CSS_DPI
    names = _fitted(full, LABEL_SHARE * fig_w)
    gap, cbar_w, right = 0.15, 0.12, 0.55  # inches: the colour bar, its ticks and its ×10ⁿ
    left = label_width([name_label(n) for n in names], 7) + 0.25
    heat_w = min(9.0, max(2.0, 0.22 * count), fig_w - left - gap - cbar_w - right)
    heat_h = min(9.0, max(1.2, 0.2 * rows))
    bottom, top = _room(tokens, count) + 0.25, 0.45
    fig = Figure(figsize=(left + heat_w + gap + cbar_w + right, bottom + heat_h + top), dpi=CSS_DPI)
    fw, fh = fig.get_size_inches()
    ax = fig.add_axes((left / fw, bottom / fh, heat_w / fw, heat_h / fh))
    cbar_ax = fig.add_axes(((left + heat_w + gap) / fw, bottom / fh, cbar_w / fw, heat_h / fh))
    limits = signed_limits(values - colours.centre)
    low, high = colours.centre + limits.vmin, colours.centre + limits.vmax
    image = show_image(ax, values, colours.cmap, low, high, aspect="auto", interpolation="none")
    step = label_tokens(ax, "x", tokens, count, heat_w)
    marked = _mark_differing(ax, sorted({int(t) for t in differs or () if 0 <= int(t) < count}))
    # As many layer names as the axis holds 7-point text apart: a deep model's every name would overlap.
    every = label_tokens(ax, "y", names if layers is not None else None, rows, heat_h)
    layer_note = f" [every {every}th layer labelled]" if every > 1 else ""
    ax.set_xlabel("position", fontsize=7)
    ax.set_ylabel("layer", fontsize=7)
    scaled_colorbar(fig.colorbar(image, cax=cbar_ax))
    cells, row_stride, col_stride = block_mean(
        values, min(rows, int(heat_h * CSS_DPI), MAX_SIDE), min(count, int(heat_w * CSS_DPI), MAX_SIDE)
    )
    shown_tokens = [shortened(str(t)) for t in tokens] if tokens is not None else None  # the page sets them as text
    if shown_tokens is not None:
        shown_tokens = [f"{t} {DIFFERS} differs" if i in marked else t for i, t in enumerate(shown_tokens)]
    describe_cells(
        ax,
        cells,
        row=axis("layer", full[::row_stride] if layers is not None else None, stride=row_stride, count=rows),
        col=axis("position", shown_tokens[::col_stride] if shown_tokens else None, stride=col_stride, count=count),
        extent=(-0.5, cells.shape[1] * col_stride - 0.5, cells.shape[0] * row_stride - 0.5, -0.5),
        label=title,
        quantity=QUANTITIES.get(str(getattr(result, "metric", "")), "patching effect"),
        aggregate="mean" if row_stride * col_stride > 1 else "",
    )
    means = f" [hover: means of {row_stride}×{col_stride}]" if row_stride * col_stride > 1 else ""
    clip = f" [{limits.note}]" if limits.note else ""
    differ_note = f" [{DIFFERS}: clean and corrupted differ]" if marked else ""
    notes = f" [{colours.short}]{differ_note}{nonfinite_note(values)}{_step_note(step)}{layer_note}{clip}{means}"
    fit_title(fig, ax, f"{literal(title)}{notes}".lstrip(), above=MARK_POINTS if marked else 0)
    return fig


def _mark_differing(ax: Axes, positions: list[int]) -> set[int]:
    """A ▼ over each of ``positions`` (columns) and their tick labels in bold; returns them."""
    if positions:
        for x in positions:
            ax.annotate(
                DIFFERS,
                (x, 1.0),
                xycoords=("data", "axes fraction"),
                ha="center",
                va="bottom",
                fontsize=MARK_POINTS - 1,
                annotation_clip=False,
            )
        for tick, label in zip(ax.get_xticks(), ax.get_xticklabels(), strict=False):
            if round(tick) in positions:
                label.set_fontweight("bold")
    return set(positions)


def _fitted(names: list[str], room: float) -> list[str]:
    """Layer names as their last characters after "…" where the longest would take more than ``room`` inches: the
    end of a module path tells the layers apart."""
    keep = max((len(n) for n in names), default=0)
    shown = names
    while keep > 8 and label_width([name_label(n) for n in shown], 7) + 0.25 > room:
        keep = int(keep * 0.8)
        shown = [f"…{n[-keep:]}" if len(n) > keep + 1 else n for n in names]
    return shown
