"""Which module made each autograd node, and the walk that gives every node its scope, id and saved tensors.

Autograd numbers the nodes of a thread in creation order (``node._sequence_nr()``), and
``torch._C._autograd._get_sequence_nr()`` reads the next number for free. Two global forward hooks
keep a stack of this model's module paths and log, at every push and pop, the next sequence number
with the path now current: a node's scope is then the log entry at or before its number. This
gives the same scopes as tagging every op through a TorchFunctionMode (reference script 15,
approach A: ops inside ``F.linear``, in-place ops and tensors a parent stashed on an attribute
included) at no cost per op, only per module call.

A node's id is ``"<scope>/<op>#<ordinal>"``, the ordinal its rank among the nodes of that (scope,
op) in creation order, so the same model and input shapes give the same ids on every forward. An
``AccumulateGrad`` node is addressed by its parameter instead, ``"<owner>/AccumulateGrad#<attr>"``
(``"fc/AccumulateGrad#weight"``); one of a leaf that is no parameter (an input that requires
grad) by its rank in the walk: ``"/AccumulateGrad#leaf0"``. Every walk is iterative.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.modules.module as module_globals
from torch import nn
from torch.autograd.graph import Node

HIDDEN = "\x00hidden"
"""Scope of the nodes made inside ``scope.hidden_ops()``: left out of recorded graphs."""
HIDDEN_OPS = frozenset({"BackwardHookFunctionBackward"})
"""Nodes the explorer's own full backward hooks add: spliced out of graphs."""

_PREFIX = "torch::autograd::"
_saved_names: dict[type, tuple[tuple[str, str], ...]] = {}


_ACTIVE: weakref.WeakSet[ScopeTracker] = weakref.WeakSet()


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
        self.failure: Exception | None = None  # what on_call_end raised at the last call's end

    @property
    def in_call(self) -> bool:
        """True inside a call of the model (also after a KeyboardInterrupt left one unfinished)."""
        return bool(self._stack) and self._stack[0][0] == self._root

    def refresh(self) -> list[tuple[str, nn.Module]]:
        """Re-read the model's module paths (after modules were added or replaced); returns the modules."""
        model = self._model()
        modules = [] if model is None else list(model.named_modules())
        self._paths = {id(m): p for p, m in modules}
        return modules

    def start(self) -> list[tuple[str, nn.Module]] | None:
        """Install the two global forward hooks; the modules read, or None when already started."""
        if self._handles:
            return None
        modules = self.refresh()
        self._thread = threading.get_ident()
        pre = module_globals.register_module_forward_pre_hook(self._pre)
        self._handles.append(pre)
        post = module_globals.register_module_forward_hook(self._post, always_call=True)
        self._handles.append(post)
        _ACTIVE.add(self)
        return modules

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
        seq, scope = next_sequence_nr(), self._current()
        if self._starts and self._starts[-1] == seq:
            self._scopes[-1] = scope  # no node was created since the last mark
        elif not self._scopes or self._scopes[-1] != scope:
            self._starts.append(seq)
            self._scopes.append(scope)

    def _pre(self, module: nn.Module, args: Any) -> None:
        key = id(module)
        path = self._paths.get(key)
        if path is None:
            return
        thread = threading.get_ident()
        if key == self._root and (thread == self._thread or not self.in_call):
            # A new call of the model, on whichever thread runs it (a kernel may handle each message on
            # another one); forget the last call, and any stack a KeyboardInterrupt left.
            self._thread = thread
            self._stack.clear()
            self._starts.clear()
            self._scopes.clear()
            self.call_start, self.call_end, self.failure = next_sequence_nr(), None, None
            self.grad_mode = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
        elif thread != self._thread:
            return  # sequence numbers are per thread: follow only the thread of the current call
        self._stack.append((key, path))
        self._mark()

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        key = id(module)
        if key not in self._paths or threading.get_ident() != self._thread:
            return
        stack = self._stack
        while stack:  # pop through this module's entry, even if an inner call never reported its end
            if stack.pop()[0] == key:
                break
        self._mark()
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


def _saved_attrs(node: Node) -> tuple[tuple[str, str], ...]:
    """``(name, "_raw_saved_<name>")`` for each tensor the node type saves (cached per type)."""
    kind = type(node)
    names = _saved_names.get(kind)
    if names is None:
        prefix = "_raw_saved_"
        names = tuple((a[len(prefix) :], a) for a in dir(kind) if a.startswith(prefix))
        _saved_names[kind] = names
    return names


def _storage_key(tensor: torch.Tensor) -> int | None:
    """Where a tensor's memory starts (one virtual address space across devices); None without one."""
    try:
        return tensor.data_ptr() - tensor.storage_offset() * tensor.element_size() or None
    except Exception:  # sparse, nested and wrapper tensors have no plain storage
        return None


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: a walk makes tens of thousands of small containers and no
    cycles, and the collections they would trigger cost more than the walk itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_dtype_names: dict[torch.dtype, str] = {}


def _dtype_name(dtype: torch.dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return name


@dataclass
class Table:
    """What one walk found, one row per node, in parallel lists (cheaper than a dict per node)."""

    nodes: list[Node] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    seqs: list[int | None] = field(default_factory=list)  # None for AccumulateGrad
    params: list[str | None] = field(default_factory=list)  # parameter names of AccumulateGrad nodes
    ids: list[str] = field(default_factory=list)
    hidden: list[bool] = field(default_factory=list)
    index: dict[Node, int] = field(default_factory=dict)  # node -> row; -1 for nodes older than the forward
    next_edges: list[tuple[int, int, Node, int]] = field(default_factory=list)  # src row, slot, dst, input_nr
    roots: list[int] = field(default_factory=list)
    saved: dict[int, list[tuple]] = field(default_factory=dict)  # row -> (name, shape, dtype, bytes, alias)


class ParamNames:
    """Names of a model's parameters and buffers, by identity and by storage (for saved-tensor aliases)."""

    def __init__(self, model: nn.Module | None, modules: list[tuple[str, nn.Module]] | None = None) -> None:
        self._model = weakref.ref(model) if model is not None else lambda: None
        self.by_id: dict[int, str] = {}
        self._reread = False
        self._storages: dict[int, str] | None = None
        self._read(modules)

    def _read(self, modules: list[tuple[str, nn.Module]] | None = None) -> None:
        """Parameter names by identity, from ``model.named_modules()`` (or the list of it given)."""
        model = self._model()
        self.by_id = {}
        for path, module in modules if modules is not None else model.named_modules() if model is not None else ():
            for name, param in module._parameters.items():
                if param is not None:
                    self.by_id.setdefault(id(param), f"{path}.{name}" if path else name)

    def new_walk(self) -> None:
        """Allow one re-read of the names, and read storages afresh, in the next walk."""
        self._reread, self._storages = False, None

    def name(self, tensor: torch.Tensor) -> str | None:
        name = self.by_id.get(id(tensor))
        if name is None and not self._reread:  # parameters replaced since: read them again, once per walk
            self._reread = True
            self._read()
            name = self.by_id.get(id(tensor))
        return name

    def storages(self) -> dict[int, str]:
        """``"parameter <name>"`` / ``"buffer <name>"`` by where each one's memory starts."""
        if self._storages is None:
            self._storages = {}
            model = self._model()
            for path, module in model.named_modules() if model is not None else ():
                prefix = path + "." if path else ""
                for kind, tensors in (("buffer", module._buffers), ("parameter", module._parameters)):
                    for name, tensor in tensors.items():
                        key = _storage_key(tensor) if tensor is not None else None
                        if key is not None:
                            self._storages.setdefault(key, f"{kind} {prefix}{name}")
        return self._storages


def walk_graph(
    roots: list[Node],
    scopes: tuple[list[int], list[str]],
    span: tuple[int, int],
    params: ParamNames,
    *,
    saved_tensors: bool = True,
) -> Table:
    """Walk the graph from ``roots`` (iteratively) and give every node its scope, id and saved tensors.

    ``scopes`` is the scope log ``(starts, names)``: nodes numbered from ``starts[i]`` on were made in
    ``names[i]``. ``span`` is the range of sequence numbers of the recorded forward: older nodes are
    the inputs' history and are left out; newer ones (views autograd rebuilt lazily) take their
    user's scope. Edges, shapes and order are left for ``GraphRecording.data()``, so a recorder that
    only needs ids pays for the walk alone.
    """
    with no_gc():
        params.new_walk()
        table = _walk(roots, scopes, span, params)
        if saved_tensors:
            table.saved = _read_saved(table, params)
        return table


def _walk(roots: list[Node], scopes: tuple[list[int], list[str]], span: tuple[int, int], params: ParamNames) -> Table:
    lo, hi = span
    starts, names = scopes
    t = Table()
    index, next_edges = t.index, t.next_edges
    nodes, ops, node_scopes, seqs, param_names = t.nodes, t.ops, t.scopes, t.seqs, t.params
    late: list[int] = []  # rows made after the forward: scoped by their first user below
    todo = list(reversed(roots))
    while todo:
        node = todo.pop()
        if node in index:
            continue
        name = node.name()
        op = name[len(_PREFIX) :] if name.startswith(_PREFIX) else name
        if op == "AccumulateGrad":
            param, seq = params.name(node.variable), None
            scope = param.rpartition(".")[0] if param is not None else ""
        else:
            param, seq = None, node._sequence_nr()
            if seq < lo:
                index[node] = -1
                continue
            if seq < hi:
                i = bisect.bisect_right(starts, seq) - 1
                scope = names[i] if i >= 0 else ""
            else:
                scope = ""
                late.append(len(nodes))
        k = len(nodes)
        index[node] = k
        nodes.append(node)
        ops.append(op)
        node_scopes.append(scope)
        seqs.append(seq)
        param_names.append(param)
        for slot, (nxt, input_nr) in enumerate(node.next_functions):
            if nxt is not None:
                next_edges.append((k, slot, nxt, input_nr))
                if nxt not in index:
                    todo.append(nxt)
    if late:
        _scope_by_user(t, late)
    t.roots = [index[root] for root in roots if index.get(root, -1) >= 0]
    t.hidden = [op in HIDDEN_OPS or scope == HIDDEN for op, scope in zip(ops, node_scopes, strict=True)]
    t.ids = _ids(t)
    return t


def _scope_by_user(t: Table, late: list[int]) -> None:
    """Give nodes made after the forward (views autograd rebuilt lazily) the scope of their first user."""
    todo = set(late)
    for k, _, nxt, _ in t.next_edges:  # users come before what they use in the walk's order
        d = t.index[nxt]
        if d in todo and k not in todo:
            t.scopes[d] = t.scopes[k]
            todo.discard(d)


def _ids(t: Table) -> list[str]:
    """Ids: ``scope/op#n`` with n the creation rank in (scope, op); AccumulateGrad by parameter name."""
    ids = [""] * len(t.nodes)
    groups: dict[tuple[str, str], list[int]] = {}
    leaves = 0
    for k, (op, scope, seq, param, hidden) in enumerate(zip(t.ops, t.scopes, t.seqs, t.params, t.hidden, strict=True)):
        if hidden:
            continue
        if seq is not None:
            groups.setdefault((scope, op), []).append(k)
        elif param is not None:
            ids[k] = f"{scope}/{op}#{param.rpartition('.')[2]}"
        else:
            ids[k], leaves = f"{scope}/{op}#leaf{leaves}", leaves + 1
    seqs = t.seqs
    for (scope, op), members in groups.items():
        if len(members) > 1:
            members.sort(key=lambda k: (seqs[k], k))
        for ordinal, k in enumerate(members):
            ids[k] = f"{scope}/{op}#{ordinal}"
    return ids


def _read_saved(t: Table, params: ParamNames) -> dict[int, list[tuple]]:
    """``(name, shape, dtype, bytes, alias)`` of each tensor a node saved for backward; no tensor is kept.

    Read through ``_raw_saved_<name>.data``, which unlike ``_saved_<name>`` does not fail after an
    in-place op, before backward frees them. Memory shared with a parameter, a buffer or a tensor an
    earlier node saved is named in ``alias``.
    """
    owners = dict(params.storages())
    result: dict[int, list[tuple]] = {}
    seqs, hidden, nodes, ids = t.seqs, t.hidden, t.nodes, t.ids
    order = sorted((k for k, seq in enumerate(seqs) if seq is not None and not hidden[k]), key=seqs.__getitem__)
    tensor_type = torch.Tensor
    for k in order:
        node = nodes[k]
        entries = []
        for name, attr in _saved_attrs(node):
            try:
                raw = getattr(node, attr)
            except Exception:  # freed by a backward, or not readable for this node
                continue
            items = (
                [(name, raw)] if not isinstance(raw, (tuple, list)) else [(f"{name}.{i}", r) for i, r in enumerate(raw)]
            )
            for label, item in items:
                tensor = getattr(item, "data", None)
                if not isinstance(tensor, tensor_type):  # None (an optional input), or packed by other hooks
                    continue
                key = _storage_key(tensor)
                alias = owners.get(key) if key is not None else None
                if key is not None and alias is None:
                    owners[key] = f"{ids[k]} {label}"
                nbytes = tensor.numel() * tensor.element_size()
                entries.append((label, tensor.shape, _dtype_name(tensor.dtype), nbytes, alias))
        if entries:
            result[k] = entries
    return result
