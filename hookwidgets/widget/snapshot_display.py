"""The explorer in a notebook: two outputs, the widget and then its static snapshot, which is kept current.

Where widgets run, the widget's CSS hides the snapshot's output (``js/src/widget.css``); where they do not (GitHub,
nbviewer, nbconvert, a notebook without its kernel) the snapshot shows. A saved notebook keeps what the explorer
showed last: the snapshot is replaced through its ``display_id`` (the kernel's ``update_display_data``) when the
view changes. Replacements carry the latest state and are coalesced: at the end of a cell that changed the view,
or, for a change between cells (a click in the page), ``UPDATE_INTERVAL_S`` after it, from a timer thread. A change
itself only marks the snapshot stale: a hook firing never draws or sends one.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from IPython.display import display

from .snapshot import closed_html, snapshot_html
from .view import ExplorerView

UPDATE_INTERVAL_S = 1.0
"""Between cells, a change reaches the saved snapshot this long after it, with every change made meanwhile."""
WATCHED = ("tree", "hooks", "hook_kinds", "selected", "plots", "summary", "status")
"""The view's traitlets the snapshot is drawn from (the status carries the step the heading counts)."""


class SnapshotDisplay:
    """The snapshot output of one explorer: shown under its widget, replaced when the view changes, and once,
    when the explorer closes, by the closed text.

    ``heading`` gives the explorer's repr (None once it is gone); every display of the explorer shares one
    ``display_id``, so each of them is replaced.
    """

    def __init__(self, view: ExplorerView, heading: Callable[[], str | None]) -> None:
        self.display_id = f"hookwidgets-snapshot-{uuid.uuid4().hex}"
        self._view = weakref.ref(view)
        self._heading = heading
        self._lock = threading.Lock()  # guards the flags and the timer; held for no drawing or sending
        self._sending = threading.Lock()  # one replacement at a time, and none after the closed one
        self._stale = False
        self._in_cell = True  # shown from a cell: its end sends the changes it made
        self._closed = False
        self._shown = False
        self._sent = 0  # hash of the HTML the display shows
        self._timer: threading.Timer | None = None
        self._shell: Any = None
        # Held weakly: IPython's events hold their callbacks, and a dropped explorer's snapshot must go with it.
        self._cell_callbacks = (
            ("pre_run_cell", _weak_call(self._cell_started)),
            ("post_run_cell", _weak_call(self._cell_done)),
        )
        changed = weakref.WeakMethod(self._changed)
        self._observer = lambda change: (m := changed()) and m(change)
        view.observe(self._observer, names=list(WATCHED))

    def show(self) -> None:
        """Display the snapshot (under the widget, which the caller displayed first) and follow the cells."""
        from IPython import get_ipython

        html = self._html()
        if html is None or get_ipython() is None:  # no shell, no notebook: nothing to show or to keep current
            return
        with self._sending:  # after any replacement under way, which showed an older state
            display({"text/html": html}, raw=True, display_id=self.display_id)
            self._sent = hash(html)
            with self._lock:
                self._shown, self._stale = True, False
        if self._shell is None:
            self._follow_cells()

    def close(self, heading: str) -> None:
        """The explorer closed: stop following the view and replace the snapshot, once, with the closed text."""
        with self._sending:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                self._cancel()
            self._unfollow()
            if self._shown:
                self._send(closed_html(heading))

    def _changed(self, change: dict[str, Any]) -> None:
        """The view changed: mark the snapshot stale; between cells, start the timer that sends it (if none runs)."""
        if change["name"] == "status" and change["old"].get("step") == change["new"].get("step"):
            return  # the status line itself is not in the snapshot: only the step its heading counts
        with self._lock:
            if self._closed or not self._shown:
                return
            self._stale = True
            if self._in_cell or self._timer is not None:
                return  # the cell's end, or the timer already set, sends the latest state
            self._timer = threading.Timer(UPDATE_INTERVAL_S, _weak_call(self._on_timer))
            self._timer.daemon = True
            self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            if self._in_cell:  # a cell started meanwhile: its end sends it
                return
        self._flush()

    def _cell_started(self, info: Any = None) -> None:
        with self._lock:
            self._in_cell = True
            self._cancel()

    def _cell_done(self, result: Any = None) -> None:
        with self._lock:
            self._in_cell = False
        self._flush()  # inside the cell's execution: a kernel runner (nbclient) sees it as that cell's output

    def _flush(self) -> None:
        """Send the snapshot as the view shows it now, if the view changed and the snapshot with it."""
        with self._sending:
            with self._lock:
                if self._closed or not self._stale:
                    return
                self._stale = False  # a change while drawing marks it stale again
            html = self._html()
            if html is not None and hash(html) != self._sent:  # e.g. a selection made and undone
                self._send(html)

    def _html(self) -> str | None:
        view, heading = self._view(), self._heading()
        return None if view is None or heading is None else snapshot_html(view, heading)

    def _send(self, html: str) -> None:
        self._sent = hash(html)
        with contextlib.suppress(Exception):  # the kernel is gone (interpreter exit): nothing to replace
            display({"text/html": html}, raw=True, display_id=self.display_id, update=True)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _follow_cells(self) -> None:
        from IPython import get_ipython

        self._shell = get_ipython()
        for event, callback in self._cell_callbacks:
            self._shell.events.register(event, callback)

    def _unfollow(self) -> None:
        view = self._view()
        if view is not None:
            with contextlib.suppress(ValueError):
                view.unobserve(self._observer, names=list(WATCHED))
        if self._shell is not None:
            for event, callback in self._cell_callbacks:
                with contextlib.suppress(ValueError):
                    self._shell.events.unregister(event, callback)
            self._shell = None


def _weak_call(method: Callable[..., None]) -> Callable[..., None]:
    """``method(*args)`` while its object lives: neither a pending timer nor IPython's events keep it alive."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> None:
        bound = ref()
        if bound is not None:
            bound(*args)

    return call
