"""The colours a figure is drawn in: the notebook's light or dark theme, or the colours a page reports.

Every figure function takes ``theme=``: ``"light"``, ``"dark"``, a :class:`Theme`, a mapping such as the widget's
``{"name": "dark", "background": "#111111", "foreground": "#e0e0e0"}``, or None for the theme of the enclosing
:func:`using_theme` block (matplotlib's own look outside one). Colour maps are kept: they read on both.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import matplotlib
import matplotlib.colors
from matplotlib.figure import Figure

from ._common import MISSING_COLOR

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType


@dataclass(frozen=True)
class Theme:
    """Figure colours: ``background`` (figure and axes), ``foreground`` (text, ticks), ``muted`` (spines, grid,
    guide lines) and ``missing`` (cells without a value)."""

    name: str
    """``"light"`` or ``"dark"``."""
    background: str
    """The figure's and the axes' face: the page's background, so that no image is a box of another colour."""
    foreground: str
    """Titles, labels and tick labels."""
    muted: str
    """Spines, ticks, grid and guide lines."""
    missing: str
    """Heatmap cells without a value."""

    @property
    def rc(self) -> dict[RcKeyType, Any]:
        """The matplotlib settings that draw a figure in this theme."""
        return {
            "figure.facecolor": self.background,
            "figure.edgecolor": self.background,
            "savefig.facecolor": self.background,
            "savefig.edgecolor": self.background,
            "axes.facecolor": self.background,
            "axes.edgecolor": self.muted,
            "axes.labelcolor": self.foreground,
            "axes.titlecolor": self.foreground,
            "text.color": self.foreground,
            "xtick.color": self.muted,
            "ytick.color": self.muted,
            "xtick.labelcolor": self.foreground,
            "ytick.labelcolor": self.foreground,
            "grid.color": self.muted,
            "legend.facecolor": self.background,
            "legend.edgecolor": self.muted,
            "legend.labelcolor": self.foreground,
        }

    def rgba(self, color: str) -> tuple[int, int, int, int]:
        """``color`` (one of this theme's) as 0–255 RGBA, for images composed in NumPy."""
        return tuple(round(255 * c) for c in matplotlib.colors.to_rgba(color))  # type: ignore[return-value]


LIGHT = Theme("light", background="#ffffff", foreground="#000000", muted="#555555", missing=MISSING_COLOR)
"""JupyterLab Light: black on white, as matplotlib draws by default."""
DARK = Theme("dark", background="#111111", foreground="#e7e7e7", muted="#a0a0a0", missing="#4a4a4a")
"""JupyterLab Dark's colours: light text on a near-black background; no-value cells a dark grey."""
THEMES = {"light": LIGHT, "dark": DARK}

ThemeLike = Theme | str | Mapping[str, Any] | None

_current: contextvars.ContextVar[Theme | None] = contextvars.ContextVar("hookwidgets_plot_theme", default=None)


def as_theme(theme: ThemeLike) -> Theme | None:
    """The Theme ``theme`` names (None stays None); a mapping's colours that matplotlib cannot read are left
    at its named theme's, so a page's odd value never breaks a drawing."""
    if theme is None or isinstance(theme, Theme):
        return theme
    if isinstance(theme, str):
        if theme not in THEMES:
            raise ValueError(f"theme must be 'light', 'dark', a Theme or a mapping, not {theme!r}")
        return THEMES[theme]
    if isinstance(theme, Mapping):
        name = theme.get("name")
        base = THEMES.get(name, LIGHT) if isinstance(name, str) else LIGHT
        colors = {k: v for k in ("background", "foreground") if _is_color(v := theme.get(k))}
        return replace(base, **colors)
    raise TypeError(f"theme must be 'light', 'dark', a Theme or a mapping, not {type(theme).__name__}")


def _is_color(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) <= 64 and matplotlib.colors.is_color_like(value)


def current_theme() -> Theme | None:
    """The theme of the enclosing :func:`using_theme` block, or None outside one."""
    return _current.get()


@contextlib.contextmanager
def using_theme(theme: ThemeLike) -> Iterator[Theme | None]:
    """Within the block, figures drawn with ``theme=None`` use ``theme`` (the widget draws in the page's theme)."""
    token = _current.set(as_theme(theme))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


Draw = TypeVar("Draw", bound=Callable[..., Figure])


def themed(draw: Draw) -> Draw:
    """Draw the figure ``draw`` returns in its ``theme=`` (or the current one): matplotlib's settings while it is
    built, then the tick colours set on every axes (ticks are made lazily, when the figure is drawn)."""

    @functools.wraps(draw)
    def wrapper(*args: Any, theme: ThemeLike = None, **kwargs: Any) -> Figure:
        chosen = as_theme(theme) if theme is not None else _current.get()
        if chosen is None:
            return draw(*args, theme=None, **kwargs)
        with matplotlib.rc_context(chosen.rc), using_theme(chosen):
            fig = draw(*args, theme=chosen, **kwargs)
        for ax in fig.axes:
            ax.tick_params(which="both", color=chosen.muted, labelcolor=chosen.foreground)
        return fig

    return wrapper  # type: ignore[return-value]
