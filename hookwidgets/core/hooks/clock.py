"""The step and call each firing belongs to: the clock of a hook registry.

A step is one call of the model on one thread, with the backward of the graph it built. Forward firings
number the calls of each (path, kind) in the order they fire; a module's ``forward`` and ``grad``
firings come as each call finishes, so a module that calls itself numbers its innermost call 0.

A module backward hook cannot tell from its arguments which forward call it belongs to: the forward hook
of each call writes its (step, call) on the autograd nodes the call's backward will run (a tag in
``node.metadata``), and the backward firing reads it there, on whatever thread the backward runs.

A forward firing inside a backward is a recompute (``torch.utils.checkpoint``): it takes the (step, call)
of the firing it repeats, found in the step's log of the forward firings a checkpoint may recompute (those
inside a non-reentrant checkpoint's segment, or inside an autograd.Function's forward, where a reentrant
checkpoint runs its segment), and counts no new call. The log says for each where autograd's numbering was,
and, inside a non-reentrant checkpoint's segment, which segment it was (the segment's saved-tensor hooks) and
where its module's call began, as far as known.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, cast

import torch

from .._torch import (
    autograd_node_reader,
    forward_grad_enabled,
    graph_task_id,
    next_sequence_nr,
    sequence_nr,
    top_saved_tensor_hooks,
)
from ..kind_table import KINDS
from ..model.nested import tensors_in
from ..model.scope import op_name
from .actions import Firing
from .own_runs import OWN_RUN, silent

CALL_STEPS_KEPT = 16  # steps whose call counters and logs are kept: a backward may come a few forwards later
REENTRANT_CHECKPOINT = "CheckpointFunctionBackward"  # the node torch.utils.checkpoint(use_reentrant=True) makes


class _ThreadClock(threading.local):
    step: int | None = None  # the step this thread's firings belong to (None: no step began on it)
    root_args: Any = None  # the args of the model's call running on this thread (None: outside one)
    loose = False  # this thread's step began outside a call of the model


class Clock:
    """Steps, call numbers and the tags that carry them from a forward call to its backward firings.

    ``on_step()`` is called as each step begins (on the thread beginning it, with the clock's lock held).
    """

    def __init__(self, on_step: Callable[[], None] | None = None) -> None:
        self.steps_seen = 0
        """Steps begun so far, on every thread."""
        self.on_step = on_step
        self._local = _ThreadClock()
        self._lock = threading.Lock()
        self._tag = object()  # this clock's key in node.metadata (with path, kind and side)
        self._calls: dict[int, dict[tuple[str, str], int]] = {}  # call counters of the newest steps, by step
        self._logs: dict[int, list[LogEntry]] = {}  # step -> its forward firings, in order
        self._begins: dict[int, tuple[int, int]] = {}  # step -> (its thread, autograd's next number as it began)
        self._current_node = autograd_node_reader()  # None outside a backward

    def enter_root_call(self, args: Any) -> bool:
        """A call of the model with ``args`` begins on this thread: whether it begins a step (not in an own run,
        not the model's call recomputed inside a backward by a checkpoint, not one already entered)."""
        if OWN_RUN.depth or self._current_node() is not None:
            return False
        local = self._local
        if local.root_args is args:
            return False  # the same root call, seen by a global pre-hook and then by the step tracker
        local.root_args = args
        return True

    def leave_root_call(self) -> bool:
        """The model's call on this thread ended: whether it was one that counts (not an own run nor a recompute)."""
        self._local.root_args = None
        return not OWN_RUN.depth and self._current_node() is None

    def kept_steps(self) -> list[int]:
        """The steps whose call counters, firing logs or beginnings are kept (at most ``CALL_STEPS_KEPT``)."""
        with self._lock:
            return sorted(self._calls.keys() | self._logs.keys() | self._begins.keys())

    @property
    def step(self) -> int:
        """The step this thread's firings belong to: its own latest step, so forwards and backwards run on
        several threads at once keep their own steps (a thread that began none sees the latest of any thread)."""
        step = self._local.step
        return self.steps_seen if step is None else step

    def begin_step(self, loose: bool = False) -> int:
        """Begin a step on this thread; ``loose``: outside a call of the model (``model.forward(x)``)."""
        local = self._local
        with self._lock:
            self.steps_seen += 1
            step = local.step = self.steps_seen
            local.loose = loose
            self._calls[step] = {}
            self._logs[step] = []
            self._begins[step] = (threading.get_ident(), next_sequence_nr())
            for old in [s for s in self._calls if s <= step - CALL_STEPS_KEPT]:
                del self._calls[old]
                self._logs.pop(old, None)
                self._begins.pop(old, None)
            if self.on_step is not None:
                self.on_step()
        return step

    def next_call(self, path: str, kind: str, step: int | None = None) -> int:
        """0, 1, … for the firings of ``(path, kind)`` in ``step`` (default: this thread's step)."""
        step = self.step if step is None else step
        key = (path, kind)
        with self._lock:
            counts = self._calls.get(step)
            if counts is None:
                counts = self._calls[step] = {}
            call = counts.get(key, 0)  # a plain dict: Counter's missing-key path runs Python code
            counts[key] = call + 1
            return call

    def forward_firing(self, path: str, kind: str, call_args: Any = None, edit: tuple[Any, ...] = ()) -> Firing | None:
        """The (step, call) of a forward-phase firing (None inside an own run: it does nothing; in one that applies
        the user's edits, a hook carrying ``edit`` gets an uncounted firing, to apply it); ``call_args``: the args of
        the call a forward hook fires at the end of (None for a pre-hook, at its beginning).

        Outside any call of the model on this thread (``model.forward(x)`` skips the model's own hooks), the
        first such firing begins a step of its own, which lasts until the model's next call. Inside a
        backward it is a recompute, labelled as the firing it repeats.
        """
        if OWN_RUN.depth:
            return None if silent(edit) else Firing(path, kind, self.step, 0)
        node = self._current_node()
        if node is not None:
            return self._recompute_firing(node, path, kind)
        local = self._local
        step = local.step
        if local.root_args is None and path and not local.loose:  # the model's own hooks fire inside its call
            step = self.begin_step(loose=True)
        elif step is None:
            step = self.steps_seen
        key = (path, kind)
        with self._lock:
            counts = self._calls.get(step)
            if counts is None:
                counts = self._calls[step] = {}
            call = counts.get(key, 0)
            counts[key] = call + 1
            log = self._logs.get(step)
            if log is not None:  # only firings a checkpoint may recompute are logged (the usual case: none)
                hooks = top_saved_tensor_hooks()
                if hooks is not None:  # the unpack hook lives as long as what the segment saved: it names the segment
                    seq = next_sequence_nr()
                    log.append((seq, key, call, id(hooks[1]), seq if call_args is None else _call_start(call_args)))
                elif not forward_grad_enabled():  # inside an autograd.Function's forward (a reentrant checkpoint's)
                    log.append((next_sequence_nr(), key, call, 0, None))
        return Firing(path, kind, step, call)

    # Tags: written by a forward hook of each call of a module with backward hooks, read by its backward firings.
    def tag_call(
        self,
        path: str,
        kind: str,
        args: Any,
        output: Any,
        slots: bool = False,
        tensors: list[torch.Tensor] | None = None,
    ) -> Firing | None:
        """Count this forward call of ``path`` for ``kind`` and tag the nodes its backward firings run.

        A full backward hook runs in the node torch wraps the inputs in (the ``grad_fn`` of the args a forward
        hook sees), or, when no input requires grad, after the node wrapping the outputs, whose inputs are the
        outputs' ``grad_fn`` as a forward hook sees them; a backward pre-hook runs there too. With ``slots``, the
        tags also say which positions of args and output are tensors (to check a callable's return value).
        ``tensors``: the output's tensors, when the caller has them already.
        """
        firing = self.forward_firing(path, kind, args)
        if firing is None or not torch.is_grad_enabled():
            return firing
        label = (firing.step, firing.call)
        token = self._tag
        for arg in args:
            node = arg.grad_fn if isinstance(arg, torch.Tensor) else None
            if node is not None:  # every input that requires grad has this one node
                node.metadata[(token, path, kind, "in")] = (*label, _slots(args) if slots else None)  # type: ignore[index]  # torch stubs declare Node.metadata a method; it is a dict property
                break
        out = (*label, _slots(output if isinstance(output, tuple) else (output,)) if slots else None)
        for tensor in tensors_in(output) if tensors is None else tensors:
            node = tensor.grad_fn
            if node is not None:
                node.metadata[(token, path, kind, "out")] = out  # type: ignore[index]  # torch stubs declare Node.metadata a method; it is a dict property
        return firing

    def tag_legacy_call(self, path: str, kind: str, args: Any, output: Any) -> None:
        """Count this forward call of ``path`` and tag the node torch puts its legacy backward hooks on."""
        firing = self.forward_firing(path, kind, args)
        node = _legacy_node(output) if firing is not None else None
        if node is not None and firing is not None:
            # A module returning its inner call's output hooks one node twice: both calls' labels, in firing order
            entry = node.metadata.setdefault((self._tag, path, kind, "out"), [[], 0])
            entry[0].append((firing.step, firing.call))

    def backward_firing(self, path: str, kind: str) -> Firing:
        """The firing of a module backward hook, named after the forward call whose graph it runs in."""
        node = self._current_node()
        token = self._tag
        spec = KINDS.get(kind)
        if node is not None:
            if spec is not None and spec.full_backward and not spec.pre:
                found = node.metadata.get((token, path, kind, "in"))
                if found is not None:
                    return Firing(path, kind, found[0], found[1], slots=found[2])
                found = _below(node, (token, path, kind, "out"))
                if found is not None:  # it fired after the outputs' node: no input of the call requires grad
                    return Firing(path, kind, found[0], found[1], slots=())
            elif spec is not None and spec.full_backward:
                found = _below(node, (token, path, kind, "out"))
                if found is not None:
                    return Firing(path, kind, found[0], found[1], slots=found[2])
            else:  # legacy: on the output's own node (or below it, when a later forward hook replaced the output)
                key = (token, path, kind, "out")
                entry = node.metadata.get(key) or _below(node, key)
                if entry is not None:
                    labels, fired = entry
                    entry[1] = fired + 1
                    return Firing(path, kind, *labels[fired % len(labels)])
        # No tag (an output that is a leaf, a forward hook that replaced the output with one made elsewhere):
        # counted in this thread's step, in firing order
        return Firing(path, kind, self.step, self.next_call(path, kind))

    def _recompute_firing(self, node: Any, path: str, kind: str) -> Firing:
        """A forward firing inside a backward, as the firing it repeats: the node autograd is running was made in
        the original forward, which tells its step and where the recomputed segment begins in that step's log;
        the segment's firings then come in their original order."""
        meta = node.metadata
        task = graph_task_id()
        state = meta.get(self._tag)
        if state is None or state[0] != task:  # each backward through a kept graph recomputes again
            state = meta[self._tag] = [task, None, 0]  # graph task, step, where in the step's log the next is
        key = (path, kind)
        with self._lock:
            if state[1] is None:
                seq, reentrant = sequence_nr(node), op_name(node) == REENTRANT_CHECKPOINT
                step = self._step_made(seq + reentrant)  # a reentrant segment runs after its node: maybe a new step
                step = self.step if step is None else step
                state[1] = step
                state[2] = _anchor(self._logs.get(step, []), key, seq, reentrant)
            log = self._logs.get(state[1], [])
            found = next((i for i in range(state[2], len(log)) if log[i][1] == key), None)
            if found is None:  # not in the log (attached since, or the log was dropped): the call last made
                call = max((entry[2] for entry in log if entry[1] == key), default=0)
            else:
                call, state[2] = log[found][2], found + 1
        return Firing(path, kind, state[1], call, recompute=True)

    def _step_made(self, seq: int) -> int | None:
        """The step whose forward made the node numbered ``seq``: the latest to begin at or before it.

        Numbers are per thread, so only steps of this thread count; a thread that began none (an autograd
        device thread) goes by every thread's steps.
        """
        thread = threading.get_ident()
        begins = list(self._begins.items())
        own = [(step, start) for step, (owner, start) in begins if owner == thread]
        candidates = own or [(step, start) for step, (_, start) in begins]
        return max((step for step, start in candidates if start <= seq), default=None)


LogEntry = tuple[int, tuple[str, str], int, int, int | None]
"""A forward firing: autograd's next number then, (path, kind), call, its checkpoint segment (0: none known)
and, in a segment, the lowest number its module's call may have begun at (None: unknown)."""


def _anchor(log: list[LogEntry], key: tuple[str, str], seq: int, reentrant: bool) -> int:
    """Where in a step's log the recomputed segment begins, from its first firing ``key`` and the running node.

    A reentrant checkpoint's node is made just before its segment runs (under no_grad: no node in it), so the
    segment's first firing is the first of ``key`` after it. Otherwise the node is one the segment made: the
    firing of ``key`` whose call made it, else the last at or before it, is in the segment, and so is every
    firing of ``key`` before it in the same segment; the first of those begins the recompute.
    """
    mine = [i for i, entry in enumerate(log) if entry[1] == key]
    if reentrant:
        return next((i for i in mine if log[i][0] > seq), len(log))
    inside = [i for i in mine if (start := log[i][4]) is not None and start <= seq < log[i][0]]
    before = [i for i in mine if log[i][0] <= seq]
    if inside:
        # the innermost call that made the node (each of ``inside`` has a start)
        found = mine.index(max(inside, key=lambda i: cast(int, log[i][4])))
    elif before:
        found = mine.index(before[-1])
    else:
        return mine[0] if mine else len(log)
    segment = log[mine[found]][3]
    while segment and found > 0 and log[mine[found - 1]][3] == segment:
        found -= 1
    return mine[found]


def _call_start(args: Any) -> int | None:
    """The lowest number a call of these args can have begun at: after the node of its first input (None:
    no input has one)."""
    node = next((a.grad_fn for a in args if isinstance(a, torch.Tensor) and a.grad_fn is not None), None)
    return sequence_nr(node) + 1 if node is not None else None


def _slots(values: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(i for i, value in enumerate(values) if isinstance(value, torch.Tensor))


def _below(node: Any, key: tuple[Any, ...]) -> Any:
    """The tag under ``key`` on the nodes ``node`` passes gradients to, or on theirs (an edit between)."""
    children = [fn for fn, _ in node.next_functions if fn is not None]
    for level in (children, (fn for child in children for fn, _ in child.next_functions if fn is not None)):
        for fn in level:
            found = fn.metadata.get(key)
            if found is not None:
                return found
    return None


def _legacy_node(output: Any) -> Any:
    """The node torch hooks a legacy backward hook on: the first tensor's (as ``Module._call_impl`` finds it)."""
    value = output
    for _ in range(100):  # torch's loop: dicts by their first tensor value, sequences by their first item
        if isinstance(value, torch.Tensor):
            return value.grad_fn
        if isinstance(value, dict):
            value = next((v for v in value.values() if isinstance(v, torch.Tensor)), None)
        elif isinstance(value, (tuple, list)) and value:
            value = value[0]
        else:
            return None
    return None
