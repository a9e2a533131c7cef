"""The hook registry: attaches every kind of hook, owns every handle, and removes them all exactly."""

from __future__ import annotations

import contextlib
import sys
import traceback
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from ..capture import native
from ..capture.stats import StatsMemo
from ..capture.store import CaptureStore
from ..diagnostics.notes import (
    explain_collision,
    explain_foreign_collision,
    inplace_culprit,
    is_inplace_collision,
    modified_view,
    note_until_fired,
)
from ..display import display_name, quoted
from ..model.hook_dicts import foreign_hooks
from .actions import Firing, check_action, named_tensors, perform
from .clock import CallClock, _current_autograd_node
from .edits import normalize_edits
from .kinds import MODULE_KINDS, Kind, check_callable
from .model_wide import ModelWideHooks
from .node_hooks import NodeHooks
from .own_runs import OWN_RUN, own_run
from .owned import own, owned_ids
from .registration import KindRegistrations
from .returns import check_return
from .step_notes import ARMED_BY_THE_STEP, note_armed, note_short_steps

ON_ERROR = ("record", "raise")
_REGISTRIES: weakref.WeakSet[HookRegistry] = weakref.WeakSet()  # every live registry of the process
FULL_BACKWARD_KINDS = ("backward", "backward_pre", "global_backward", "global_backward_pre")
TIMELINE_CAP = 10_000

__all__ = ["MODULE_KINDS", "HookInfo", "HookRegistry", "TimelineEvent", "named_tensors"]


class TimelineEvent(NamedTuple):
    """One hook firing, in the order it happened (``recompute``: repeated in a backward by a checkpoint)."""

    step: int
    phase: str
    target: str
    kind: str
    call: int
    recompute: bool = False


@dataclass
class HookInfo:
    """A live hook the explorer attached: what it does and how it fared."""

    target: str
    kind: str
    action: str | Callable = "capture"
    edit: tuple = ()
    copy: bool = False
    fired: int = 0
    last_error: str | None = None
    note: str | None = None
    spec: str = ""  # the engine's kind: as ``kind``, except "param_grad" for "grad" on a parameter
    with_kwargs: bool = False
    foreign: bool = False
    active: bool = True
    _handles: list[RemovableHandle] = field(default_factory=list, repr=False)

    @property
    def action_name(self) -> str:
        """The action as text: a built-in name or the callable's name."""
        return self.action if isinstance(self.action, str) else getattr(self.action, "__name__", "callable")

    def __repr__(self) -> str:
        if self.foreign:
            action = display_name(self.action_name)
            return f"<foreign hook {self.kind} on {quoted(self.target)}: {action} (not the explorer's; left alone)>"
        edit = f" + edit {list(self.edit)}" if self.edit else ""
        error = ", last error: " + self.last_error.splitlines()[-1] if self.last_error else ""
        note = f", note: {self.note}" if self.note else ""
        action = display_name(self.action_name)
        return f"<hook {self.kind} on {quoted(self.target)}: {action}{edit}, fired {self.fired}{error}{note}>"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for display and export."""
        return {
            "target": self.target,
            "kind": self.kind,
            "action": self.action_name,
            "edit": [list(e) for e in self.edit],
            "fired": self.fired,
            "error": self.last_error,
            "note": self.note,
            "foreign": self.foreign,
        }


class HookRegistry(KindRegistrations, CallClock):
    """Owns every hook the explorer adds to one model; ``close()`` removes them all.

    Holds no reference to the explorer, so a finalizer on the explorer can call ``close()``.
    """

    def __init__(self, root: nn.Module, store: CaptureStore, on_error: str = "record") -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.store = store
        self.on_error = on_error
        self._init_clock()  # steps_seen: steps begun, on every thread (``ex.step``)
        self.timeline: deque[TimelineEvent] = deque(maxlen=TIMELINE_CAP)
        self._root_ref = weakref.ref(root)  # hooks live on the model and hold the registry: no cycle back
        self._hooks: dict[tuple[str, str], HookInfo] = {}
        self._step_armed: dict[tuple[str, str], HookInfo] = {}  # the hooks of ARMED_BY_THE_STEP kinds
        self._step_handles: list[RemovableHandle] = []
        self._model_wide = ModelWideHooks(root)  # the global kinds' hooks, on every module of the model
        self.explanations: deque[str] = deque(maxlen=100)
        self._pending_removal: list[RemovableHandle] = []
        self._node_hooks = NodeHooks(self)
        self._hooked_outputs: dict[str, list[weakref.ref]] = {}
        self._stats_memo = StatsMemo()
        self.step_listeners: list[Callable[[int], None]] = []
        """Called with the step number at the end of each forward of the model (not in suspended runs)."""
        _REGISTRIES.add(self)

    @property
    def _root(self) -> nn.Module | None:
        return self._root_ref()

    @property
    def hooks(self) -> list[HookInfo]:
        """The registry's live hooks in attach order, then hooks others attached (``foreign=True``)."""
        note_short_steps(self._hooks.values(), self.store)
        root = self._root
        if root is None:
            return list(self._hooks.values())
        others = [
            HookInfo(target, kind, name, foreign=True, active=False)
            for target, kind, name in foreign_hooks(root, self._own_handle_ids(), *self._other_explorers())
        ]
        return list(self._hooks.values()) + others

    def attach(
        self,
        target: str,
        obj: nn.Module | torch.Tensor,
        spec: Kind,
        kind: str,
        action: str | Callable = "capture",
        edit: Any = None,
        copy: bool = False,
        with_kwargs: bool = False,
    ) -> HookInfo:
        """Attach one hook; attaching ``(target, kind)`` again replaces it rather than stacking."""
        check_action(action)
        edits = normalize_edits(edit)
        if callable(action):
            check_callable(action, spec, with_kwargs)
            if edits:
                raise ValueError("edit= applies to the built-in actions; a callable action can change values itself")
        if edits and spec.name in ("post_accumulate", "legacy_backward"):
            raise ValueError(
                f"{kind!r} hooks cannot change values, so edit= is not allowed there; "
                "use kind 'grad' (on the parameter or module) to edit gradients"
            )
        if action in ("stats", "print"):
            native.load_in_background()  # the kernel is ready before the hook first fires
        self.detach(target, kind)
        # post_accumulate sees p.grad, which later backwards accumulate into in place: keep a copy
        copy = copy or spec.name == "post_accumulate"
        info = HookInfo(target, kind, action, edits, copy, spec=spec.name, with_kwargs=with_kwargs)
        # The step tracker first: a global kind's hook on the root, put first after it, then runs before the
        # tracker's, as torch's global hooks would (the root's global_forward record precedes the step's end).
        self._ensure_step_tracker()
        try:
            info._handles.extend(self._register(spec, obj, info, with_kwargs))
        except BaseException:
            self._drop_idle_step_tracker()
            raise
        self._hooks[(target, kind)] = info
        if spec.name in ARMED_BY_THE_STEP:
            self._step_armed[(target, kind)] = info
        return info

    def detach(self, target: str | None = None, kind: str | None = None) -> list[HookInfo]:
        """Remove the hooks matching ``target`` and ``kind`` (None matches all); returns them."""
        removed = [
            info
            for (t, k), info in list(self._hooks.items())
            if (target is None or t == target) and (kind is None or k == kind)
        ]
        for info in removed:
            self._remove(info)
        self._flush_pending_removals()
        self._drop_idle_step_tracker()
        return removed

    def close(self) -> None:
        """Remove every hook this registry added and drop the model. Safe to call more than once."""
        self.detach()
        self._flush_pending_removals()

    def _remove(self, info: HookInfo, defer_root_forward: bool = False) -> None:
        """Remove one hook's handles; inside the root's forward-hook loop, defer touching its dict."""
        info.active = False  # tensor hooks already set on live tensors check this flag
        self._model_wide.discard(info)  # first: a step beginning on another thread places no more of its hooks
        for handle in info._handles:
            if defer_root_forward and handle.hooks_dict_ref() is self._root._forward_hooks:
                self._pending_removal.append(handle)  # torch is iterating over that dict right now
                continue
            handle.remove()  # the ledger (owned.py) puts a backward-hook flag back with the last hook needing it
        info._handles.clear()
        self._hooks.pop((info.target, info.kind), None)
        self._step_armed.pop((info.target, info.kind), None)
        self._node_hooks.discard(info)

    # Steps: one call of the root module; the first pre-hook to see a root call starts the step.
    def _ensure_step_tracker(self) -> None:
        if not self._step_handles:
            root = self._root
            self._step_handles = [
                own(
                    root,
                    root.register_forward_pre_hook(self._eager(lambda m, args: self._begin_step(args)), prepend=True),
                ),
                own(root, root.register_forward_hook(self._eager(self._end_step), prepend=True, always_call=True)),
            ]

    def _drop_idle_step_tracker(self) -> None:
        if not self._hooks:
            for handle in self._step_handles:
                handle.remove()
            self._step_handles.clear()

    def _begin_step(self, args: Any) -> None:
        self._flush_pending_removals()
        if OWN_RUN.depth or _current_autograd_node() is not None:
            return  # an own run, or the model's call recomputed inside a backward (checkpoint): no new step
        local = self._local
        if local.root_args is args:
            return  # the same root call, seen by a global pre-hook and then by the step tracker
        local.root_args = args
        if self._model_wide:
            self._model_wide.sync()  # modules added to the model get the global kinds, from this step on
        self._new_step(loose=False)

    def _end_step(self, module: nn.Module, args: Any, output: Any) -> None:
        self._local.root_args = None
        if OWN_RUN.depth or _current_autograd_node() is not None:
            return
        if output is None:  # always_call: the forward raised; sys.exc_info says why
            exc = sys.exc_info()[1]
            if is_inplace_collision(exc):
                self.explain_collision(exc, in_forward=True)
        elif self._step_armed:
            note_armed(self._step_armed.values(), output)
        for listener in list(self.step_listeners):
            try:
                listener(self.step)
            except Exception as exc:  # a display update must never break the user's forward
                warnings.warn(f"updating the explorer's view failed: {exc!r}", stacklevel=2)

    def explain_collision(self, exc: BaseException, in_forward: bool = False) -> list[HookInfo]:
        """Detach the full backward hooks an in-place op collided with, say why on each; returns them.

        ``in_forward``: called from the root's forward hook, whose dict torch is iterating over.
        """
        culprit = inplace_culprit(exc, self._root)
        colliding = self._colliding(exc, culprit)
        if not colliding and self._root is not None:  # someone else's hook: explained, and left alone
            text = explain_foreign_collision(culprit, self._root, self._foreign_full_backward())
            self.explanations.append(text)
            warnings.warn(text, stacklevel=2)
        for info in colliding:
            text = explain_collision(info.kind, info.target, culprit, self._root)
            self._remove(info, defer_root_forward=in_forward)
            info.last_error = text
            self.explanations.append(text)
            warnings.warn(text, stacklevel=2)
        return colliding

    def colliding_hooks(self, exc: BaseException) -> list[HookInfo]:
        """The explorer's full backward hooks that the in-place op of ``exc`` collided with (none: not ours).

        The tensor the op modified is a view torch made of a hooked module's output: when a frame of the
        traceback holds it, the module whose last output it views is the one. Otherwise every full backward
        hook of the explorer is a suspect, unless only hooks others attached can be: then none is, and the
        caller explains theirs. (A hook on the in-place module itself breaks on its own input, and a global
        hook is on every module: those stay suspects.)
        """
        root = self._root
        return self._colliding(exc, inplace_culprit(exc, root) if root is not None else None)

    def _colliding(self, exc: BaseException, culprit: str | None) -> list[HookInfo]:
        """``colliding_hooks(exc)``, with the in-place module's path already found."""
        full = [info for info in self._hooks.values() if info.kind in FULL_BACKWARD_KINDS]
        if not full or self._root is None:
            return full
        view = modified_view(exc)
        base = view._base if view is not None else None
        # a hook on the in-place module itself wraps its input, and a global hook is on every module
        always = [info for info in full if info.kind.startswith("global_") or info.target == culprit]
        outputs = self._hooked_outputs
        matched = [info for info in full if any(ref() is base for ref in outputs.get(info.target, ()))]
        if base is not None and matched:
            return [info for info in full if info in matched or info in always]
        if base is not None and not always and self._foreign_full_backward():
            return []
        return full

    def _foreign_full_backward(self) -> list[tuple[str, str, str]]:
        """``(target, kind, hook name)`` of the full backward hooks on the model that others attached."""
        root = self._root
        if root is None:
            return []
        found = foreign_hooks(root, self._own_handle_ids(), *self._other_explorers())
        return [hook for hook in found if hook[1] in FULL_BACKWARD_KINDS]

    def _other_explorers(self) -> tuple[dict[int, tuple[str, str, str]], set[int]]:
        """The hooks of the process's other explorers as they are listed, by handle id (one entry per hook: a
        global kind has a handle on every module), and the ids of every explorer's machinery to leave unlisted."""
        listed: dict[int, tuple[str, str, str]] = {}
        for registry in list(_REGISTRIES):
            if registry is not self:
                for info in list(registry._hooks.values()):
                    entry = (info.target, info.kind, f"{info.action_name} (another explorer's)")
                    listed.update(dict.fromkeys((handle.id for handle in info._handles), entry))
        return listed, owned_ids()

    def _own_handle_ids(self) -> set[int]:
        """Ids of every handle the explorer holds: its hooks' and its step tracker's."""
        own_ids = {h.id for info in self._hooks.values() for h in info._handles}
        own_ids.update(h.id for h in self._step_handles)
        return own_ids

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Inside the block, on this thread, every explorer's hooks stay registered but do nothing (no records,
        no counts, no steps): the explorer's own runs. Other threads go on recording."""
        with own_run():
            yield

    @property
    def _suspended(self) -> bool:
        """Whether this thread is inside an own run of any explorer."""
        return OWN_RUN.depth > 0

    def _flush_pending_removals(self) -> None:
        while self._pending_removal:
            self._pending_removal.pop().remove()

    def _fire(
        self,
        info: HookInfo,
        phase: str,
        firing: Firing,
        editable: Any,
        tensors_of,
        call_user=None,
        returns: str | None = None,
    ) -> Any:
        """Count, log and perform one firing; a failing action follows the ``on_error`` policy.

        What a user callable returns is checked by torch's rules for ``returns`` (default: the hook's kind)
        before torch sees it: a value torch would refuse is the hook's error, and torch gets None.
        """
        if OWN_RUN.depth:
            return None
        info.fired += 1
        if info.fired == 1 and info.note is not None and note_until_fired(info.note):
            info.note = None  # it runs after all (another input took another path, a compiled model ran it)
        self.timeline.append(
            TimelineEvent(firing.step, phase, firing.target, firing.kind, firing.call, firing.recompute)
        )
        try:
            result = perform(
                self.store, info.action, info.edit, info.copy, firing, editable, tensors_of, call_user, self._stats_memo
            )
            if call_user is not None and result is not None:
                where = f"the {info.kind!r} hook on {quoted(firing.target)}"
                check_return(returns or info.spec, result, editable, info.action_name, where, firing.slots)
            return result
        except Exception as exc:  # a failing hook must not break the user's forward or backward
            info.last_error = "".join(traceback.format_exception(exc)).rstrip()
            if self.on_error == "raise":
                raise
            warnings.warn(
                f"hook {info.kind!r} on {quoted(firing.target)} failed: {exc!r} (recorded on ex.hooks)", stacklevel=2
            )
            return None
