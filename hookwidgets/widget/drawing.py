"""The one way the view draws: every figure in the page's theme and for the figure pane it reports."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .view import ExplorerView


@contextlib.contextmanager
def drawing_for(view: ExplorerView | None) -> Iterator[None]:
    """A block whose figures are drawn in ``view``'s theme and for its frame (light, ``plots.frame.DEFAULT`` until
    the page reports them, and without a view)."""
    from ..plots.frame import using_frame  # matplotlib only when drawing
    from ..plots.theme import using_theme

    # A width of 0 is a page that has not measured its pane yet: the default frame at the reported ratio.
    frame = dict(view.frame) if view is not None else None
    with using_theme(view.theme if view is not None else None), using_frame(frame):
        yield
