"""Live updates: while the user's own loop runs in the kernel, push counts and captures, throttled."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from .._warnings import ViewUpdateWarning
from ..core.explorer import Explorer
from ..core.gc_pause import no_gc
from .payloads import hooks_payload, memory_payload
from .protocol import HookItem
from .view import ExplorerView

PUSH_INTERVAL_S = 0.1
"""Hook counts, status and memory reach the page at most ~10 times a second."""
PLOT_INTERVAL_S = 2.0
"""Images are redrawn less often: a matplotlib figure costs tens of milliseconds of the user's loop."""
FIRST_PLOT_COST_S = 0.1
"""What the images are expected to cost before a drawing of them was measured."""
MAX_SHARE = 0.03
"""Live updates take at most this share of the loop's time: a costly push waits longer for the next,
and images are redrawn only while their total cost since the loop started stays within it."""


class LiveController(Protocol):
    """What live updates need of the view they keep in step (the view's controller)."""

    @property
    def explorer(self) -> Explorer | None: ...
    @property
    def view(self) -> ExplorerView | None: ...
    def set_status(self, state: str, message: str) -> None: ...
    def restate(self) -> None: ...
    def sync(self) -> None: ...
    def sync_plots(self) -> float | None: ...
    def sync_summary(self) -> None: ...
    def sync_training(self) -> bool: ...


class LiveUpdates:
    """Follows the end of every forward of the model (the engine's ``step`` events, through the controller) and
    of optimizer steps; pushes what changed, coalesced, while a cell runs.

    Clicks in the page reach the kernel only when the running cell finishes, so the status says so: from
    IPython's ``pre_run_cell`` its ``cell`` is true. When the cell finishes (``post_run_cell``), the view gets
    one full update. Steps may come from any thread: a push that finds another one under way is left to the next.
    """

    def __init__(self, controller: LiveController) -> None:
        self._controller = controller
        self._cell_running = False  # a notebook cell runs: the page's messages wait until it ends
        self._plot_cost = FIRST_PLOT_COST_S  # what the next drawing of the images is expected to cost, in seconds
        self._pushing = threading.Lock()
        self._next_push = 0.0  # monotonic time before which pushes are coalesced
        self._next_plot = 0.0
        self._since = 0.0  # when this cell's first push came: the share of image redraws counts from there
        self._plot_spent = 0.0  # seconds spent redrawing images since then
        self._pending = False
        self._live = False
        self._paused = 0
        self._foreign: list[HookItem] = []
        self._forward_seen = False  # this cell's loop runs forwards the hooks see: pushes name their step
        self._optimizer_steps = 0
        self._steps_model: weakref.WeakKeyDictionary[torch.optim.Optimizer, bool] = weakref.WeakKeyDictionary()
        self._unfollow_optimizers: Any = lambda: None
        self._ipython = _ipython()
        if self._ipython is not None:
            self._ipython.events.register("pre_run_cell", self._on_cell_start)
            self._ipython.events.register("post_run_cell", self._on_cell_done)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No live pushes inside: the explorer's own runs update the view when they finish."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    @property
    def is_paused(self) -> bool:
        """Whether an explorer run the view started is under way."""
        return self._paused > 0

    @property
    def cell_running(self) -> bool:
        """Whether a notebook cell runs (between IPython's ``pre_run_cell`` and ``post_run_cell``)."""
        return self._cell_running

    def drew(self, seconds: float) -> None:
        """The selection's images were just drawn in ``seconds``: what their next live redraw is expected to cost."""
        self._plot_cost = seconds

    def follow_optimizers(self) -> None:
        """Also push after each step of an optimizer of the model: a loop may run no forward the hooks see."""
        explorer = self._controller.explorer
        if explorer is None:
            return
        self._unfollow_optimizers()
        # Registered again on every watch, so it runs after the monitors' own step hooks and sees their records.
        handle = register_optimizer_step_post_hook(_weak_step_hook(self._on_optimizer_step))
        self._unfollow_optimizers = weakref.finalize(explorer, handle.remove)  # a dropped explorer removes it

    def _on_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self._paused or not self._steps_the_model(optimizer):
            return
        self._optimizer_steps += 1
        explorer = self._controller.explorer
        step = explorer.step if explorer is not None else 0
        self._follow(f"step {step}" if self._forward_seen else f"optimizer step {self._optimizer_steps}")

    def _steps_the_model(self, optimizer: torch.optim.Optimizer) -> bool:
        known = self._steps_model.get(optimizer)
        if known is None:
            explorer = self._controller.explorer
            if explorer is None:
                return False
            ids = {id(p) for p in explorer.model.parameters()}
            known = any(id(p) in ids for group in optimizer.param_groups for p in group["params"])
            self._steps_model[optimizer] = known
        return known

    def on_step(self, step: int) -> None:
        """A forward of the model ended (not one of the view's own runs): push, throttled."""
        if self._paused:
            return
        self._forward_seen = True
        self._follow(f"step {step}")

    def _follow(self, label: str) -> None:
        """Push now, or note that a push is due, labelled with the loop's progress (``step 12``)."""
        now = time.monotonic()
        if now < self._next_push or not self._pushing.acquire(blocking=False):
            self._pending = True  # coalesced: the next push (or the cell's end) carries it
            return
        try:
            with _cycles_collected():
                plot_cost = self._push(label, now)
            # The images keep their own, slower schedule: their cost must not hold back the counts.
            cost = time.monotonic() - now - plot_cost
            self._next_push = now + max(PUSH_INTERVAL_S, cost / MAX_SHARE)
        finally:
            self._pushing.release()

    def _push(self, label: str, now: float) -> float:
        """Send counts, memory and status; redraw the images (selection, summary) when their turn has come.

        Returns the seconds spent on the plots.
        """
        controller = self._controller
        explorer, view = controller.explorer, controller.view
        if view is None or explorer is None:
            return 0.0
        if not self._live:  # others' hooks do not change during a loop: list them once, not per push
            self._foreign = [h for h in view.hooks if h.get("foreign")]
            self._live = True
            # The images on screen are those of when the cell started; the first redraw waits its turn.
            self._since, self._plot_spent, self._next_plot = now, 0.0, now + PLOT_INTERVAL_S
        self._pending = False
        with view.hold_sync():  # one message for the lot
            view.hooks = hooks_payload(explorer.own_hooks) + self._foreign
            view.memory = memory_payload(explorer)
            view.diagnostics = explorer.diagnostics  # e.g. a hook detached after an in-place collision
            controller.set_status("live", f"{label}: your code is running; clicks here apply when the cell finishes")
            # A redraw is expected to cost what the last one did; it waits until that fits the share.
            affordable = self._plot_spent + self._plot_cost <= MAX_SHARE * (now - self._since)
            if now >= self._next_plot and affordable:
                return self._redraw(explorer, now)
        return 0.0

    def _redraw(self, explorer: Explorer, now: float) -> float:
        """The selection's images, the summary while stats hooks feed it, and the Training panel when its
        records changed; returns the seconds spent."""
        controller = self._controller
        started = time.monotonic()
        drew = controller.sync_plots() is not None  # as a click draws them: captures as chosen, an attention's heads
        if any(info.action == "stats" for info in explorer.own_hooks):
            controller.sync_summary()  # the per-layer table and heatmap follow the loop too
            drew = True
        drew = controller.sync_training() or drew  # update ratios and DDP records, once they changed
        if not drew:
            return 0.0
        cost = time.monotonic() - started
        self._plot_cost = cost
        self._plot_spent += cost
        self._next_plot = now + PLOT_INTERVAL_S
        return cost

    def _on_cell_start(self, info: Any = None) -> None:
        self._cell_running = True
        self._controller.restate()  # one status message: the page knows its clicks wait

    def _on_cell_done(self, result: Any = None) -> None:
        self._cell_running = False
        if not self._live and not self._pending:
            self._controller.restate()
            return
        by_optimizer = not self._forward_seen and self._optimizer_steps > 0  # a loop the hooks saw no forward of
        self._live = self._pending = self._forward_seen = False
        controller = self._controller
        explorer = controller.explorer
        if explorer is None or controller.view is None:
            return
        label = f"optimizer step {self._optimizer_steps}" if by_optimizer else f"step {explorer.step}"
        controller.set_status("idle", f"{label}: your cell finished")
        controller.sync()
        controller.sync_summary()
        controller.sync_training()

    def close(self) -> None:
        """Stop following optimizer steps and cells."""
        self._unfollow_optimizers()
        if self._ipython is not None:
            for event, callback in (("pre_run_cell", self._on_cell_start), ("post_run_cell", self._on_cell_done)):
                with contextlib.suppress(ValueError):
                    self._ipython.events.unregister(event, callback)
            self._ipython = None


@contextlib.contextmanager
def _cycles_collected() -> Iterator[None]:
    """Free the reference cycles the body leaves (matplotlib's text parser leaves some) when it ends.

    A push runs inside the model's forward hook, so a traceback in such a cycle holds the frames below it and,
    in them, the step's inputs, output and autograd graph, until the collector reaches the cycle's generation:
    hundreds of steps later. Held off in the body, collection finds every cycle it made in the youngest one.
    """
    try:
        with no_gc():
            yield
    finally:
        gc.collect(0)


def _weak_step_hook(method: Any) -> Any:
    """An optimizer step post-hook that calls ``method(optimizer)`` while its LiveUpdates lives."""
    ref = weakref.WeakMethod(method)

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        bound = ref()
        if bound is not None:
            try:
                bound(optimizer)
            except Exception as exc:  # a display update must never break the user's optimizer step
                warnings.warn(f"updating the explorer's view failed: {exc!r}", ViewUpdateWarning, stacklevel=2)

    return hook


def _ipython() -> Any:
    """The running IPython shell, or None outside one."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
