"""Which module made each autograd node: the scope log kept during a forward, and node ids.

Autograd numbers the nodes of a thread in creation order (``node._sequence_nr()``, one counter per
thread), and ``torch._C._autograd._get_sequence_nr()`` reads the thread's next number for free. While
a tracker runs, ``nn.Module.__call__`` is wrapped (``_tracked_call``): for each thread running a call of
the model it keeps a stack of this model's module paths and logs, at every push and pop, the next
sequence number with the path now current; a node's scope is then the log entry at or before its
number. This gives the same scopes as tagging every op through a TorchFunctionMode (ops inside
``F.linear``, in-place ops and tensors a parent stashed on an attribute included) at no cost per op, only
per module call. ``graph_walk`` reads the log.

Why a wrapper and not global forward hooks: once any global hook exists, torch sends every module
call through its hooked path, which costs ~3 µs a call (16 ms of a 2,000-block MLP's 90 ms forward);
the wrapper costs ~1 µs and leaves modules without hooks on torch's fast path. It is installed with
the first tracker and removed with the last (``nn.Module.__call__`` is then torch's again), and steps
aside while torch.compile traces. A node made in a module's call — its pre-hooks, forward and forward
hooks — is that module's; the explorer's own edits are hidden (``hidden_ops``).

Calls of the model on several threads at once are followed each on its own (a ``Call`` per
thread): each gets its own stack, log and recording, with the ids a call on one thread alone gets.

A node's id is ``"<scope>/<op>#<ordinal>"``, the ordinal its rank among the nodes of that (scope,
op) in creation order, so the same model and input shapes give the same ids on every forward. An
``AccumulateGrad`` node is addressed by its parameter instead, ``"<owner>/AccumulateGrad#<attr>"``
(``"fc/AccumulateGrad#weight"``), also when a module held another object there between calls (an offload hook
swapped the weight in: named where the module held it while its forward ran); one of a leaf that is no parameter
(an input that requires grad) by its rank in the walk: ``"/AccumulateGrad#leaf0"``. Every walk is iterative.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import Node

from .._torch import next_sequence_nr
from .meta import CallTimeWatch, call_time_watch
from .names import ModelNames, read_names

HIDDEN = "\x00hidden"
"""Scope of the nodes made inside ``scope.hidden_ops()``: left out of recorded graphs."""
HIDDEN_OPS = frozenset({"BackwardHookFunctionBackward", "OutputAliasBackward"})
"""Nodes full backward hooks add (torch's, and the explorer's on the model itself: ``hooks/root_backward.py``): spliced
out of graphs."""

_PREFIX = "torch::autograd::"


_following: tuple[ScopeTracker, ...] = ()  # the started trackers; read by _tracked_call on every module call
_install_lock = threading.Lock()
_torch_call: Callable[..., Any] = nn.Module.__call__  # what _tracked_call wraps: torch's, or another wrapper
_in_chain = False  # _tracked_call is in nn.Module.__call__'s chain (installed, or wrapped by someone since)
_is_compiling = torch.compiler.is_compiling


def _tracked_call(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """``nn.Module.__call__`` while trackers run: logs the scope around each call of a followed module.

    Exceptions leave the scope as always-called forward hooks do (``Exception`` only: after a
    KeyboardInterrupt the call is left unfinished, and ``GraphRecorder.__exit__`` records it).
    """
    trackers = _following
    if not trackers or _is_compiling():  # torch.compile inlines the modules' calls: nothing to log
        return _torch_call(self, *args, **kwargs)
    key = id(self)
    if len(trackers) == 1:  # the usual case: one tracker, no list per call
        tracker = trackers[0]
        path = tracker._paths.get(key)
        if path is None:
            return _torch_call(self, *args, **kwargs)
        call = tracker._local.call
        # A submodule inside a running call is the common case (thousands a forward): _enter's push and
        # mark are inlined for it, which saves two method calls a module (~2 ms on a 4,000-module forward).
        inner = call if key != tracker._root and call is not None and call.stack and not call.hidden else None
        if inner is not None:
            inner.stack.append(path)
            _mark(inner, path)
        elif not tracker._enter(key, path, args, kwargs):
            return _torch_call(self, *args, **kwargs)
        try:
            if inner is None and tracker.watch and key == tracker._root:
                output = _watched_call(self, (tracker,), args, kwargs)
            else:
                output = _torch_call(self, *args, **kwargs)
        except Exception as exc:
            tracker._exit(key, path, None, exc)
            raise
        if inner is not None and not inner.hidden and len(inner.stack) > 1 and inner.stack[-1] == path:
            inner.stack.pop()
            _mark(inner, inner.stack[-1])
        else:
            tracker._exit(key, path, output, None)
        return output
    entered = [(t, p) for t in trackers if (p := t._paths.get(key)) is not None and t._enter(key, p, args, kwargs)]
    watching = tuple(t for t, _ in entered if t.watch and key == t._root)
    try:
        output = _watched_call(self, watching, args, kwargs) if watching else _torch_call(self, *args, **kwargs)
    except Exception as exc:
        for tracker, path in reversed(entered):
            tracker._exit(key, path, None, exc)
        raise
    for tracker, path in reversed(entered):
        tracker._exit(key, path, output, None)
    return output


def _watched_call(
    model: nn.Module, trackers: tuple[ScopeTracker, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A call of a model that holds meta tensors, with a ``CallTimeWatch`` naming what its modules swap in (on each
    tracker's ``Call``)."""
    with call_time_watch(model) as watch:
        for tracker in trackers:
            call = tracker._local.call  # the call each one entered just now
            if call is not None:
                call.watch = watch
        return _torch_call(model, *args, **kwargs)


def _follow(tracker: ScopeTracker) -> None:
    """Add a started tracker; the first one puts ``_tracked_call`` in place of ``nn.Module.__call__``."""
    global _following, _torch_call, _in_chain
    with _install_lock:
        if not _in_chain:
            _torch_call, _in_chain = nn.Module.__call__, True
            nn.Module.__call__ = _tracked_call  # type: ignore[method-assign]  # following every module call
        _following = (*_following, tracker)


def _unfollow(tracker: ScopeTracker) -> None:
    """Drop a tracker; with the last one, ``nn.Module.__call__`` is what it was before the first.

    If something wrapped ``nn.Module.__call__`` since (torch.fx's tracer does, for its trace), that
    wrapper is left in place and ``_tracked_call``, still inside it, passes calls straight through.
    """
    global _following, _in_chain
    with _install_lock:
        _following = tuple(t for t in _following if t is not tracker)
        if not _following and nn.Module.__call__ is _tracked_call:
            nn.Module.__call__ = _torch_call  # type: ignore[method-assign]  # torch's (or the wrapper's) again
            _in_chain = False


@contextlib.contextmanager
def hidden_ops() -> Iterator[None]:
    """Nodes created inside are hidden from recorded graphs and take no ordinal (the explorer's own edits).

    Without it, an edit applied in a forward hook would shift the ordinals of its parent's later
    nodes of the same op, and node ids (persistent addresses) would change when an edit is attached.
    Only this thread's calls are concerned: sequence numbers, and so scope logs, are per thread.
    """
    calls = [call for call in (t._local.call for t in _following) if call is not None and call.stack]
    for call in calls:
        call.hidden += 1
        call.mark()
    try:
        yield
    finally:
        for call in calls:
            call.hidden -= 1
            call.mark()


class Call:
    """One call of the model on one thread: its module stack, scope log and sequence-number span.

    ``starts``/``scopes`` is the log: nodes numbered from ``starts[i]`` on were made in ``scopes[i]``.
    ``start``/``end`` bound the numbers of the call's nodes (``end`` None while it runs); ``grad_mode``
    is (grad enabled, inference mode) when it began; ``inputs_grad`` whether a tensor argument required grad.
    """

    __slots__ = ("end", "grad_mode", "hidden", "inputs_grad", "scopes", "stack", "start", "starts", "watch")

    def __init__(self, args: Any) -> None:
        self.stack: list[str] = []  # module paths, the model's own first
        self.starts: list[int] = []
        self.scopes: list[str] = []
        self.hidden = 0
        self.start = next_sequence_nr()
        self.end: int | None = None
        self.grad_mode = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
        self.inputs_grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        self.watch: CallTimeWatch | None = None  # what the model's modules swapped in, for a model holding meta tensors

    def current(self) -> str:
        """The scope of the nodes made now."""
        if self.hidden:
            return HIDDEN
        return self.stack[-1] if self.stack else ""

    def mark(self) -> None:
        """From the next node on, nodes are made in ``current()``."""
        _mark(self, self.current())


def _mark(call: Call, scope: str) -> int:
    """Log that nodes from the next sequence number on are made in ``scope``; returns that number."""
    seq, starts, scopes = next_sequence_nr(), call.starts, call.scopes
    if starts and starts[-1] == seq:
        scopes[-1] = scope  # no node was created since the last mark
    elif not scopes or scopes[-1] != scope:
        starts.append(seq)
        scopes.append(scope)
    return seq


class _PerThread(threading.local):
    call: Call | None = None  # this thread's current (or last) call of the model


class ScopeTracker:
    """Follows the calls of one model's modules and logs which module path was current from which node on.

    ``on_call_end(call, output, exc)`` runs at the end of every call of the model itself, on the thread
    that made it, inside the forward and before any backward: ``exc`` is the exception when the forward
    raised (output is then None). Ops outside any submodule belong to the root ``""``. Modules of other
    models are ignored. Each thread's calls are followed on their own, so forwards on several threads at
    once are each recorded whole.
    """

    def __init__(self, model: nn.Module, on_call_end: Callable[[Call, Any, BaseException | None], None]) -> None:
        self._model = weakref.ref(model)
        self._root = id(model)
        self._on_call_end = on_call_end
        self._paths: dict[int, str] = {}
        self._local = _PerThread()
        self._started = False
        self.failure: Exception | None = None  # what on_call_end raised at the end of the last call to end
        self.watch = False  # watch each call (``CallTimeWatch``): the model held meta tensors when names were read

    @property
    def call(self) -> Call | None:
        """This thread's current call of the model, or its last one; None before its first."""
        return self._local.call

    @property
    def in_call(self) -> bool:
        """True inside a call of the model on this thread (also after a KeyboardInterrupt left one unfinished)."""
        call = self._local.call
        return call is not None and bool(call.stack)

    def refresh(self) -> ModelNames:
        """Re-read the model's module paths (after modules were added or replaced); returns every name read."""
        names = read_names(self._model())
        self._paths = names.paths
        self.watch = names.meta
        return names

    def start(self) -> ModelNames | None:
        """Start following the model's module calls; the names read, or None when already started."""
        if self._started:
            return None
        names = self.refresh()
        self._started = True
        _follow(self)
        return names

    def stop(self) -> None:
        """Stop following; with the last tracker, ``nn.Module.__call__`` is torch's again. Idempotent."""
        if not self._started:
            return
        self._started = False
        _unfollow(self)
        self._local = _PerThread()  # every thread's unfinished call is forgotten

    # _enter and _exit run at every call of this model's modules while the tracker runs: a few dict,
    # list and C calls, the thread's call looked up once (a threading.local attribute, ~50 ns).
    def _enter(self, key: int, path: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Push ``path`` on this thread's call; False when it is a submodule called outside the model."""
        call: Call | None
        if key == self._root:
            # A new call of the model on this thread; it replaces this thread's last one, and any stack
            # a KeyboardInterrupt left. Other threads' calls go on with their own.
            call = self._local.call = Call((*args, *kwargs.values()) if kwargs else args)
        else:
            call = self._local.call
            if call is None or not call.stack:
                return False
        call.stack.append(path)
        _mark(call, HIDDEN if call.hidden else path)
        return True

    def _exit(self, key: int, path: str, output: Any, exc: BaseException | None) -> None:
        """Pop ``path``; at the end of the model's own call, hand the call to ``on_call_end``."""
        call = self._local.call
        if call is None:
            return
        stack = call.stack
        if not stack:
            return
        while stack:  # pop through this module's entry, even if an inner call never reported its end
            if stack.pop() == path:
                break
        seq = _mark(call, HIDDEN if call.hidden else stack[-1] if stack else "")
        if key == self._root and not stack:
            call.end = seq
            self.failure = None
            try:
                self._on_call_end(call, output, exc)
            except Exception as failure:  # never break the user's forward; result() re-raises it
                self.failure = failure


def node_id(scope: str, op: str, ordinal: int | str) -> str:
    """A node's persistent address, e.g. ``node_id("layer1.0", "AddBackward0", 0) == "layer1.0/AddBackward0#0"``."""
    return f"{scope}/{op}#{ordinal}"


def parse_node_id(address: str) -> tuple[str, str, str]:
    """``(scope, op, ordinal)`` of a node id; a ValueError for a string that is no node id."""
    scope, sep, rest = address.rpartition("/")
    op, sharp, ordinal = rest.partition("#")
    if not sep or not sharp or not op or not ordinal:
        raise ValueError(f"{address!r} is no node id; node ids look like 'layer1.0/AddBackward0#0'")
    return scope, op, ordinal


def op_name(node: Node) -> str:
    """``node.name()`` without the ``torch::autograd::`` prefix."""
    name = node.name()
    return name[len(_PREFIX) :] if name.startswith(_PREFIX) else name
