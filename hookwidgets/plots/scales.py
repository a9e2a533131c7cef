"""Colour scales that say what they are: colour bars with their offset and exponent in view, and symmetric
scales for signed data whose percentile clip is stated."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from matplotlib.colorbar import Colorbar
from matplotlib.ticker import ScalarFormatter

CLIP_PERCENTILE = 99.5
"""A signed scale ends at this percentile of |x| when a few outliers would otherwise wash every other value out."""
OUTLIER_FACTOR = 2.0
"""…that is, when the largest |x| is more than this many times the percentile."""


@dataclass(frozen=True)
class Limits:
    """A colour scale's ends and what the figure must say about them (``note``: "" when nothing is clipped)."""

    vmin: float
    vmax: float
    note: str = ""


def signed_limits(values: np.ndarray, percentile: float = CLIP_PERCENTILE) -> Limits:
    """A scale symmetric around zero for signed data (gradients, attributions, differences): ±max |x|, or
    ±the ``percentile`` of |x| when the largest is over ``OUTLIER_FACTOR`` times it, with a note saying so."""
    finite = np.abs(values[np.isfinite(values)])
    if not finite.size or not finite.max():
        return Limits(-1.0, 1.0)
    top = float(finite.max())
    clip = float(np.percentile(finite, percentile))
    if clip > 0 and top > OUTLIER_FACTOR * clip:
        beyond = int((finite > clip).sum())
        return Limits(
            -clip,
            clip,
            f"colours clipped at ±{clip:.3g} ({percentile:g}th percentile of |x|; {beyond} beyond, max {top:.3g})",
        )
    return Limits(-top, top)


_SUPERSCRIPT = str.maketrans("0123456789-−+", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁻⁺")


class _ShortFormatter(ScalarFormatter):
    """ScalarFormatter's ticks, with its factor written "×10⁻⁴" in plain text: mathtext ("$\\times 10^{-4}$") parses
    each label with pyparsing, ~20 ms a colour bar on every redraw."""

    def get_offset(self) -> str:
        plain = super().get_offset()  # "1e−4", "+1.5", "1e3+2.5e4"
        factor = re.sub(r"^1e([−+-]?\d+)", lambda m: "×10" + m[1].translate(_SUPERSCRIPT), plain)
        return re.sub(r"(\d)e([−+-]?\d+)", lambda m: f"{m[1]}×10" + m[2].translate(_SUPERSCRIPT), factor)


def scaled_colorbar(bar: Colorbar, size: float = 7) -> None:
    """Tick ``bar`` with short labels and its common factor as ×10ⁿ (and any offset) written above it, inside the
    figure: "0.0002(" cut at the figure's edge becomes "2" under "×10⁻⁴"."""
    formatter = _ShortFormatter()
    formatter.set_powerlimits((-2, 3))
    bar.formatter = formatter
    bar.ax.tick_params(labelsize=size)
    bar.update_ticks()
    offset = bar.ax.yaxis.get_offset_text() if bar.orientation == "vertical" else bar.ax.xaxis.get_offset_text()
    offset.set_fontsize(size)
    if bar.orientation == "vertical":
        offset.set_horizontalalignment("left")  # above the bar, growing into the figure rather than past its edge
        offset.set_x(0.0)
