"""The hook registry: attaches every kind of hook, owns every handle, and removes them all exactly.

A facade over one small class per job: ``Clock`` (steps and call numbers), ``Dispatch`` (what a firing does),
``Collisions`` (in-place collisions: which hooks broke, why, detaching them), ``Registrar`` (registration with torch,
per kind family), ``ModelWideHooks`` (global kinds) and ``NodeHooks`` (node kinds); the registry holds the handles and
the step tracker. Backward-hook flags are the process-wide ledger's (``owned``).
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from ..capture import native
from ..capture.sharded import ShardedStats
from ..capture.store import CaptureStore, Generation
from ..display import quoted
from ..kind_table import Kind, has
from ..model.hook_dicts import foreign_hooks
from ..model.tokens import call_token_ids
from .actions import check_action, named_tensors
from .clock import Clock
from .collisions import Collisions, is_inplace_collision
from .dispatch import ON_ERROR, TIMELINE_CAP, Dispatch
from .events import Events
from .generation import Generations
from .head_projection import Probe
from .heads import head_ablation
from .info import HookGroup, HookInfo, TimelineEvent
from .kinds import MODULE_KINDS, check_callable, takes_kwargs
from .model_wide import ModelWideHooks
from .node_hooks import NodeHooks
from .notes import note_armed, note_short_steps
from .own_runs import own_run
from .owned import own, owned_ids
from .registration import Registrar
from .root_backward import Removable
from .tensor_edits import normalize_edits

_REGISTRIES: weakref.WeakSet[HookRegistry] = weakref.WeakSet()  # every live registry of the process

__all__ = [
    "MODULE_KINDS",
    "ON_ERROR",
    "TIMELINE_CAP",
    "HookGroup",
    "HookInfo",
    "HookRegistry",
    "TimelineEvent",
    "named_tensors",
]


class HookRegistry:
    """Owns every hook the explorer adds to one model; ``close()`` removes them all.

    Holds no reference to the explorer, so a finalizer on the explorer can call ``close()``.
    """

    def __init__(self, root: nn.Module, store: CaptureStore, on_error: str = "record") -> None:
        self._dispatch = Dispatch(store, on_error)  # checks on_error first
        self.store = store
        """Its ``CaptureStore``."""
        self.timeline: deque[TimelineEvent] = self._dispatch.timeline
        """Its ``TimelineEvent``s, the newest kept: what ``Explorer.timeline`` lists."""
        self.clock = Clock(on_step=self._step_began)
        """Its ``Clock`` (``hooks/clock.py``): the steps and call numbers of its firings;
        ``clock.kept_steps()`` lists the steps whose numbering it still keeps, the newest 16."""
        self.step_listeners: list[Callable[[int], None]] = []
        """Called in order with the new step's number as each step begins (the steps before it are over), on the
        thread beginning it with the clock's lock held: the run log writes the steps before it there."""
        self._root_ref = weakref.ref(root)  # hooks live on the model and hold the registry: no cycle back
        self._hooks: dict[tuple[str, str], HookInfo] = {}
        self._step_armed: dict[tuple[str, str], HookInfo] = {}  # the hooks of the kinds a step arms (armed_by_step)
        self._step_handles: list[RemovableHandle] = []
        self._pending_removal: list[Removable] = []
        self.events = Events(self.timeline, self._records)
        """The hub behind ``Explorer.subscribe``: its subscribers, and the firings it keeps for them while there
        are any."""
        self._dispatch.events = self.events  # a firing is logged through it: kept for subscribers while any listen
        self.collisions = Collisions(
            self._hooks.values, self._root_ref, self._foreign_full_backward, self._remove, self.events
        )
        """Its in-place collisions (``hooks/collisions.py``): which full backward hooks an in-place op
        broke, why (``collisions.explanations``, behind ``Explorer.diagnostics``), and running without them."""
        self.generations = Generations(root, self._prompt_found)
        """Which steps belong to a generation (``generate()``), and where (``hooks/generation.py``)."""
        self._dispatch.generation_of = self.events.generation_of = self.generations.of
        self._model_wide = ModelWideHooks(root)  # the global kinds' hooks, on every module of the model
        self._node_hooks = NodeHooks(self.clock, self._dispatch.fire)
        self._registrar = Registrar(
            root, self.clock, self._dispatch, self.collisions, self._model_wide, self._node_hooks, self._begin_step
        )
        _REGISTRIES.add(self)

    @property
    def sharded(self) -> ShardedStats:
        """The DTensor statistics queued for their reduction across ranks (``capture/sharded.py``); its
        ``collective()`` says whether every rank takes part."""
        return self._dispatch.sharded

    def _step_began(self) -> None:
        """Once per step, as it begins (the clock's ``on_step``): what each step starts with."""
        self._dispatch.memo.clear()  # a step's statistics are shared only within it
        self.reduce_stats()  # every rank's model call begins a step in step with the others'
        for listener in self.step_listeners:  # the run log: after the reduction, so it writes the full tensors'
            listener(self.clock.steps_seen)

    def reduce_stats(self) -> int:
        """Reduce the DTensor statistics queued since the last call to their full tensors' in one collective, when
        every rank takes part; returns how many. Runs as each step begins; every rank must call it at once."""
        return self._dispatch.sharded.reduce()

    @property
    def on_error(self) -> str:
        """``"record"`` a failing hook's error on its ``HookInfo`` and warn, or ``"raise"`` it."""
        return self._dispatch.on_error

    @property
    def steps_seen(self) -> int:
        """Steps begun so far, on every thread (``ex.step``)."""
        return self.clock.steps_seen

    @property
    def step(self) -> int:
        """The step this thread's firings belong to: its own latest step, so forwards and backwards run on
        several threads at once keep their own steps (a thread that began none sees the latest of any thread)."""
        return self.clock.step

    @property
    def _root(self) -> nn.Module | None:
        return self._root_ref()

    def _live_root(self) -> nn.Module:
        """The model; a ReferenceError once it was collected (nothing can be attached to it then)."""
        root = self._root_ref()
        if root is None:
            raise ReferenceError("the model of this explorer was garbage collected")
        return root

    @property
    def hooks(self) -> list[HookInfo]:
        """The registry's live hooks in attach order, then hooks others attached (``foreign=True``)."""
        note_short_steps(self._hooks.values(), self.store)
        root = self._root
        if root is None:
            return list(self._hooks.values())
        others = [HookInfo(path, kind, name, foreign=True, active=False) for path, kind, name in self._foreign()]
        return list(self._hooks.values()) + others

    def _records(self, path: str, kind: str) -> bool:
        """Whether the live hook that fired at ``(path, kind)`` keeps records of its firings (capture or stats)."""
        info = self._hooks.get((path, kind))
        if info is None and has(kind, family="global"):  # a global kind's firings name each module; it is on ""
            info = self._hooks.get(("", kind))
        return info is not None and info.action in ("capture", "stats")

    @property
    def own_hooks(self) -> list[HookInfo]:
        """The registry's live hooks in attach order, without looking for others' (``hooks`` lists those too)."""
        return list(self._hooks.values())

    def attach(
        self,
        path: str,
        obj: nn.Module | torch.Tensor | str,  # a node kind's obj is the node id
        spec: Kind,
        kind: str,
        action: str | Callable[..., Any] = "capture",
        edit: Any = None,
        copy: bool = False,
        with_kwargs: bool = False,
        probe: Probe | None = None,
    ) -> HookInfo:
        """Attach one hook; attaching ``(path, kind)`` again replaces it rather than stacking (``probe``: a forward
        of the example inputs, where an edit finds its place by running)."""
        check_action(action)
        edits = normalize_edits(edit)
        if callable(action):
            check_callable(action, spec, with_kwargs)
            if edits:
                raise ValueError("edit= applies to the built-in actions; a callable action can change values itself")
        if edits and not spec.editable:
            raise ValueError(
                f"{kind!r} hooks cannot change values, so edit= is not allowed there; "
                "use kind 'grad' (on the parameter or module) to edit gradients"
            )
        heads = next((e[1] for e in edits if e[0] == "ablate_heads"), None)
        plan = install_heads = None
        if heads is not None:
            if spec.name != "forward" or not isinstance(obj, nn.Module):
                raise ValueError(
                    f"('ablate_heads', …) edits an attention module's heads: attach it with kind 'forward' on the "
                    f"attention module, not kind {kind!r} on {quoted(path)}"
                )
            plan, install_heads = head_ablation(
                self._live_root(), path, obj, heads, probe
            )  # refused here when there is no place
        if action in ("stats", "print"):
            native.load_in_background()  # the kernel is ready before the hook first fires
        self.detach(path, kind)
        # what it sees changes in place later (post_accumulate's p.grad, which backwards accumulate into): keep a copy
        copy = copy or spec.copies
        info = HookInfo(path, kind, action, edits, copy, spec=spec.name, with_kwargs=with_kwargs)
        info._heads = plan
        info._owner = weakref.ref(self)  # its remove() comes back here
        # The step tracker first: a global kind's hook on the root, put first after it, then runs before the
        # tracker's, as torch's global hooks would (the root's global_forward record precedes the step's end).
        self._ensure_step_tracker()
        try:
            info._handles.extend(
                self._registrar.register(spec, obj, info, takes_kwargs(spec.name, action, with_kwargs))
            )
            if install_heads is not None:
                info._handles.extend(install_heads(info, self.on_error == "raise"))
        except BaseException:
            for handle in info._handles:
                handle.remove()
            self._drop_idle_step_tracker()
            raise
        self._hooks[(path, kind)] = info
        if spec.full_backward:  # torch's views of hooked outputs must not reach the model's output
            self._registrar.root_backward.need(id(info))
        if spec.armed_by_step:
            self._step_armed[(path, kind)] = info
        return info

    def detach(self, path: str | None = None, kind: str | None = None) -> list[HookInfo]:
        """Remove the hooks matching ``path`` and ``kind`` (None matches all); returns them."""
        removed = [
            info
            for (t, k), info in list(self._hooks.items())
            if (path is None or t == path) and (kind is None or k == kind)
        ]
        for info in removed:
            self._remove(info)
        self._flush_pending_removals()
        self._drop_idle_step_tracker()
        return removed

    def remove(self, infos: Iterable[HookInfo]) -> list[HookInfo]:
        """Remove those of ``infos`` still attached as they are (a hook a later attach replaced is not: its
        replacement stays), as ``detach()`` does, and tell the subscribers; returns those removed."""
        removed = [info for info in infos if self._hooks.get((info.path, info.kind)) is info]
        for info in removed:
            self._remove(info)
        self._flush_pending_removals()
        self._drop_idle_step_tracker()
        self.events.detached(removed)
        return removed

    def close(self) -> None:
        """Remove every hook this registry added and drop the model. Safe to call more than once."""
        self.detach()
        self._flush_pending_removals()
        self._dispatch.sharded.abandon()  # no step comes to reduce them: their scope says they stay local

    def _remove(self, info: HookInfo, defer_root_forward: bool = False) -> None:
        """Remove one hook's handles; inside the root's forward-hook loop, defer touching its dict."""
        info.active = False  # tensor hooks already set on live tensors check this flag
        self._model_wide.discard(info)  # first: a step beginning on another thread places no more of its hooks
        root = self._root
        for handle in info._handles:
            if defer_root_forward and root is not None and handle.hooks_dict_ref() is root._forward_hooks:
                self._pending_removal.append(handle)  # torch is iterating over that dict right now
                continue
            handle.remove()  # the ledger (owned.py) puts a backward-hook flag back with the last hook needing it
        info._handles.clear()
        self._hooks.pop((info.path, info.kind), None)
        self._step_armed.pop((info.path, info.kind), None)
        self._node_hooks.discard(info)
        self._registrar.root_backward.release(id(info), self._pending_removal if defer_root_forward else None)

    # Steps: one call of the root module; the first pre-hook to see a root call starts the step.
    def _ensure_step_tracker(self) -> None:
        if not self._step_handles:
            root = self._live_root()
            eager = self._registrar.eager
            begin = eager(lambda m, args, kwargs: self._begin_root_call(args, kwargs))
            self._step_handles = [
                own(root, root.register_forward_pre_hook(begin, prepend=True, with_kwargs=True)),
                own(root, root.register_forward_hook(eager(self._end_step), prepend=True, always_call=True)),
            ]

    def _drop_idle_step_tracker(self) -> None:
        if not self._hooks:
            for handle in self._step_handles:
                handle.remove()
            self._step_handles.clear()

    def _begin_root_call(self, args: Any, kwargs: dict[str, Any]) -> None:
        """The step tracker's pre-hook: begin the step, and read the token ids of a generation's step."""
        self._begin_step(args)
        self.generations.inputs(args, kwargs, call_token_ids)

    def _begin_step(self, args: Any) -> None:
        self._flush_pending_removals()
        if not self.clock.enter_root_call(args):
            return  # an own run, the model's call recomputed inside a backward (checkpoint), or seen already
        if self._model_wide:
            self._model_wide.sync()  # modules added to the model get the global kinds, from this step on
        self.generations.begin(self.clock.begin_step())

    def _prompt_found(self, step: int, generation: Generation) -> None:
        """``step`` was the prompt step of ``generation`` (its next step just began): its records say so."""
        self.store.relabel(step, generation)

    def _end_step(self, module: nn.Module, args: Any, output: Any) -> None:
        if not self.clock.leave_root_call():
            return
        if output is None:  # always_call: the forward raised; sys.exc_info says why
            exc = sys.exc_info()[1]
            if is_inplace_collision(exc):
                self.collisions.detach(exc, in_forward=True)
        elif self._step_armed:
            note_armed(self._step_armed.values(), output)
        self.events.end_step(self.step)  # the steps before this one are over, and this step's forward ended

    def _foreign(self) -> list[tuple[str, str, str]]:
        """``(path, kind, hook name)`` of the hooks on the model that others attached."""
        root = self._root
        if root is None:
            return []
        return foreign_hooks(root, self._own_handle_ids(), *self._other_explorers())

    def _foreign_full_backward(self) -> list[tuple[str, str, str]]:
        """``_foreign()``'s full backward hooks."""
        return [hook for hook in self._foreign() if has(hook[1], full_backward=True)]

    def _other_explorers(self) -> tuple[dict[int, tuple[str, str, str]], set[int]]:
        """The hooks of the process's other explorers as they are listed, by handle id (one entry per hook: a
        global kind has a handle on every module), and the ids of every explorer's machinery to leave unlisted."""
        listed: dict[int, tuple[str, str, str]] = {}
        for registry in list(_REGISTRIES):
            if registry is not self:
                for info in list(registry._hooks.values()):
                    entry = (info.path, info.kind, f"{info.action_name} (another explorer's)")
                    listed.update(dict.fromkeys((handle.id for handle in info._handles), entry))
        return listed, owned_ids()

    def _own_handle_ids(self) -> set[int]:
        """Ids of every handle the explorer holds: its hooks' and its step tracker's."""
        own_ids = {h.id for info in self._hooks.values() for h in info._handles}
        own_ids.update(h.id for h in self._step_handles)
        return own_ids

    @contextlib.contextmanager
    def suspended(self, edits: bool = False, failed: list[HookInfo] | None = None) -> Iterator[None]:
        """Inside the block, on this thread, every explorer's hooks stay registered but do nothing (no records,
        no counts, no steps): the explorer's own runs. Other threads go on recording. ``edits``: the hooks that carry
        an edit apply it, and only that; ``failed`` collects those whose edit failed (``own_runs.own_run``)."""
        with own_run(edits, failed):
            yield

    def _flush_pending_removals(self) -> None:
        while self._pending_removal:
            self._pending_removal.pop().remove()
