"""Live updates: while the user's own loop runs in the kernel, push counts and captures, throttled."""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from ..core.hooks import HookRegistry
from .captures import plot_items
from .state import memory_payload

if TYPE_CHECKING:
    from .explorer import HookExplorer

PUSH_INTERVAL_S = 0.1
"""Hook counts, status and memory reach the page at most ~10 times a second."""
PLOT_INTERVAL_S = 2.0
"""Images are redrawn less often: a matplotlib figure costs tens of milliseconds of the user's loop."""
MAX_SHARE = 0.03
"""Live updates take at most this share of the loop's time: a costly push waits longer for the next,
and images are redrawn only while their total cost since the loop started stays within it."""


def top_classes(output: Any, k: int = 5) -> list[list[float]]:
    """``[[class, probability], …]`` of the first item's top ``k`` classes, for the run bar's target picker."""
    if not isinstance(output, torch.Tensor) or output.dim() != 2 or not output.is_floating_point():
        return []
    probs = output[0].detach().float().softmax(-1)
    values, indices = probs.topk(min(k, probs.numel()))
    return [[int(i), round(float(v), 4)] for v, i in zip(values, indices, strict=True)]


class LiveUpdates:
    """Follows the end of every forward of the model; pushes what changed, coalesced, while a cell runs.

    Clicks in the page reach the kernel only when the running cell finishes, so the status says so.
    When the cell finishes (IPython's ``post_run_cell``), the view gets one full update.
    """

    def __init__(self, explorer: HookExplorer, registry: HookRegistry) -> None:
        self._explorer = weakref.ref(explorer)
        self._registry = registry
        self._next_push = 0.0  # monotonic time before which pushes are coalesced
        self._next_plot = 0.0
        self._since = 0.0  # when this cell's first push came: the share of image redraws counts from there
        self._plot_spent = 0.0  # seconds spent redrawing images since then
        self._pending = False
        self._live = False
        self._paused = 0
        self._foreign: list[dict[str, Any]] = []
        registry.step_listeners.append(self._on_step)
        self._ipython = _ipython()
        if self._ipython is not None:
            self._ipython.events.register("post_run_cell", self._on_cell_done)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No live pushes inside: the explorer's own runs update the view when they finish."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def _on_step(self, step: int) -> None:
        if self._paused:
            return
        now = time.monotonic()
        if now < self._next_push:
            self._pending = True  # coalesced: the next push (or the cell's end) carries it
            return
        plot_cost = self._push(step, now)
        # The images keep their own, slower schedule: their cost must not hold back the counts.
        cost = time.monotonic() - now - plot_cost
        self._next_push = now + max(PUSH_INTERVAL_S, cost / MAX_SHARE)

    def _push(self, step: int, now: float) -> float:
        """Send counts, memory and status; redraw the images (selection, summary) when their turn has come.

        Returns the seconds spent on the plots.
        """
        explorer = self._explorer()
        view = explorer._view if explorer is not None else None
        if view is None:
            return 0.0
        if not self._live:  # others' hooks do not change during a loop: list them once, not per push
            self._foreign = [h for h in view.hooks if h.get("foreign")]
            self._live = True
            # The images on screen are those of when the cell started; the first redraw waits its turn.
            self._since, self._plot_spent, self._next_plot = now, 0.0, now + PLOT_INTERVAL_S
        self._pending = False
        with view.hold_sync():  # one message for the lot
            view.hooks = [info.as_dict() for info in self._registry._hooks.values()] + self._foreign
            view.memory = memory_payload(explorer)
            view.diagnostics = explorer.diagnostics  # e.g. a hook detached after an in-place collision
            view.status = {
                "state": "live",
                "message": f"step {step}: your code is running; clicks here apply when the cell finishes",
            }
            # A redraw is expected to cost what the last one did; it waits until that fits the share.
            affordable = self._plot_spent + explorer._plot_cost <= MAX_SHARE * (now - self._since)
            if now >= self._next_plot and affordable:
                return self._redraw(explorer, view, now)
        return 0.0

    def _redraw(self, explorer: HookExplorer, view: Any, now: float) -> float:
        """The selection's images and, while stats hooks feed it, the summary; returns the seconds spent."""
        started = time.monotonic()
        drew = False
        if view.selected in explorer.captures:
            items = plot_items(explorer.captures, view.selected, explorer._plot_steps, explorer._plot_views)
            view.plots = {"target": view.selected, "items": items}
            drew = True
        if any(info.action == "stats" for info in self._registry._hooks.values()):
            explorer._sync_summary()  # the per-layer table and heatmap follow the loop too
            drew = True
        if not drew:
            return 0.0
        cost = time.monotonic() - started
        explorer._plot_cost = cost
        self._plot_spent += cost
        self._next_plot = now + PLOT_INTERVAL_S
        return cost

    def _on_cell_done(self, result: Any = None) -> None:
        if not self._live and not self._pending:
            return
        self._live = self._pending = False
        explorer = self._explorer()
        if explorer is None or explorer._view is None or explorer._model is None:
            return
        explorer._view.status = {"state": "idle", "message": f"step {explorer.step}: your cell finished"}
        explorer._sync()
        explorer._sync_summary()

    def close(self) -> None:
        """Stop following forwards and cells."""
        with contextlib.suppress(ValueError):
            self._registry.step_listeners.remove(self._on_step)
        if self._ipython is not None:
            with contextlib.suppress(ValueError):
                self._ipython.events.unregister("post_run_cell", self._on_cell_done)
            self._ipython = None


def _ipython() -> Any:
    """The running IPython shell, or None outside one."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
