"""The run view: a ``RunView`` displayed (``hookwidgets.open_run(log_dir)`` ending a cell), following the log live.

``run_widget(run)`` is the one widget of a run (created on first display); a daemon thread polls ``run.refresh()``
and pushes what changed, until the widget is closed or every rank closed its log. ``run_payloads.py`` builds the
payloads.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from .protocol import Grid, RunState, TreeNode
from .run_payloads import grid_of_ranks, grid_of_steps, run_state, run_tree
from .view import Synced, _bundle, _synced

if TYPE_CHECKING:
    from ..distributed import RunView

POLL_INTERVAL_S = 0.1
"""How often the view reads the log again, at most: a new step reaches the page within about this long."""
POLL_SHARE = 0.05
"""Following the log takes at most this share of a core: a read that cost more waits longer for the next (a
quiet log of 512 ranks costs ~6 ms a read: 0.12 s between reads)."""
POLL_MAX_S = 2.0
"""The longest wait between reads, whatever they cost."""


class RunWidget(anywidget.AnyWidget):
    """What the browser shows of a run log: module tree, layers × steps heatmap, ranks × layers of one step."""

    _esm = _bundle("widget.js")  # the explorer's bundle: its entry renders this view for a model with `run`
    _css = _bundle("widget.css")

    tree: Synced[TreeNode] = _synced(traitlets.Dict())
    """The module tree of the log's structure file."""
    selected = traitlets.Unicode("").tag(sync=True)
    """The layer the user clicked (tree row, heatmap row, ranks view column); written by the browser."""
    kind = traitlets.Unicode("").tag(sync=True)
    """The hook kind whose layers the grids show (e.g. ``global_forward``, ``global_grad``); written by the browser's
    picker (``""``: the first NaN/Inf's kind, else the first kind logged)."""
    field = traitlets.Unicode("").tag(sync=True)
    """The statistic the grids show; written by the browser's picker (``""``: ``norm``)."""
    step = traitlets.Int(-1).tag(sync=True)
    """The step the ranks view shows; written by a click on a heatmap column (-1: the first non-finite's, else the
    newest)."""
    rank = traitlets.Unicode("").tag(sync=True)
    """The heatmap's rank: ``"all"`` (every rank's records as one), a rank as text, or ``""``: all while that reads
    few frames, else the first NaN/Inf's rank (see ``run_payloads.ALL_RANKS_FRAMES``); written by the browser."""
    run: Synced[RunState] = _synced(traitlets.Dict({}))
    """What the log holds: ranks, steps, fields, the first non-finite, notes on what was skipped."""
    heatmap: Synced[Grid] = _synced(traitlets.Dict({}))
    """Layers × steps of the chosen field, reduced over ranks, as float32 values the page draws and reads on hover."""
    ranks_view: Synced[Grid] = _synced(traitlets.Dict({}))
    """Ranks × layers of the chosen field at the chosen step."""
    error = traitlets.Unicode("").tag(sync=True)
    """Why the log could not be read or drawn; ``""`` when it could."""

    on_close: Callable[[], None] | None = None
    """What stops the view following its log (its controller's ``stop``); the widget holds its controller by it."""

    def close(self) -> None:
        """Stop following the log and close the widget."""
        if self.on_close is not None:
            self.on_close()
        super().close()


class RunController:
    """Keeps a ``RunWidget`` in step with its ``RunView``: the page's choices redraw, a poll thread follows the log."""

    def __init__(self, run: RunView, interval: float = POLL_INTERVAL_S) -> None:
        self._run = run
        self._lock = threading.RLock()  # the poll thread reads the log while the page's choices push: one at a time
        self._stopped = threading.Event()
        self._why = ""  # why the view stopped following the log
        self._shown_error = ""
        self.widget = RunWidget()
        self.widget.on_close = self.stop
        self.push()
        this = weakref.ref(self)
        self.widget.observe(lambda change: _push(this), names=["kind", "field", "step", "rank"])
        self._thread = threading.Thread(target=_poll, args=(this, self._stopped, interval), daemon=True)
        self._thread.name = "hookwidgets-run-view"
        self._thread.start()

    @property
    def following(self) -> bool:
        """Whether the view still follows the log."""
        return not self._stopped.is_set()

    def stop(self, why: str = "the view was closed") -> None:
        """Stop following the log (the widget shows what it last read, and ``why``)."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._why = why
            self._stopped.set()
            if self.widget.run:
                self.widget.run = {**self.widget.run, "live": False, "stopped": why}

    def push(self) -> None:
        """Send the run's state and both grids as the page chose them; an error is shown in the widget."""
        widget = self.widget
        with self._lock:
            try:
                step = widget.step if widget.step >= 0 else None
                state = run_state(self._run, widget.kind or None, widget.field or None, step, widget.rank or None)
                state["live"], state["stopped"] = self.following, self._why
                first, kind, field = state["first_nonfinite"], state["kind"], state["field"]
                heatmap = grid_of_steps(self._run, kind, field, state["rank"], first)
                ranks = grid_of_ranks(self._run, kind, field, state["step"], first)
                tree = run_tree(self._run)
            except Exception as exc:  # shown in the widget; the kernel and the poll go on
                self._show_error(f"could not show the run log: {type(exc).__name__}: {exc}")
                return
            if tree != widget.tree:
                widget.tree = tree
            widget.run = state
            widget.heatmap = heatmap
            widget.ranks_view = ranks
            self._show_error("")

    def poll(self) -> None:
        """Read the log again; push when it grew; stop once every rank closed its log."""
        with self._lock:
            try:
                changed = self._run.refresh()
            except Exception as exc:  # shown in the widget; the next poll tries again
                self._show_error(f"could not read the run log: {type(exc).__name__}: {exc}")
                return
            if changed:
                self.push()
            live = self._run.live
            if live and not any(live.values()):  # nothing more will come
                self.stop("every rank closed its log")

    def _show_error(self, text: str) -> None:
        if text != self._shown_error:
            self.widget.error = text
            self._shown_error = text


def _push(controller: weakref.ref[RunController]) -> None:
    """The page chose another kind, field, step or rank: draw it (the widget holds its controller weakly here)."""
    this = controller()
    if this is not None:
        this.push()


def _poll(controller: weakref.ref[RunController], stopped: threading.Event, interval: float) -> None:
    """The poll thread: holds the controller weakly, so a dropped view ends it too; waits ``interval``, or longer
    after a costly read (``POLL_SHARE``)."""
    wait = interval
    while not stopped.wait(wait):
        this = controller()
        if this is None:
            return
        began = time.perf_counter()
        this.poll()
        del this
        wait = min(POLL_MAX_S, max(interval, (time.perf_counter() - began) / POLL_SHARE))


# Weak both ways: the widget holds its controller (which holds the run), and a closed widget frees both.
_CONTROLLERS: weakref.WeakKeyDictionary[Any, weakref.ref[RunController]] = weakref.WeakKeyDictionary()


def run_widget(run: RunView) -> RunWidget:
    """The widget of ``run``, created on first use (displaying a run twice shows the same widget twice); a new one
    once that one is closed."""
    known = _CONTROLLERS.get(run)
    controller = known() if known is not None else None
    if controller is None or controller.widget.comm is None:
        controller = RunController(run)
        _CONTROLLERS[run] = weakref.ref(controller)
    return controller.widget
