"""The autograd graph of one forward as plain data, and how to record it.

``record_graph(model, inputs)`` runs one forward and returns a ``GraphRecording``: live nodes by id
and ``data()``, the plain graph. ``GraphRecorder`` does the same for every call of the model made
inside it. Scopes, ids and the walk are in ``scope``; node ids are described there.
"""

from __future__ import annotations

import difflib
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import Node

from .._torch import next_sequence_nr, off
from ..display import quoted
from ..gc_pause import no_gc
from ..model.inputs import Inputs, call_model
from ..model.names import ParamNames
from ..model.nested import output_tensors
from ..model.preserved_state import preserved_state
from ..model.scope import HIDDEN_OPS, Call, ScopeTracker, hidden_ops, node_id, op_name, parse_node_id
from .dataflow import dataflow_graph
from .no_graph import no_graph_reason
from .plain import GraphCluster, GraphData, SavedTensor
from .walk import Table, walk_graph

__all__ = [
    "GraphRecorder",
    "GraphRecording",
    "dataflow_graph",
    "hidden_ops",
    "node_id",
    "op_name",
    "parse_node_id",
    "record_graph",
]


def _shapes(node: Node) -> list[list[int] | None]:
    """Shapes of the forward outputs of ``node`` (its backward inputs), from autograd's input metadata."""
    try:
        return [list(meta.shape) for meta in node._input_metadata]
    except Exception:  # nested tensors and other exotic outputs have no plain shape
        return []


_SavedRow = tuple[str, list[int], str, int, str | None]  # name, shape, dtype, bytes, alias
_Row = tuple[str, str, str, str | None, list[_SavedRow] | tuple[()]]  # id, op, module, param, saved
_Edge = tuple[str, str, int, int, list[int] | None]  # src, dst, input_nr, slot, shape
_Plain = tuple[list[_Row], list[_Edge], list[str]]  # rows, edges, outputs


def _saved_entry(entry: _SavedRow) -> SavedTensor:
    name, shape, dtype, nbytes, alias = entry
    return {"name": name, "shape": shape, "dtype": dtype, "bytes": nbytes, "alias": alias}


class GraphRecording:
    """One forward's autograd graph: live nodes by id, and its plain data (``data()``).

    ``output`` is the model's output (graph alive); ``error`` the text of the exception when the forward
    raised (the graph is then the part built before it), ``exception`` that exception (until ``release()``).
    ``node(id)`` is the live node with an id (hidden ones have none), ``node_ids`` maps live nodes to ids;
    ``outputs`` are the output nodes' ids; ``saved_by_module`` the bytes each module scope saved for backward
    (activation memory, each tensor counted once, parameters and buffers not at all). The recording holds every node it
    lists, and so the graph and its saved activations, until ``release()``. Everything that a backward
    could change is read during the recording, with the ids; edges and the plain data are made from
    the live nodes when first asked for.
    """

    def __init__(self, table: Table | None = None, module_order: list[str] | None = None) -> None:
        self.output: Any = None
        self.error: str | None = None
        self.exception: BaseException | None = None
        self._table = t = table if table is not None else Table()
        self._module_order = module_order or []
        self._plain: _Plain | None = None
        self._nodes: list[Node] | None = t.nodes  # the live nodes by row; None once released
        self._by_id: dict[str, int] | None = None  # id -> row, made on first use
        self._count = t.hidden.count(False)
        self._saved_by_module: dict[str, int] | None = None

    @property
    def saved_by_module(self) -> dict[str, int]:
        """Bytes of memory of their own that the nodes of each module scope saved for backward."""
        if self._saved_by_module is None:
            by_module: dict[str, int] = {}
            saved, scopes = self._table.saved, self._table.scopes
            for row, nbytes, alias in zip(saved.rows, saved.nbytes, saved.aliases, strict=True):
                if alias is None and nbytes:  # memory of its own: aliases of params or earlier saves are free
                    scope = scopes[row]
                    by_module[scope] = by_module.get(scope, 0) + nbytes
            self._saved_by_module = by_module
        return self._saved_by_module

    @property
    def _rows(self) -> dict[str, int]:
        if self._by_id is None:
            t = self._table
            self._by_id = {i: k for k, (i, h) in enumerate(zip(t.ids, t.hidden, strict=True)) if not h}
        return self._by_id

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        state = f", error={self.error!r}" if self.error else ""
        return f"<GraphRecording {len(self)} nodes{state}>"

    @property
    def outputs(self) -> list[str]:
        """Ids of the output nodes (the grad_fns of the output tensors), in output order."""
        return list(self._materialize()[2])

    @property
    def node_ids(self) -> dict[Node, str]:
        """Each live node (hidden ones excepted) and its id; empty once released."""
        nodes = self._nodes
        return {} if nodes is None else {nodes[k]: i for i, k in self._rows.items()}

    def ids(self) -> list[str]:
        """Every node id of this graph (hidden nodes have none)."""
        return list(self._rows)

    def find(self, node_id: str) -> Node | None:
        """The live node with this id, or None (no such node, or released)."""
        k = self._rows.get(node_id)
        return None if k is None or self._nodes is None else self._nodes[k]

    def node(self, node_id: str) -> Node:
        """The live autograd Node with this id; a KeyError naming close ids when there is none."""
        if self._nodes is None and self._count:
            raise KeyError(f"this recording was released; record the graph again to reach node {quoted(node_id)}")
        node = self.find(node_id)
        if node is not None:
            return node
        close = difflib.get_close_matches(node_id, list(self._rows), n=3, cutoff=0.6)
        hint = " — did you mean " + " or ".join(quoted(c) for c in close) + "?" if close else ""
        raise KeyError(f"no node {quoted(node_id)} in this graph ({self._count} nodes){hint}")

    def release(self) -> None:
        """Drop the output and every live node (the plain data stays), so the graph can be freed."""
        self._materialize()
        self.output = self.exception = None
        self._nodes = None
        self._table.nodes = []

    def data(self) -> GraphData:
        """The graph as plain data: nodes, edges, clusters, and the output node ids.

        Nodes come in forward (creation) order, an AccumulateGrad just before its first user. An edge
        goes from a node to one it sends gradient to: ``src``'s grad_input ``slot`` flows into ``dst``'s
        grad_output ``input_nr``; ``shape`` is the forward tensor's shape. Each saved tensor has an
        ``alias`` naming the parameter, buffer or earlier saved tensor whose memory it shares (None
        when it holds memory of its own; ``saved_by_module`` sums those).
        """
        rows, edges, outputs = self._materialize()
        with no_gc():
            return {
                "nodes": [
                    {"id": i, "op": op, "module": m, "param": p, "saved": [_saved_entry(e) for e in saved]}
                    for i, op, m, p, saved in rows
                ],
                "edges": [
                    {"src": s, "dst": d, "input_nr": nr, "slot": slot, "shape": shape}
                    for s, d, nr, slot, shape in edges
                ],
                "clusters": self._clusters(rows),
                "outputs": list(outputs),
            }

    def _materialize(self) -> _Plain:
        """Rows, edges (hidden nodes spliced out, with shapes) and output ids; built once, from the live nodes."""
        if self._plain is not None:
            return self._plain
        with no_gc():
            self._plain = self._splice()
        return self._plain

    def _splice(self) -> _Plain:
        t = self._table
        hidden, ids, seqs = t.hidden, t.ids, t.seqs
        nodes = self._nodes or []
        all_edges = t.edge_rows() if self._nodes is not None else []
        hidden_out: dict[int, list[tuple[int, int, int]]] = {}
        for src, slot, dst, nr in all_edges:
            if hidden[src]:
                hidden_out.setdefault(src, []).append((slot, dst, nr))

        def through(k: int, input_nr: int) -> list[tuple[int, int]]:
            """Non-hidden targets of an edge into row ``k``: hidden nodes are passed through."""
            found: list[tuple[int, int]] = []
            stack = [(k, input_nr)]
            while stack:
                k, nr = stack.pop()
                if not hidden[k]:
                    found.append((k, nr))
                    continue
                outs = hidden_out.get(k, [])
                if t.ops[k] in HIDDEN_OPS and any(slot == nr for slot, _, _ in outs):
                    outs = [o for o in outs if o[0] == nr]  # a backward-hook node passes tensor i straight through
                stack.extend((dst, i) for _, dst, i in reversed(outs))
            return found

        shapes: dict[int, list[list[int] | None]] = {}
        edges: list[_Edge] = []
        first_use: dict[int, float] = {}
        for src, slot, dst, nr in all_edges:
            if hidden[src]:
                continue
            for d, i in [(dst, nr)] if not hidden[dst] else through(dst, nr):
                if d not in shapes:
                    shapes[d] = _shapes(nodes[d]) if d < len(nodes) else []
                edges.append((ids[src], ids[d], i, slot, shapes[d][i] if i < len(shapes[d]) else None))
                user_seq = seqs[src]  # a user has a number: only AccumulateGrads lack one, and they use nothing
                if seqs[d] is None and user_seq is not None:  # an AccumulateGrad goes just before its first user
                    first_use[d] = min(first_use.get(d, float("inf")), user_seq - 0.5)
        outputs = list(dict.fromkeys(ids[d] for root in t.roots for d, _ in through(root, 0)))
        keys = [seq if seq is not None else first_use.get(k, float("inf")) for k, seq in enumerate(seqs)]
        order = sorted((k for k in range(len(ids)) if not hidden[k]), key=lambda k: (keys[k], k))
        saved = t.saved.by_row(ids)
        rows = [(ids[k], t.ops[k], t.scopes[k], t.params[k], saved.get(k, ())) for k in order]
        return rows, edges, outputs

    def _clusters(self, rows: list[_Row]) -> list[GraphCluster]:
        direct: dict[str, list[str]] = {}
        for i, _, module, _, _ in rows:
            direct.setdefault(module, []).append(i)
        scopes = set(direct)
        for module in list(direct):
            while module:
                module = module.rpartition(".")[0]
                if module in scopes:
                    break
                scopes.add(module)
        rank = {m: k for k, m in enumerate(self._module_order)}
        ordered = sorted(scopes, key=lambda m: (rank.get(m, len(rank)), m))
        return [
            {"module": m, "parent": None if m == "" else m.rpartition(".")[0], "nodes": direct.get(m, [])}
            for m in ordered
        ]


def traceback_roots(tb: types.TracebackType | None) -> list[Node]:
    """grad_fns of the tensors held by the frames of a traceback: the graph built before a forward raised."""
    roots: dict[Node, None] = {}
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            candidates: list[Any] | tuple[Any, ...]
            if isinstance(value, torch.Tensor):
                candidates = [value]
            elif isinstance(value, (tuple, list)):
                candidates = value
            elif isinstance(value, dict):
                candidates = list(value.values())
            else:
                continue
            for tensor in candidates:
                if isinstance(tensor, torch.Tensor) and tensor.grad_fn is not None:
                    roots.setdefault(tensor.grad_fn)
        tb = tb.tb_next
    return list(roots)


def output_roots(output: Any) -> list[Node]:
    """grad_fns of the tensors in an output structure, in order."""
    roots: dict[Node, None] = {}
    for tensor in output_tensors(output):
        if tensor.grad_fn is not None:
            roots.setdefault(tensor.grad_fn)
    return list(roots)


class GraphRecorder:
    """Context manager: records the autograd graph of each call of ``model`` made inside it.

    Every node is scoped to the module whose forward created it (``scope.ScopeTracker``). The
    graph is read at the end of each call of the model, inside its forward and before any backward,
    so saved tensors are still there. ``on_graph(recording)`` is called with each call's recording;
    without it, the last one is kept (``result()``). ``start()``/``stop()`` do what ``with`` does, for
    a recorder that follows many forwards. ``nn.Module.__call__`` and torch's hook dicts are left as found on exit, also
    after an exception or a KeyboardInterrupt. No saved-tensor hooks are installed: saved tensors
    are read from the nodes (an identity pack hook would leak every saved output through a cycle).
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        saved_tensors: bool = True,
        on_graph: Callable[[GraphRecording], None] | None = None,
    ) -> None:
        self.saved_tensors = saved_tensors
        self.on_graph = on_graph
        # The tracker (followed from every module call) must not hold the recorder: through its result, the recorder
        # holds the last graph and its saved activations, which a cycle would keep until the next
        # garbage collection. A recorder dropped while started stops its tracker.
        ref = weakref.ref(self)

        def call_ended(call: Call, output: Any, exc: BaseException | None) -> None:
            recorder = ref()
            if recorder is not None:
                recorder._call_ended(call, output, exc)

        self._tracker = ScopeTracker(model, call_ended)
        weakref.finalize(self, self._tracker.stop)
        self._params: ParamNames | None = None
        self._result: GraphRecording | str | None = None

    def __enter__(self) -> GraphRecorder:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: types.TracebackType | None) -> None:
        try:
            call = self._tracker.call
            if exc is not None and call is not None and self._tracker.in_call:  # interrupted before the hooks told
                call.end = next_sequence_nr()
                self._record(call, traceback_roots(tb), None, f"{type(exc).__name__}: {exc}")
        except Exception as failure:  # the exception in flight matters more; result() tells this one
            self._tracker.failure = failure
        finally:
            self.stop()

    def start(self) -> None:
        why = off().get("node_numbers")
        if why is not None:
            raise RuntimeError(why)
        names = self._tracker.start()
        if names is not None:
            self._params = ParamNames(self._tracker._model(), names)

    def stop(self) -> None:
        self._tracker.stop()

    def refresh(self) -> None:
        """Re-read module paths and parameter names, for a long-lived recorder after the model changed."""
        self._params = ParamNames(self._tracker._model(), self._tracker.refresh())

    @property
    def last(self) -> GraphRecording | None:
        """The last call's recording, or None (no call yet, or it left no graph)."""
        return self._result if isinstance(self._result, GraphRecording) else None

    def result(self) -> GraphRecording:
        """The last call's recording; a ValueError saying why when that call left no graph."""
        if self._tracker.failure is not None:
            raise RuntimeError(f"recording the graph failed: {self._tracker.failure!r}") from self._tracker.failure
        if isinstance(self._result, str):
            raise ValueError(self._result)
        if self._result is None:
            raise ValueError("no graph: the model was not called inside the recorder")
        return self._result

    def _call_ended(self, call: Call, output: Any, exc: BaseException | None) -> None:
        """At the end of ``call`` (on its thread): record its graph, or say why there is none."""
        if exc is not None:
            self._record(call, traceback_roots(exc.__traceback__), None, f"{type(exc).__name__}: {exc}")
            return
        roots = output_roots(output)
        if not roots:
            model = self._tracker._model()
            reason = no_graph_reason(model, output, call.grad_mode, call.inputs_grad) if model is not None else None
            if self.on_graph is None:
                self._result = reason
            return
        self._record(call, roots, output, None)

    def _record(self, call: Call, roots: list[Node], output: Any, error: str | None) -> None:
        tracker = self._tracker
        span = (call.start, call.end if call.end is not None else next_sequence_nr())
        params = self._params or ParamNames(tracker._model())
        params.swapped = call.watch.swapped if call.watch is not None else {}
        try:
            with no_gc():
                table = walk_graph(roots, (call.starts, call.scopes), span, params, saved_tensors=self.saved_tensors)
                recording = GraphRecording(table, list(tracker._paths.values()))
                recording.output, recording.error = output, error
        except BaseException:
            if self.on_graph is None:
                self._result = None  # not the graph of an earlier call
            raise
        if self.on_graph is not None:
            self.on_graph(recording)
        else:
            self._result = recording


def record_graph(
    model: nn.Module, inputs: Inputs, *, saved_tensors: bool = True, eval_mode: bool = True
) -> GraphRecording:
    """Run one forward of ``inputs`` and record its autograd graph; the model's state is left as found.

    A forward that raises gives the graph built before the failure, with ``error`` set. A ValueError
    says why there is no graph when no output has a grad_fn (no_grad, inference_mode, nothing
    requires grad). In eval mode unless ``eval_mode`` is False (then in the modes as found).
    """
    recorder = GraphRecorder(model, saved_tensors=saved_tensors)
    with preserved_state(model, mode="eval" if eval_mode else None), recorder:
        output, raised = _called(model, inputs)
    if raised is not None:
        recording = recorder.last if recorder.last is not None else GraphRecording()
        recording.error = recording.error or f"{type(raised).__name__}: {raised}"
        recording.exception = raised
        return recording
    recording = recorder.result()
    recording.output = output  # what the call returned, after any local forward hook of the model
    return recording


def _called(model: nn.Module, inputs: Inputs) -> tuple[Any, Exception | None]:
    """``(output, None)``, or ``(None, the exception)`` of a forward that raised: the partial graph and the error are
    a recording's result. (Caught in a frame of its own, which the exception's traceback holds without it.)"""
    try:
        return call_model(model, inputs), None
    except Exception as exc:
        return None, exc
