"""Channel numbers on the feature-map grid: bold white matplotlib text on a dark box at each tile's top-left corner."""

from __future__ import annotations

import math
from functools import cache

from matplotlib.axes import Axes
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import text_to_path

SIZES = (8.0, 7.0)  # points: the larger where the label leaves half the tile free, else the smaller
PAD = 2  # CSS pixels of box around the digits (twice as many device pixels at ratio 2)
WEIGHT = "bold"  # thin strokes of a 6-point digit blur into the tile under it


def _font(size: float) -> FontProperties:
    return FontProperties(size=size, weight=WEIGHT)


@cache
def _ink(text: str, size: float, dpi: float) -> tuple[int, int]:
    """``(height, width)`` in whole pixels of ``text``'s ink at ``size`` points and ``dpi`` (the font's own metrics)."""
    width, height, descent = text_to_path.get_text_width_height_descent(text, _font(size), ismath=False)
    return math.ceil((height - descent) * dpi / 72), math.ceil(width * dpi / 72)


def _pad(dpi: float) -> int:
    return round(PAD * dpi / 96)


def box_size(text: str, size: float, dpi: float) -> tuple[int, int]:
    """``(height, width)`` in pixels of the dark box that holds ``text`` at ``size`` points."""
    height, width = _ink(text, size, dpi)
    pad = _pad(dpi)
    return height + 2 * pad, width + 2 * pad


def label_size(longest: str, tile: tuple[int, int], dpi: float) -> float | None:
    """The font size for labels in tiles of ``tile`` pixels, or None where even the smallest box does not fit."""
    height, width = tile
    for size in SIZES:
        box_h, box_w = box_size(longest, size, dpi)
        room = 2.0 if size == SIZES[0] else 1.0
        if box_h * room <= height and box_w * room <= width:
            return size
    return None


def add_labels(ax: Axes, labels: list[str], origins: list[tuple[int, int]], size: float, dpi: float) -> None:
    """Write each label white, baseline on its box's inner bottom edge, at its tile's top-left pixel ``(y, x)``.

    ``ax`` shows the grid image in its pixel coordinates: pixel ``(y, x)`` spans ``x ± 0.5``, ``y ± 0.5``.
    """
    font = _font(size)
    for label, (y, x) in zip(labels, origins, strict=True):
        baseline = y - 0.5 + _pad(dpi) + _ink(label, size, dpi)[0]
        ax.text(x - 0.5 + _pad(dpi), baseline, label, color="white", fontproperties=font, va="baseline", ha="left")
