"""Which module made each autograd node: the scope log kept during a forward, and node ids.

Autograd numbers the nodes of a thread in creation order (``node._sequence_nr()``), and
``torch._C._autograd._get_sequence_nr()`` reads the next number for free. Two global forward hooks
keep a stack of this model's module paths and log, at every push and pop, the next sequence number
with the path now current: a node's scope is then the log entry at or before its number. This
gives the same scopes as tagging every op through a TorchFunctionMode (reference script 15,
approach A: ops inside ``F.linear``, in-place ops and tensors a parent stashed on an attribute
included) at no cost per op, only per module call. ``graph_walk`` reads the log.

A node's id is ``"<scope>/<op>#<ordinal>"``, the ordinal its rank among the nodes of that (scope,
op) in creation order, so the same model and input shapes give the same ids on every forward. An
``AccumulateGrad`` node is addressed by its parameter instead, ``"<owner>/AccumulateGrad#<attr>"``
(``"fc/AccumulateGrad#weight"``); one of a leaf that is no parameter (an input that requires
grad) by its rank in the walk: ``"/AccumulateGrad#leaf0"``. Every walk is iterative.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.modules.module as module_globals
from torch import nn
from torch.autograd.graph import Node

from .graph_names import ModelNames, read_names

HIDDEN = "\x00hidden"
"""Scope of the nodes made inside ``scope.hidden_ops()``: left out of recorded graphs."""
HIDDEN_OPS = frozenset({"BackwardHookFunctionBackward"})
"""Nodes the explorer's own full backward hooks add: spliced out of graphs."""

_PREFIX = "torch::autograd::"


_ACTIVE: weakref.WeakSet[ScopeTracker] = weakref.WeakSet()
_get_ident = threading.get_ident


def _probe_sequence_nr() -> int:
    """The next sequence number, by making one node (when torch lacks the private reader)."""
    with torch.enable_grad():
        return (torch.zeros((), requires_grad=True) * 1).grad_fn._sequence_nr() + 1


next_sequence_nr: Callable[[], int] = getattr(torch._C._autograd, "_get_sequence_nr", _probe_sequence_nr)


@contextlib.contextmanager
def hidden_ops() -> Iterator[None]:
    """Nodes created inside are hidden from recorded graphs and take no ordinal (the explorer's own edits).

    Without it, an edit applied in a forward hook would shift the ordinals of its parent's later
    nodes of the same op, and node ids (persistent addresses) would change when an edit is attached.
    """
    trackers = [t for t in list(_ACTIVE) if t._thread == threading.get_ident()]
    for tracker in trackers:
        tracker._hidden += 1
        tracker._mark()
    try:
        yield
    finally:
        for tracker in trackers:
            tracker._hidden -= 1
            tracker._mark()


class ScopeTracker:
    """Follows the calls of one model's modules and logs which module path was current from which node on.

    ``on_call_end(output, exc)`` runs at the end of every call of the model itself, inside the forward
    and before any backward: ``exc`` is the exception when the forward raised (output is then None).
    Ops outside any submodule belong to the root ``""``. Modules of other models are ignored, and so
    are calls on other threads while a call of the model is under way (sequence numbers are per thread).
    """

    def __init__(self, model: nn.Module, on_call_end: Callable[[Any, BaseException | None], None]) -> None:
        self._model = weakref.ref(model)
        self._root = id(model)
        self._on_call_end = on_call_end
        self._paths: dict[int, str] = {}
        self._stack: list[tuple[int, str]] = []
        self._starts: list[int] = []
        self._scopes: list[str] = []
        self._hidden = 0
        self._handles: list[Any] = []
        self._thread = threading.get_ident()
        self.call_start: int | None = None  # sequence number where the current (or last) root call began
        self.call_end: int | None = None
        self.grad_mode = (True, False)  # (grad enabled, inference mode) when the root call began
        self.inputs_grad = False  # whether a tensor argument of the root call required grad
        self.failure: Exception | None = None  # what on_call_end raised at the last call's end

    @property
    def in_call(self) -> bool:
        """True inside a call of the model (also after a KeyboardInterrupt left one unfinished)."""
        return bool(self._stack) and self._stack[0][0] == self._root

    def refresh(self) -> ModelNames:
        """Re-read the model's module paths (after modules were added or replaced); returns every name read."""
        names = read_names(self._model())
        self._paths = names.paths
        return names

    def start(self) -> ModelNames | None:
        """Install the two global forward hooks; the names read, or None when already started."""
        if self._handles:
            return None
        names = self.refresh()
        self._thread = threading.get_ident()
        pre = module_globals.register_module_forward_pre_hook(self._pre)
        self._handles.append(pre)
        post = module_globals.register_module_forward_hook(self._post, always_call=True)
        self._handles.append(post)
        _ACTIVE.add(self)
        return names

    def stop(self) -> None:
        """Remove the hooks and every entry they made in torch's global dicts. Idempotent."""
        for handle in self._handles:
            handle.remove()
            # RemovableHandle leaves the with_kwargs dict alone; clean both extra dicts explicitly
            module_globals._global_forward_hooks_with_kwargs.pop(handle.id, None)
            module_globals._global_forward_hooks_always_called.pop(handle.id, None)
        self._handles.clear()
        self._stack.clear()
        self._hidden = 0
        _ACTIVE.discard(self)

    def _current(self) -> str:
        if self._hidden:
            return HIDDEN
        return self._stack[-1][1] if self._stack else ""

    def _mark(self) -> None:
        self._log(next_sequence_nr(), self._current())

    def _log(self, seq: int, scope: str) -> None:
        """From node number ``seq`` on, nodes are made in ``scope``."""
        starts, scopes = self._starts, self._scopes
        if starts and starts[-1] == seq:
            scopes[-1] = scope  # no node was created since the last mark
        elif not scopes or scopes[-1] != scope:
            starts.append(seq)
            scopes.append(scope)

    # _pre and _post run at every module call while a recorder exists: kept to a few dict and C calls.
    def _pre(self, module: nn.Module, args: Any) -> None:
        key = id(module)
        path = self._paths.get(key)
        if path is None:
            return
        if key == self._root:
            thread = _get_ident()
            if thread == self._thread or not self.in_call:
                # A new call of the model, on whichever thread runs it (a kernel may handle each message on
                # another one); forget the last call, and any stack a KeyboardInterrupt left.
                self._thread = thread
                self._stack.clear()
                self._starts.clear()
                self._scopes.clear()
                self.call_start, self.call_end, self.failure = next_sequence_nr(), None, None
                self.grad_mode = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
                self.inputs_grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
            else:
                return  # sequence numbers are per thread: follow only the thread of the current call
        elif _get_ident() != self._thread:
            return
        self._stack.append((key, path))
        self._log(next_sequence_nr(), HIDDEN if self._hidden else path)

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        key = id(module)
        if key not in self._paths or _get_ident() != self._thread:
            return
        stack = self._stack
        while stack:  # pop through this module's entry, even if an inner call never reported its end
            if stack.pop()[0] == key:
                break
        self._log(next_sequence_nr(), HIDDEN if self._hidden else stack[-1][1] if stack else "")
        if key == self._root and not stack:
            self.call_end = next_sequence_nr()
            exc = sys.exc_info()[1] if output is None else None
            try:
                self._on_call_end(output, exc)
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
