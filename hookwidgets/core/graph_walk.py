"""The walk of an autograd graph from its roots: every node's row, scope, id and edges, iteratively.

Scopes come from the log a ``scope.ScopeTracker`` kept during the forward; ids are described in
``scope``. The result is a ``Table`` of parallel lists that ``graph.GraphRecording`` turns into plain data.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass, field

from torch.autograd.graph import Node

from .graph_names import ParamNames
from .graph_saved import Saved, read_saved
from .scope import HIDDEN, HIDDEN_OPS, op_name

_op_names: dict[type, str] = {}  # node type -> op name, for the types that stand for one op


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


def _op_of(node: Node) -> str:
    """``op_name(node)``, remembered for its type when the type stands for that one op (most do)."""
    op = op_name(node)
    kind = type(node)
    if kind.__name__ == op:  # not a shared wrapper type whose nodes have different names
        _op_names[kind] = op
    return op


@dataclass
class Table:
    """What one walk found, one row per node, in parallel lists (cheaper than a dict per node).

    Apart from the nodes, only ints, strings and flat lists outlive the walk: every object a
    recording keeps is one the cyclic garbage collector traverses at each collection while it lives.
    For a 10,000-node graph, a tuple per edge and per saved tensor cost more in collections than the
    walk itself. (The nodes' Python objects cannot be spared: once made, torch keeps each one as long
    as its node lives.)
    """

    nodes: list[Node] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    seqs: list[int | None] = field(default_factory=list)  # None for AccumulateGrad
    params: list[str | None] = field(default_factory=list)  # parameter names of AccumulateGrad nodes
    ids: list[str] = field(default_factory=list)
    hidden: list[bool] = field(default_factory=list)
    edges: list[int] = field(default_factory=list)  # (src row, slot, input_nr) triples, flat
    edge_dst: list[int] = field(default_factory=list)  # dst row of each edge; -1 for nodes older than the forward
    roots: list[int] = field(default_factory=list)
    saved: Saved = field(default_factory=Saved)

    def edge_rows(self) -> Iterator[tuple[int, int, int, int]]:
        """``(src row, slot, dst row, input_nr)`` of each edge (dst -1 for nodes older than the forward)."""
        edges = self.edges
        for e, dst in enumerate(self.edge_dst):
            yield edges[3 * e], edges[3 * e + 1], dst, edges[3 * e + 2]


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
            read_saved(table, params)
        return table


def _walk(roots: list[Node], scopes: tuple[list[int], list[str]], span: tuple[int, int], params: ParamNames) -> Table:
    # The hot loop of every recording (and of the node-hook recorder on every forward): locals only.
    lo, hi = span
    starts, names = scopes
    t = Table()
    index: dict[Node, int] = {}  # node -> row; -1 for nodes older than the forward
    nodes, ops, node_scopes, seqs, param_names = t.nodes, t.ops, t.scopes, t.seqs, t.params
    op_of, param_of, bisect_right = _op_names.get, params.by_id.get, bisect.bisect_right
    late: list[int] = []  # rows made after the forward: scoped by their first user below
    dst_nodes: list[Node] = []
    todo = list(reversed(roots))
    pop, push, add_edge, add_dst = todo.pop, todo.append, t.edges.extend, dst_nodes.append
    while todo:
        node = pop()
        if node in index:
            continue
        op = op_of(type(node)) or _op_of(node)
        k = len(nodes)
        if op == "AccumulateGrad":  # a leaf: no next functions
            variable = node.variable
            param = param_of(id(variable)) or params.name(variable)
            index[node] = k
            nodes.append(node)
            ops.append(op)
            node_scopes.append(param.rpartition(".")[0] if param is not None else "")
            seqs.append(None)
            param_names.append(param)
            continue
        seq = node._sequence_nr()
        if seq < lo:
            index[node] = -1
            continue
        if seq < hi:
            i = bisect_right(starts, seq) - 1
            scope = names[i] if i >= 0 else ""
        else:
            scope = ""
            late.append(k)
        index[node] = k
        nodes.append(node)
        ops.append(op)
        node_scopes.append(scope)
        seqs.append(seq)
        param_names.append(None)
        for slot, (nxt, input_nr) in enumerate(node.next_functions):
            if nxt is not None:
                add_edge((k, slot, input_nr))
                add_dst(nxt)
                if nxt not in index:
                    push(nxt)
    t.edge_dst = [index[node] for node in dst_nodes]
    if late:
        _scope_by_user(t, late)
    t.roots = [index[root] for root in roots if index.get(root, -1) >= 0]
    t.hidden = [op in HIDDEN_OPS or scope == HIDDEN for op, scope in zip(ops, node_scopes, strict=True)]
    t.ids = _ids(t)
    return t


def _scope_by_user(t: Table, late: list[int]) -> None:
    """Give nodes made after the forward (views autograd rebuilt lazily) the scope of their first user."""
    todo = set(late)
    for k, _, d, _ in t.edge_rows():  # users come before what they use in the walk's order
        if d in todo and k not in todo:
            t.scopes[d] = t.scopes[k]
            todo.discard(d)


def _ids(t: Table) -> list[str]:
    """Ids: ``scope/op#n`` with n the creation rank in (scope, op); AccumulateGrad by parameter name."""
    ids = [""] * len(t.nodes)
    groups: dict[str, list[int]] = {}  # "scope/op" -> rows
    leaves = 0
    for k, (op, scope, seq, param, hidden) in enumerate(zip(t.ops, t.scopes, t.seqs, t.params, t.hidden, strict=True)):
        if hidden:
            continue
        if seq is not None:
            prefix = scope + "/" + op
            members = groups.get(prefix)
            if members is None:
                groups[prefix] = [k]
            else:
                members.append(k)
        elif param is not None:
            ids[k] = f"{scope}/{op}#{param.rpartition('.')[2]}"
        else:
            ids[k], leaves = f"{scope}/{op}#leaf{leaves}", leaves + 1
    seqs = t.seqs
    for prefix, members in groups.items():
        if len(members) == 1:
            ids[members[0]] = prefix + "#0"
            continue
        members.sort(key=lambda k: (seqs[k], k))
        for ordinal, k in enumerate(members):
            ids[k] = f"{prefix}#{ordinal}"
    return ids
