"""What one firing of a hook does: count it, put it on the timeline, perform its action, keep the error policy."""

from __future__ import annotations

import logging
import traceback
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

import torch

from ..._warnings import HookFailedWarning, PatchSkippedWarning
from ..capture.sharded import ShardedStats
from ..capture.stats import StatsMemo
from ..capture.store import CaptureStore, Generation
from ..display import quoted
from ..model.scope import hidden_ops
from . import notes
from .actions import Firing, perform
from .events import Events
from .info import HookInfo, TimelineEvent
from .notes import NoteKind
from .own_runs import edit_failed, editing, silent
from .returns import check_return
from .tensor_edits import apply_edits

log = logging.getLogger(__name__)

ON_ERROR = ("record", "raise")
TIMELINE_CAP = 10_000


class Dispatch:
    """Performs the firings of one registry's hooks into its store, on its timeline, under its ``on_error``."""

    def __init__(self, store: CaptureStore, on_error: str = "record") -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.store = store
        self.on_error = on_error
        self.timeline: deque[TimelineEvent] = deque(maxlen=TIMELINE_CAP)
        self.memo = StatsMemo()
        """Statistics of a tensor several hooks see in one step; cleared as each step begins."""
        self.sharded = ShardedStats()
        """The step's DTensor statistics queued for their one reduction across ranks (``capture/sharded.py``)."""
        self.generation_of: Callable[[int], Generation | None] = _none
        """Where a step stands in a generation (the registry's ``Generations.of``)."""
        self.events: Events | None = None
        """The registry's event hub: firings are logged through it (the timeline's own append while nobody
        subscribes), and a failing hook is told to its subscribers."""

    def fire(
        self,
        info: HookInfo,
        phase: str,
        firing: Firing,
        editable: Any,
        tensors_of: Callable[[Any], dict[str, torch.Tensor]],
        call_user: Callable[[Any], Any] | None = None,
        returns: str | None = None,
    ) -> Any:
        """Count, log and perform one firing; a failing action follows the ``on_error`` policy.

        What a user callable returns is checked by torch's rules for ``returns`` (default: the hook's kind)
        before torch sees it: a value torch would refuse is the hook's error, and torch gets None. Inside the
        explorer's own runs it does nothing, or, in one that applies the user's edits, applies ``info``'s edit only.
        """
        if silent(info.edit):
            return None
        if editing():
            return self._edit_only(info, firing, editable)
        if not firing.recompute:  # a forward a checkpoint recomputes is one forward: fired once
            info.count(firing.step)
            if info.fired == 1:
                notes.fired(info)  # it runs after all (another input took another path, a compiled model ran it)
        generation = self.generation_of(firing.step)
        event = TimelineEvent(firing.step, phase, firing.path, firing.kind, firing.call, firing.recompute, generation)
        events = self.events
        if events is None:
            self.timeline.append(event)
        else:
            events.log_firing(event)
        try:
            result = perform(
                self.store,
                info.action,
                info.edit,
                info.copy,
                firing,
                editable,
                tensors_of,
                call_user,
                self.memo,
                info,
                generation,
                lambda exc: _skipped_patch(info, exc),
                self.sharded,
            )
            if call_user is not None and result is not None:
                where = f"the {info.kind!r} hook on {quoted(firing.path)}"
                check_return(returns or info.spec, result, editable, info.action_name, where, firing.slots)
            return result
        except Exception as exc:  # a failing hook must not break the user's forward or backward
            return self._failed(info, firing, exc)

    def _edit_only(self, info: HookInfo, firing: Firing, editable: Any) -> Any:
        """``editable`` with ``info``'s edits applied, nothing counted, logged or recorded (an own run's firing)."""
        try:
            with hidden_ops():  # the edit's own autograd nodes must not shift the ids of the module's nodes
                return apply_edits(editable, info.edit)
        except Exception as exc:
            edit_failed(info)  # the analysis says its result ran without this edit
            return self._failed(info, firing, exc)

    def _failed(self, info: HookInfo, firing: Firing, exc: Exception) -> None:
        """Record a failing hook's error on it and tell it; re-raise under on_error="raise"; torch gets None."""
        info.last_error = "".join(traceback.format_exception(exc)).rstrip()
        log.debug(
            "the %s hook on %s failed in step %d:\n%s",
            info.kind,
            quoted(firing.path),
            firing.step,
            info.last_error,
        )
        events = self.events
        if events is not None:
            events.hook_failed(info, firing.step, exc)
        if self.on_error == "raise":
            raise exc
        warnings.warn(
            f"hook {info.kind!r} on {quoted(firing.path)} failed: {exc!r} (recorded on ex.hooks)",
            HookFailedWarning,
            stacklevel=3,
        )
        return None


def _none(step: int) -> None:
    return None


def _skipped_patch(info: HookInfo, exc: Exception) -> None:
    """Say once, on the hook and in a warning, that its replace or mean_ablate edit is left out of decode steps."""
    text = (
        f"{PATCH_SKIPPED}: it fits the prompt step of a generation (generate()) and is applied there, but not the "
        f"decode steps after it, each fed only its new token(s) (or the sequence grown by them), so it is left out of "
        f"them: {exc}"
    )
    if notes.has(info, NoteKind.PATCH_SKIPPED):
        return
    notes.add(info, text, NoteKind.PATCH_SKIPPED)
    warnings.warn(f"hook {info.kind!r} on {quoted(info.path)}: {text}", PatchSkippedWarning, stacklevel=3)


PATCH_SKIPPED = "patch left out of decode steps"
"""How the note of a hook whose replace or mean_ablate edit is left out of a generation's decode steps begins."""
