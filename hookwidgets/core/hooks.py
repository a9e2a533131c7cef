"""The hook registry: attaches every kind of hook, owns every handle, and removes them all exactly."""

from __future__ import annotations

import bisect
import contextlib
import sys
import threading
import traceback
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
import torch.nn.modules.module as module_globals
from torch import nn
from torch.utils.hooks import RemovableHandle

from . import native
from .actions import Firing, check_action, named_tensors, perform
from .capture import CaptureStore
from .diagnostics import (
    explain_collision,
    explain_foreign_collision,
    inplace_culprit,
    is_inplace_collision,
    modified_view,
    note_until_fired,
)
from .display import display_name, quoted
from .edits import normalize_edits
from .foreign import foreign_hooks
from .kinds import MODULE_KINDS, Kind, check_callable
from .nodehooks import NodeHooks
from .registration import KindRegistrations
from .scope import next_sequence_nr
from .stats import StatsMemo

ON_ERROR = ("record", "raise")
_current_autograd_node = getattr(torch._C, "_current_autograd_node", lambda: None)  # private; None outside backward
FULL_BACKWARD_KINDS = ("backward", "backward_pre", "global_backward", "global_backward_pre")
TIMELINE_CAP = 10_000
CALL_STEPS_KEPT = 16  # steps whose call counters are kept: a backward may come a few forwards later

__all__ = ["MODULE_KINDS", "HookInfo", "HookRegistry", "TimelineEvent", "named_tensors"]


class TimelineEvent(NamedTuple):
    """One hook firing, in the order it happened."""

    step: int
    phase: str
    target: str
    kind: str
    call: int


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


class HookRegistry(KindRegistrations):
    """Owns every hook the explorer adds to one model; ``close()`` removes them all.

    Holds no reference to the explorer, so a finalizer on the explorer can call ``close()``.
    """

    def __init__(self, root: nn.Module, store: CaptureStore, on_error: str = "record") -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.store = store
        self.on_error = on_error
        self.steps_seen = 0
        """Root forwards seen, on every thread (``ex.step``)."""
        self._local = threading.local()  # per thread: the step its firings belong to, the root call's args
        self.timeline: deque[TimelineEvent] = deque(maxlen=TIMELINE_CAP)
        self._root_ref = weakref.ref(root)  # hooks live on the model and hold the registry: no cycle back
        self._hooks: dict[tuple[str, str], HookInfo] = {}
        self._calls: dict[int, dict[tuple[str, str], int]] = {}  # call counters of the newest steps, by step
        # step -> module path -> the sequence number autograd had when each forward call of it began
        self._call_starts: dict[int, dict[str, list[int]]] = {}
        # step -> (its thread, the sequence number autograd had when it began): the step a node was made in
        self._step_begins: dict[int, tuple[int, int]] = {}
        self._step_handles: list[RemovableHandle] = []
        self._paths: dict[int, str] = {}
        self._full_flags: dict[nn.Module, tuple[bool | None, set[nn.Module]]] = {}  # see KindRegistrations
        self._global_full_flag = module_globals._global_is_full_backward_hook
        self._suspended = False
        self.explanations: deque[str] = deque(maxlen=100)
        self._pending_removal: list[RemovableHandle] = []
        self._lock = threading.Lock()
        self._node_hooks = NodeHooks(self)
        self._hooked_outputs: dict[str, list[weakref.ref]] = {}
        self._stats_memo = StatsMemo()
        self.step_listeners: list[Callable[[int], None]] = []
        """Called with the step number at the end of each forward of the model (not in suspended runs)."""

    @property
    def step(self) -> int:
        """The step this thread's firings belong to: its own latest root forward, so forwards and backwards
        run on several threads at once keep their own steps (a thread that ran none, such as an
        autograd device thread, sees the latest step of any thread)."""
        return getattr(self._local, "step", self.steps_seen)

    @property
    def _root(self) -> nn.Module | None:
        return self._root_ref()

    @property
    def hooks(self) -> list[HookInfo]:
        """The registry's live hooks in attach order, then hooks others attached (``foreign=True``)."""
        root = self._root
        if root is None:
            return list(self._hooks.values())
        others = [
            HookInfo(target, kind, name, foreign=True, active=False)
            for target, kind, name in foreign_hooks(root, self._own_handle_ids())
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
        info._handles.extend(self._register(spec, obj, info, with_kwargs))
        self._hooks[(target, kind)] = info
        self._ensure_step_tracker()
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
        if not self._hooks:
            for handle in self._step_handles:
                handle.remove()
            self._step_handles.clear()
        return removed

    def close(self) -> None:
        """Remove every hook this registry added and drop the model. Safe to call more than once."""
        self.detach()
        self._flush_pending_removals()
        self._full_flags.clear()
        self._paths = {}

    def _remove(self, info: HookInfo, defer_root_forward: bool = False) -> None:
        """Remove one hook's handles; inside the root's forward-hook loop, defer touching its dict."""
        info.active = False  # tensor hooks already set on live tensors check this flag
        for handle in info._handles:
            if defer_root_forward and handle.hooks_dict_ref() is self._root._forward_hooks:
                self._pending_removal.append(handle)  # torch is iterating over that dict right now
                continue
            handle.remove()
            # torch's handle does not cover the global with_kwargs dict (a stale entry otherwise)
            module_globals._global_forward_hooks_with_kwargs.pop(handle.id, None)
        info._handles.clear()
        self._hooks.pop((info.target, info.kind), None)
        self._node_hooks.discard(info)
        self._restore_backward_flags()

    # Steps: one call of the root module; the first pre-hook to see a root call starts the step.
    def _ensure_step_tracker(self) -> None:
        if not self._step_handles:
            self._step_handles = [
                self._root.register_forward_pre_hook(self._eager(lambda m, args: self._begin_step(args)), prepend=True),
                self._root.register_forward_hook(self._eager(self._end_step), prepend=True, always_call=True),
            ]

    def _begin_step(self, args: Any) -> None:
        self._flush_pending_removals()
        if self._suspended:
            return
        local = self._local
        if getattr(local, "root_args", None) is args:
            return  # the same root call, seen by a global pre-hook and then by the step tracker
        local.root_args = args
        with self._lock:
            self.steps_seen += 1
            local.step = self.steps_seen
            self._calls[local.step] = {}
            self._call_starts[local.step] = {}
            self._step_begins[local.step] = (threading.get_ident(), next_sequence_nr())
            for old in [s for s in self._calls if s <= local.step - CALL_STEPS_KEPT]:
                del self._calls[old]
                self._call_starts.pop(old, None)
                self._step_begins.pop(old, None)
            self._stats_memo.clear()
        self.store.compact_if_faulting()  # the last step's graph is gone: captures can leave the heap

    def _end_step(self, module: nn.Module, args: Any, output: Any) -> None:
        self._local.root_args = None
        if self._suspended:
            return
        if output is None:  # always_call: the forward raised; sys.exc_info says why
            exc = sys.exc_info()[1]
            if is_inplace_collision(exc):
                self.explain_collision(exc, in_forward=True)
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
        return [hook for hook in foreign_hooks(root, self._own_handle_ids()) if hook[1] in FULL_BACKWARD_KINDS]

    def _own_handle_ids(self) -> set[int]:
        """Ids of every handle the explorer holds: its hooks' and its step tracker's."""
        own_ids = {h.id for info in self._hooks.values() for h in info._handles}
        own_ids.update(h.id for h in self._step_handles)
        return own_ids

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Hooks stay registered but do nothing (no records, no counts, no steps) inside the block."""
        previous, self._suspended = self._suspended, True
        try:
            yield
        finally:
            self._suspended = previous

    def _flush_pending_removals(self) -> None:
        while self._pending_removal:
            self._pending_removal.pop().remove()

    def _next_call(self, target: str, kind: str, step: int | None = None) -> int:
        """0, 1, … for the firings of ``(target, kind)`` in ``step`` (default: this thread's step)."""
        step = self.step if step is None else step
        key = (target, kind)
        with self._lock:
            counts = self._calls.get(step)
            if counts is None:
                counts = self._calls[step] = {}
            call = counts.get(key, 0)  # a plain dict: Counter's missing-key path runs Python code
            counts[key] = call + 1
            return call

    def _note_call_start(self, target: str) -> None:
        """Remember where in autograd's numbering this forward call of ``target`` begins (see ``_backward_firing``)."""
        if self._suspended:
            return
        starts = self._call_starts.setdefault(self.step, {}).setdefault(target, [])
        seq = next_sequence_nr()
        if not starts or starts[-1] != seq:  # two of our pre-hooks on one call (backward and backward_pre)
            starts.append(seq)

    def _backward_firing(self, target: str, kind: str) -> tuple[int, int]:
        """The (step, call) of the forward call a backward firing of ``target`` belongs to, as ``grad`` names them.

        One backward may run through the graphs of several forwards, each last call first; the node autograd
        is running (the module's backward-hook node, or its last op for legacy hooks) was made during that
        call, so its number tells the step, and between the starts of the step's calls, the call. Counting
        firings is the fallback when that cannot be read.
        """
        node = _current_autograd_node()
        seq = node._sequence_nr() if node is not None else None
        step = self._step_made(seq) if seq is not None else None
        if step is None:
            return self.step, self._next_call(target, kind)
        starts = self._call_starts.get(step, {}).get(target)
        call = bisect.bisect_right(starts, seq) - 1 if starts else -1
        return step, call if call >= 0 else self._next_call(target, kind, step)

    def _step_made(self, seq: int) -> int | None:
        """The step whose forward made the node numbered ``seq``: the latest to begin at or before it.

        Numbers are per thread, so only steps of this thread count; a thread that ran none (an autograd
        device thread) goes by every thread's steps.
        """
        thread = threading.get_ident()
        with self._lock:
            begins = list(self._step_begins.items())
        own = [(step, start) for step, (owner, start) in begins if owner == thread]
        candidates = own or [(step, start) for step, (_, start) in begins]
        return max((step for step, start in candidates if start <= seq), default=None)

    def _fire(self, info: HookInfo, phase: str, firing: Firing, editable: Any, tensors_of, call_user=None) -> Any:
        """Count, log and perform one firing; a failing action follows the ``on_error`` policy."""
        if self._suspended:
            return None
        info.fired += 1
        if info.fired == 1 and info.note is not None and note_until_fired(info.note):
            info.note = None  # it runs after all (another input took another path, a compiled model ran it)
        self.timeline.append(TimelineEvent(firing.step, phase, firing.target, firing.kind, firing.call))
        try:
            return perform(
                self.store, info.action, info.edit, info.copy, firing, editable, tensors_of, call_user, self._stats_memo
            )
        except Exception as exc:  # a failing hook must not break the user's forward or backward
            info.last_error = "".join(traceback.format_exception(exc)).rstrip()
            if self.on_error == "raise":
                raise
            warnings.warn(
                f"hook {info.kind!r} on {quoted(firing.target)} failed: {exc!r} (recorded on ex.hooks)", stacklevel=2
            )
            return None

    def _restore_backward_flags(self) -> None:
        """Put back the private full/legacy backward flags once no backward hook of ours needs them."""
        for owner, (flag, holders) in list(self._full_flags.items()):
            if all(not m._backward_hooks and not m._backward_pre_hooks for m in (owner, *holders)):
                owner._is_full_backward_hook = flag
                del self._full_flags[owner]
        if not module_globals._global_backward_hooks and not module_globals._global_backward_pre_hooks:
            module_globals._global_is_full_backward_hook = self._global_full_flag
