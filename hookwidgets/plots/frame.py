"""The box a figure is drawn for: the pane's width in CSS pixels and the screen's device pixel ratio.

Every figure function sizes itself to ``current_frame().width`` (legends and colour bars inside it) and
``figure_png`` renders at ``96 × ratio`` dpi, so that the page shows the PNG at natural size / ratio, crisp on
HiDPI screens. The widget sets the frame its page reports (``using_frame``); headless use gets ``DEFAULT``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

CSS_DPI = 96
"""CSS pixels per inch: a figure's inches × CSS_DPI is its width on the page."""
MIN_WIDTH, MAX_WIDTH = 240, 4096
"""CSS pixels: the narrowest and widest figure drawn, whatever a page reports."""
MAX_RATIO = 4.0
"""The highest pixel ratio drawn at (a 4× PNG of a wide figure is already ~16× the bytes of a 1× one)."""


@dataclass(frozen=True)
class Frame:
    """The width a figure may take, in CSS pixels, and the device pixels per CSS pixel to render it at."""

    width: int = 720
    """CSS pixels: a figure is at most this wide, legends and colour bars included."""
    ratio: float = 1.0
    """Device pixels per CSS pixel: the PNG is ``ratio`` times the figure's CSS size."""

    @property
    def dpi(self) -> float:
        """The dpi to render at: a figure of W inches becomes ``W × dpi`` device pixels, ``W × 96`` CSS pixels."""
        return CSS_DPI * self.ratio

    @property
    def inches(self) -> float:
        """The width as matplotlib inches (``figsize``), at 96 CSS pixels an inch."""
        return self.width / CSS_DPI


DEFAULT = Frame()
"""Headless: a notebook output's usual width, at ratio 1."""

FrameLike = Frame | Mapping[str, Any] | None

_current: contextvars.ContextVar[Frame] = contextvars.ContextVar("hookwidgets_plot_frame", default=DEFAULT)


def as_frame(frame: FrameLike) -> Frame:
    """The Frame ``frame`` describes (None: ``DEFAULT``); a page's width and ratio are clamped to what can be
    drawn (``MIN_WIDTH``–``MAX_WIDTH``, 1–``MAX_RATIO`` in quarter steps); a missing or odd value is the default's."""
    if frame is None:
        return DEFAULT
    if isinstance(frame, Frame):
        return frame
    if not isinstance(frame, Mapping):
        raise TypeError(f"frame must be a Frame or a mapping with width and ratio, not {type(frame).__name__}")
    width, ratio = _number(frame.get("width")), _number(frame.get("ratio"))
    width = DEFAULT.width if width is None or width <= 0 else min(MAX_WIDTH, max(MIN_WIDTH, round(width)))
    # Quarter steps: a browser zoomed to 110% reports 1.1; drawing at 1.25 keeps the image crisp and the cache small.
    ratio = DEFAULT.ratio if ratio is None or ratio <= 0 else min(MAX_RATIO, max(1.0, math.ceil(ratio * 4 - 1e-6) / 4))
    return Frame(int(width), ratio)


def _number(value: Any) -> float | None:
    return (
        float(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        else None
    )


def current_frame() -> Frame:
    """The frame of the enclosing :func:`using_frame` block, else ``DEFAULT``."""
    return _current.get()


@contextlib.contextmanager
def using_frame(frame: FrameLike) -> Iterator[Frame]:
    """Within the block, figures are drawn for ``frame`` (the widget draws for the pane its page reports)."""
    token = _current.set(as_frame(frame))
    try:
        yield _current.get()
    finally:
        _current.reset(token)
