"""What an explorer tells its subscribers: plain-data events, delivered on the thread where they happen.

Nothing is collected while nobody listens: a firing then costs what it cost before events existed (the
registry logs it through ``log_firing``, which is the timeline's own ``append`` until someone subscribes).
"""

from __future__ import annotations

import threading
import warnings
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from ..._warnings import SubscriberWarning

if TYPE_CHECKING:
    from .info import HookInfo, TimelineEvent

EVENT_TYPES = ("attached", "detached", "watching", "fired", "step", "capture", "graph", "error")


class AttachedEvent(TypedDict):
    """``attach()`` added hooks: ``hooks``, each as ``HookInfo.as_dict()``."""

    type: Literal["attached"]
    hooks: list[dict[str, Any]]


class DetachedEvent(TypedDict):
    """Hooks were removed: by ``detach()`` or a handle's ``remove()`` (``reason`` ``"detach"``) or by the engine after
    an in-place op broke them (``"collision"``; an ``error`` event says why)."""

    type: Literal["detached"]
    hooks: list[dict[str, Any]]
    reason: str


class WatchingEvent(TypedDict):
    """``watch_optimizer()`` or ``watch_ddp()`` began watching: ``watch`` is ``"optimizer"`` or ``"ddp"``."""

    type: Literal["watching"]
    watch: str


class FiredEvent(TypedDict):
    """The firings of one step, in order (``TimelineEvent``s, as ``ex.timeline`` lists them)."""

    type: Literal["fired"]
    step: int
    firings: list[TimelineEvent]


class StepEvent(TypedDict):
    """A forward of the model ended (``done`` False: its backward may follow), or ``run()`` ended (``done`` True)."""

    type: Literal["step"]
    step: int
    done: bool


class CaptureEvent(TypedDict):
    """Records a step added: ``records``, ``[path, kind]`` of each hook that fired in ``step`` with an action that
    records (``capture`` or ``stats``)."""

    type: Literal["capture"]
    step: int
    records: list[list[str]]


class GraphEvent(TypedDict):
    """``graph()`` or ``run(record_graph=True)`` recorded a new autograd graph (``Explorer.recorded_graph``)."""

    type: Literal["graph"]


class ErrorEvent(TypedDict):
    """A hook's action raised (``path``, ``kind``, ``step``: of the firing), or the engine explained a collision
    of an in-place op with a full backward hook (``step`` None; ``path`` and ``kind`` None when the hook was not
    the explorer's). ``message``: the error's last line, or the explanation."""

    type: Literal["error"]
    path: str | None
    kind: str | None
    step: int | None
    message: str


Event = AttachedEvent | DetachedEvent | WatchingEvent | FiredEvent | StepEvent | CaptureEvent | GraphEvent | ErrorEvent


class Events:
    """The subscribers of one explorer and the firings kept for them, grouped by step until the step is over.

    One method per event type; each builds its event only while anyone listens, so a caller never checks.
    Thread-safe: firings come from any thread (a deque takes them without a lock), subscribers are a tuple
    replaced whole, and each event reaches every subscriber on the thread that made it.
    """

    def __init__(self, timeline: deque[TimelineEvent], records: Callable[[str, str], bool]) -> None:
        self._append_timeline = timeline.append
        self.log_firing: Callable[[TimelineEvent], None] = timeline.append
        """What the registry calls with each firing: the timeline's ``append``, and the pending queue's too
        while anyone listens."""
        self._records = records  # whether the hook (path, kind) records what it sees
        self._subscribers: tuple[Callable[[Event], Any], ...] = ()
        self._warned: list[Callable[[Event], Any]] = []  # subscribers that raised once: not warned about again
        self._pending: deque[TimelineEvent] = deque()  # firings not yet in a ``fired`` event
        self.generation_of: Callable[[int], Any] = lambda step: None
        """Where a step stands in a generation: a prompt step's firings learn it when the next step begins."""
        self._lock = threading.Lock()

    def subscribe(self, callback: Callable[[Event], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event from now on; returns the function that unsubscribes it."""
        if not callable(callback):
            raise TypeError(
                f"subscribe() takes a callable f(event), got {type(callback).__name__}: "
                "e.g. ex.subscribe(lambda event: print(event['type']))"
            )
        with self._lock:
            self._subscribers += (callback,)
            self.log_firing = self._log_and_keep

        def unsubscribe() -> None:
            self._remove(callback)

        return unsubscribe

    def _remove(self, callback: Callable[[Event], Any]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
            if callback in subscribers:  # a second call of the same unsubscribe does nothing
                subscribers.remove(callback)
            self._subscribers = tuple(subscribers)
            self._warned = [c for c in self._warned if c in subscribers]
            if not subscribers:
                self.log_firing = self._append_timeline
                self._pending.clear()

    def close(self) -> None:
        """Drop every subscriber (the explorer is closed)."""
        with self._lock:
            self._subscribers = ()
            self._warned = []
            self.log_firing = self._append_timeline
            self._pending.clear()

    def _log_and_keep(self, event: TimelineEvent) -> None:
        self._append_timeline(event)
        self._pending.append(event)

    def _emit(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber; one that raises is warned about once and stays subscribed."""
        for callback in self._subscribers:
            try:
                callback(event)
            except Exception as exc:  # a subscriber must never break the user's forward, backward or call
                self._warn_once(callback, event, exc)

    def _warn_once(self, callback: Callable[[Event], Any], event: Event, exc: Exception) -> None:
        with self._lock:
            if callback in self._warned:
                return
            self._warned.append(callback)
        name = getattr(callback, "__qualname__", None) or repr(callback)
        warnings.warn(
            f"the explorer's event subscriber {name} raised {exc!r} on a {event['type']!r} event; the model runs on "
            "and the subscriber stays subscribed (its next errors are not shown): fix it, or call the function "
            "ex.subscribe() returned to unsubscribe it",
            SubscriberWarning,
            stacklevel=3,
        )

    def attached(self, infos: list[HookInfo]) -> None:
        """An ``attached`` event: ``attach()`` added ``infos``."""
        if self._subscribers:
            self._emit({"type": "attached", "hooks": [info.as_dict() for info in infos]})

    def detached(self, infos: list[HookInfo], reason: str = "detach") -> None:
        """A ``detached`` event for ``infos``, if any: the user removed them (``"detach"``), or the engine did after
        a collision (``"collision"``)."""
        if infos and self._subscribers:
            self._emit({"type": "detached", "hooks": [info.as_dict() for info in infos], "reason": reason})

    def watching(self, watch: str) -> None:
        """A ``watching`` event: the explorer began watching ``watch`` (``"optimizer"``, ``"ddp"``)."""
        if self._subscribers:
            self._emit({"type": "watching", "watch": watch})

    def graph_recorded(self) -> None:
        """A ``graph`` event: a new autograd graph was recorded."""
        if self._subscribers:
            self._emit({"type": "graph"})

    def end_step(self, step: int) -> None:
        """The forward of ``step`` ended: the steps before it are over (``fired``, ``capture``), then ``step``."""
        if self._subscribers:
            self.flush(before=step)
            self._emit({"type": "step", "step": step, "done": False})

    def run_ended(self, step: int) -> None:
        """``run()`` ended in ``step``: its firings (``fired``, ``capture``), then a ``step`` event, ``done``."""
        if self._subscribers:
            self.flush()
            self._emit({"type": "step", "step": step, "done": True})

    def flush(self, before: int | None = None) -> None:
        """Emit a ``fired`` and a ``capture`` event per step for the firings kept so far (only of the steps before
        ``before``, if given: the rest wait for their step to end)."""
        if not self._subscribers:
            return
        with self._lock:
            drained: list[TimelineEvent] = []
            while self._pending:
                drained.append(self._pending.popleft())
            if before is not None:
                later = [e for e in drained if e.step >= before]
                for event in reversed(later):  # back in front of any firing another thread added meanwhile
                    self._pending.appendleft(event)
                drained = [e for e in drained if e.step < before]
        by_step: dict[int, list[TimelineEvent]] = {}
        for event in drained:
            by_step.setdefault(event.step, []).append(event)
        for step, firings in sorted(by_step.items()):
            generation = self.generation_of(step)
            if generation is not None:
                firings = [e if e.generation else e._replace(generation=generation) for e in firings]
            self._emit({"type": "fired", "step": step, "firings": firings})
            keys = dict.fromkeys((e.path, e.kind) for e in firings)
            records = [[path, kind] for path, kind in keys if self._records(path, kind)]
            if records:
                self._emit({"type": "capture", "step": step, "records": records})

    def hook_failed(self, info: HookInfo, step: int, exc: BaseException) -> None:
        """An ``error`` event for a hook whose action raised."""
        if not self._subscribers:
            return
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        path, kind = info.path, info.kind
        self._emit({"type": "error", "path": path, "kind": kind, "step": step, "message": message})

    def collided(self, detached: list[HookInfo], explanations: list[str]) -> None:
        """The hooks the engine detached after an in-place collision (``detached``), and why (``error``)."""
        if not self._subscribers:
            return
        self.detached(detached, "collision")
        for k, text in enumerate(explanations):
            info = detached[k] if k < len(detached) else None
            path, kind = (info.path, info.kind) if info is not None else (None, None)
            self._emit({"type": "error", "path": path, "kind": kind, "step": None, "message": text})
