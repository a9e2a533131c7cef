"""Fitting a grid to the frame: how many cells a box of CSS pixels shows, the values its hover carries, and the
room a colour bar takes beside a plot."""

from __future__ import annotations

import math

import numpy as np

from .frame import CSS_DPI
from .hover import block_mean

MAX_HOVER_VALUES = 65_536
"""Values one figure's hover carries at most (all its grids together): a payload at most ~2× its PNG."""
BAR_WIDTH, BAR_ROOM = 0.12, 0.5
"""Inches: a vertical colour bar, and its tick labels and ×10ⁿ beside it."""


def pixels(inches: float) -> int:
    """CSS pixels of ``inches`` of figure (at least 1)."""
    return max(1, int(inches * CSS_DPI))


def fitted(values: np.ndarray, width_in: float, height_in: float) -> tuple[np.ndarray, int, int]:
    """``values`` (rows × cols) block-averaged to at most one cell per CSS pixel of a ``width_in`` × ``height_in``
    box; returns (cells, row stride, column stride) as ``block_mean``."""
    return block_mean(values, pixels(height_in), pixels(width_in))


def bounded(values: np.ndarray, budget: int) -> tuple[np.ndarray, int, int]:
    """``values`` block-averaged until at most ``budget`` cells remain (the hover's share of a figure), keeping the
    grid's proportions; returns (cells, row stride, column stride)."""
    rows, cols = values.shape
    if rows * cols <= budget:
        return values.astype(np.float32, copy=False), 1, 1
    factor = math.sqrt(rows * cols / max(1, budget))
    max_rows, max_cols = max(1, int(rows / factor)), max(1, int(cols / factor))
    while math.ceil(rows / math.ceil(rows / max_rows)) * math.ceil(cols / math.ceil(cols / max_cols)) > budget:
        max_rows, max_cols = max(1, max_rows - 1), max(1, max_cols - 1)
    return block_mean(values, max_rows, max_cols)


def blocks_note(what: str, stride: int) -> str:
    """`` · features averaged in blocks of 4`` for a title, or ``""`` when nothing is averaged."""
    return f" · {what} averaged in blocks of {stride}" if stride > 1 else ""


def power_of(values: np.ndarray) -> tuple[float, str]:
    """(divisor, label suffix) that write ``values`` with short numbers: ``(1e-3, " (×10⁻³)")`` for norms near
    0.004, ``(1.0, "")`` when they read well as they are (10⁻² to 10³)."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    if not top or 1e-2 <= top < 1e4:
        return 1.0, ""
    power = math.floor(math.log10(top))
    return 10.0**power, f" (×10$^{{{power}}}$)"
