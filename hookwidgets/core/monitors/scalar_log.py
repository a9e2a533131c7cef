"""``ex.log_to(writer)``: the summary's per-layer statistics written to a TensorBoard ``SummaryWriter`` (or anything
with ``add_scalar``) as each step ends, with no widget; nothing runs while no log is open."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..capture.store import CaptureStore
from ..diagnostics.nonfinite import SUMMARY_FIELDS, rows_of
from ..display import display_name
from ..hooks.events import Event
from ..hooks.info import HookGroup, HookInfo
from ..kind_table import user_names

SIDES = ("act", "grad")
"""The summary's two sides: a layer's activations (forward kinds) and the gradients at its output."""
ROOT_NAME = "(model)"
"""What the tags call the model itself, whose path is ``""``."""


class ScalarLog:
    """What ``log_to()`` returns: the open log, a handle as torch's (``remove()``, ``with``) that stops it."""

    def __init__(
        self,
        writer: Any,
        every: int,
        fields: Sequence[str] | None,
        store: CaptureStore,
        subscribe: Callable[[Callable[[Event], Any]], Callable[[], None]],
        flush: Callable[[], None],
    ) -> None:
        add_scalar = getattr(writer, "add_scalar", None)
        if not callable(add_scalar):
            raise TypeError(
                f"log_to() writes with add_scalar(tag, value, step), which {display_name(type(writer).__name__)} "
                "lacks: pass a TensorBoard SummaryWriter, e.g. "
                "ex.log_to(torch.utils.tensorboard.SummaryWriter('runs/exp1'))"
            )
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(
                f"every= is how many steps apart the statistics are written, a whole number from 1, got {every!r}: "
                "ex.log_to(writer, every=10) writes every tenth step"
            )
        self.writer: Any = writer
        """The writer the statistics go to."""
        self.every: int = every
        """Steps apart: a step whose number is a multiple of ``every`` is written."""
        self.fields: tuple[str, ...] = _columns(fields)
        """The summary columns written, each under ``"{field}/{path}"`` (``act_norm/features.conv1``)."""
        self.hooks: HookGroup = HookGroup()
        """The stats hooks ``log_to()`` attached because the explorer had none (removed with the log)."""
        self.active: bool = True
        """False once removed (or its explorer closed)."""
        self._add_scalar = add_scalar
        self._store = store
        self._flush = flush
        self._unsubscribe = subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        # a step is over (its forward and backward): its records are all in
        if event["type"] != "capture" or event["step"] % self.every:
            return
        step = event["step"]
        records = self._store.step_records([(path, kind) for path, kind in event["records"]], step)
        add_scalar, fields = self._add_scalar, self.fields
        for row in rows_of(records):
            name = row["path"] or ROOT_NAME
            for field in fields:
                value = row.get(field)
                if value is not None:
                    add_scalar(f"{field}/{name}", value, step)

    def remove(self) -> None:
        """Write the step still open, stop logging and remove the hooks it attached; does nothing the second time."""
        if not self.active:
            return
        self.active = False
        self._flush()  # the last step ends no later step's forward: it is written now
        self._unsubscribe()
        self.hooks.remove()

    def __enter__(self) -> ScalarLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "open" if self.active else "removed"
        every = "every step" if self.every == 1 else f"every {self.every} steps"
        return f"<ScalarLog to {type(self.writer).__name__}, {every}, {len(self.fields)} fields, {state}>"


def _columns(fields: Sequence[str] | None) -> tuple[str, ...]:
    """The summary columns ``fields`` names: a statistic (``"norm"``: both sides) or a column (``"grad_norm"``)."""
    every_column = tuple(f"{side}_{field}" for side in SIDES for field in SUMMARY_FIELDS)
    if fields is None:
        return every_column
    if isinstance(fields, str):
        fields = [fields]
    columns: dict[str, None] = {}
    for name in fields:
        named = [name] if name in every_column else [f"{side}_{name}" for side in SIDES if name in SUMMARY_FIELDS]
        if not named:
            raise ValueError(
                f"log_to() cannot write {name!r}: fields are statistics ({', '.join(SUMMARY_FIELDS)}) for both sides, "
                f"or summary columns such as 'grad_norm' ({', '.join(every_column)})"
            )
        columns.update(dict.fromkeys(named))
    return tuple(columns)


def stats_kinds_needed(hooks: Sequence[HookInfo]) -> list[str]:
    """The model-wide kinds a new log attaches with ``stats`` (those that fill the whole summary, as ``wandb.watch``
    hooks every layer): none when a stats hook is there already, and never one attached with another action."""
    if any(info.action == "stats" for info in hooks):
        return []
    taken = {(info.path, info.kind) for info in hooks}
    return [kind for kind in user_names(every_layer=True) if ("", kind) not in taken]


def same_destination(a: Any, b: Any) -> bool:
    """Whether writers ``a`` and ``b`` write to one place: the same object, or the same ``get_logdir()``."""
    if a is b:
        return True
    dirs: list[Any] = [getattr(w, "get_logdir", None) for w in (a, b)]
    return all(callable(d) for d in dirs) and dirs[0]() == dirs[1]()


class ScalarLogs:
    """The open logs of one explorer (``log_to()``): a new log to a writer replaces the one writing there."""

    def __init__(self) -> None:
        self._logs: list[ScalarLog] = []

    def open(
        self,
        writer: Any,
        every: int,
        fields: Sequence[str] | None,
        store: CaptureStore,
        subscribe: Callable[[Callable[[Event], Any]], Callable[[], None]],
        flush: Callable[[], None],
        hooks: Callable[[], Sequence[HookInfo]],
        attach_stats: Callable[[list[str]], HookGroup],
    ) -> ScalarLog:
        """A ``ScalarLog`` to ``writer``; ``hooks()``: the explorer's own, ``attach_stats(kinds)``: attaches ``stats``
        hooks of those model-wide kinds, which the log removes with itself, when none of ``hooks()`` fills the
        summary."""
        for old in [log for log in self._logs if same_destination(log.writer, writer)]:
            old.remove()
        log = ScalarLog(writer, every, fields, store, subscribe, flush)
        kinds = stats_kinds_needed(hooks())  # after the old log took its own hooks away
        try:
            if kinds:
                log.hooks.extend(attach_stats(kinds))
        except BaseException:
            log.remove()
            raise
        self._logs = [*(other for other in self._logs if other.active), log]
        return log

    def close(self) -> None:
        """Remove every log, each writing the step still open."""
        for log in self._logs:
            log.remove()
        self._logs = []
