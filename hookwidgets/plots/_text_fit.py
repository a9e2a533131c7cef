"""Fitting text into the frame's width: names cut from the left with "…", and legends beside the axes when there
is room, else below them in as many columns as fit (naming the first ones and counting the rest when too many)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.legend import Legend
from matplotlib.patches import Rectangle
from matplotlib.textpath import text_to_path

ELLIPSIS = "…"
LEGEND_SIZE = 7.0
"""Points: legend text, as tick labels."""
MIN_AXES = 3.2
"""Inches (307 CSS px): the narrowest axes a legend may take room beside; narrower, the legend goes below."""
MAX_LEGEND_ROWS = 5
"""Rows of a legend below the axes at most: beyond, it names the first entries and says how many more."""
MIN_ENTRY_TEXT = 1.1
"""Inches (106 CSS px): the least room a legend entry's text gets before fewer columns are used."""


@functools.cache
def _char_width(char: str, size: float) -> float:
    """Inches one character takes at ``size`` points (its advance, ~5% under what hinted rendering draws)."""
    return text_to_path.get_text_width_height_descent(char, FontProperties(size=size), ismath=False)[0] / 72


def text_width(text: str, size: float) -> float:
    """Inches ``text`` takes at ``size`` points, from its characters' widths (10% more, as ``label_width``)."""
    return 1.1 * sum(_char_width(c, size) for c in text)


def cut_left(text: str, inches: float, size: float) -> str:
    """``text`` with its start replaced by "…" so that it takes at most ``inches`` at ``size`` points: the end of a
    module path ("…h.11.mlp.c_proj") tells rows apart, where its start is shared by them."""
    if text_width(text, size) <= inches:
        return text
    room = inches - text_width(ELLIPSIS, size)
    kept = 0.0
    for start in range(len(text) - 1, -1, -1):
        kept += 1.1 * _char_width(text[start], size)
        if kept > room:
            return ELLIPSIS + text[start + 1 :]
    return text


@dataclass(frozen=True)
class LegendPlan:
    """Where a legend goes and what it says: ``beside`` the axes (``width`` inches at the right) or below them
    (``height`` inches at the bottom) in ``columns``; ``labels`` as drawn, ``more`` entries left unnamed."""

    beside: bool
    columns: int
    labels: list[str]
    more: int
    width: float
    height: float


def _handle_room(size: float) -> float:
    """Inches a legend entry takes besides its text: the line sample, the gap after it, the gap to the next."""
    return (2.0 + 0.8 + 2.0) * size / 72


def plan_legend(
    labels: Sequence[str], width: float, *, margins: float, axes_height: float, size: float = LEGEND_SIZE
) -> LegendPlan:
    """How the legend of ``labels`` fits a figure ``width`` inches wide whose axes have ``margins`` inches beside
    them and are ``axes_height`` tall: beside while the axes keep ``MIN_AXES`` and the entries fit their height,
    else below, across the figure's width."""
    row = (1.0 + 0.5) * size / 72 * 1.2  # a line and matplotlib's spacing, 20% more for ascenders
    widest = max((text_width(t, size) for t in labels), default=0.0)
    beside = 2 * 0.4 * size / 72 + _handle_room(size) - 2.0 * size / 72 + widest + 0.1
    if width - margins - beside >= MIN_AXES and len(labels) * row <= axes_height:
        return LegendPlan(True, 1, list(labels), 0, beside, 0.0)
    room = width - 0.2
    count = len(labels)
    for columns in range(count, 0, -1):  # whole names on the fewest rows
        if room / columns - _handle_room(size) >= widest:
            if math.ceil(count / columns) <= MAX_LEGEND_ROWS:
                return _below(labels, columns, count, widest, size, row)
            break
    # Names cut from the left, in columns of at least MIN_ENTRY_TEXT; the first ones named when still too many.
    columns = max(1, min(count, int(room // (MIN_ENTRY_TEXT + _handle_room(size)))))
    text = room / columns - _handle_room(size)
    shown = count if math.ceil(count / columns) <= MAX_LEGEND_ROWS else columns * MAX_LEGEND_ROWS - 1
    return _below(labels[:shown], columns, count, text, size, row)


def _below(labels: Sequence[str], columns: int, count: int, text: float, size: float, row: float) -> LegendPlan:
    cut = [cut_left(t, text, size) for t in labels]
    more = count - len(labels)
    if more:
        cut.append(f"+{more} more")
    rows = math.ceil(len(cut) / columns)
    return LegendPlan(False, columns, cut, more, 0.0, rows * row + 2 * 0.4 * size / 72)


def add_legend(fig: Figure, ax: Axes, handles: Sequence[Any], plan: LegendPlan, *, bottom: float = 0.0) -> Legend:
    """The legend ``plan`` says, on ``ax``: centred beside it, or centred under the axes with its top ``bottom``
    inches above the figure's lower edge. Call once the figure has its final size and the axes their place."""
    shown = list(handles[: len(plan.labels) - (1 if plan.more else 0)])
    if plan.more:  # an entry without a line sample: the count of those left unnamed
        shown.append(Rectangle((0, 0), 0, 0, visible=False))
    common: dict[str, Any] = {"fontsize": LEGEND_SIZE, "frameon": False}
    if plan.beside:
        return ax.legend(shown, plan.labels, loc="center left", bbox_to_anchor=(1.0, 0.5), **common)
    height = fig.get_size_inches()[1]
    return ax.legend(
        shown,
        plan.labels,
        loc="upper center",
        bbox_to_anchor=(0.5, bottom / height),
        bbox_transform=fig.transFigure,
        ncols=plan.columns,
        borderaxespad=0.0,
        columnspacing=2.0,
        **common,
    )
