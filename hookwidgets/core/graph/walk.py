"""The walk of an autograd graph from its roots: every node's row, op, scope and sequence number, iteratively.

Scopes come from the log a ``scope.ScopeTracker`` kept during the forward; ids are described in
``scope``. The result is a ``Table`` of parallel lists that ``graph.GraphRecording`` turns into plain data.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from torch.autograd.graph import Node

from .._torch import ACCUMULATE_GRAD, sequence_nr
from ..gc_pause import no_gc
from ..model.names import ParamNames
from ..model.scope import HIDDEN, HIDDEN_OPS, op_name
from .saved import Saved, read_saved

_op_names: dict[type, str] = {}  # node type -> op name, for the types that stand for one op


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

    The walk reads only what a backward or a later forward could change or free: the nodes, their
    sequence numbers and ops, and the saved tensors. Scopes, parameter names and ids follow from
    those, the forward's scope log and the model's names, and are derived on first use (``scopes``,
    ``params``, ``ids``), so the recording forward does not wait for them; ``GraphRecording.release``
    makes the plain data, and so derives them, before it lets the nodes go (leaves' names need them).

    Apart from the nodes, only ints, strings and flat lists outlive the walk: every object a
    recording keeps is one the cyclic garbage collector traverses at each collection while it lives.
    (The nodes' Python objects cannot be spared: once made, torch keeps each one as long as its node
    lives.) Edges are read from the live nodes when the plain data is made (``edge_rows``): they
    follow from the nodes the table holds, and a recorder that only places node hooks never needs them.
    """

    nodes: list[Node] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    seqs: list[int | None] = field(default_factory=list)  # None for AccumulateGrad
    hidden: list[bool] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # rows with a sequence number, hidden ones left out, by number
    roots: list[int] = field(default_factory=list)
    leaves: list[int] = field(default_factory=list)  # the AccumulateGrad rows, in the walk's order
    saved: Saved = field(default_factory=Saved)
    log: tuple[list[int], list[str]] = ((), ())  # type: ignore[assignment] # the forward's scope log
    span: tuple[int, int] = (0, 0)
    names: ParamNames | None = None
    _scopes: list[str] | None = None
    _params: list[str | None] | None = None
    _ids: list[str] | None = None

    @property
    def scopes(self) -> list[str]:
        """Each row's module scope (``""`` for the root and for rows outside the forward)."""
        if self._scopes is None:
            self._derive_scopes()
        return self._scopes  # type: ignore[return-value]

    @property
    def params(self) -> list[str | None]:
        """The parameter name of each AccumulateGrad row (None for other rows and for inputs)."""
        if self._params is None:
            self._derive_scopes()
        return self._params  # type: ignore[return-value]

    @property
    def ids(self) -> list[str]:
        """Each row's id (``""`` for hidden rows)."""
        if self._ids is None:
            self._ids = _ids(self)
        return self._ids

    def _derive_scopes(self) -> None:
        lo, hi = self.span
        self._scopes = _scopes_by_number(self.seqs, self.log, lo, hi)
        self._params = [None] * len(self.nodes)
        if self.leaves:
            _scope_leaves(self, self.leaves, self.names if self.names is not None else ParamNames(None))

    def edge_rows(self) -> list[tuple[int, int, int, int]]:
        """``(src row, slot, dst row, input_nr)`` of each edge between two rows, from the live nodes."""
        index = {node: k for k, node in enumerate(self.nodes)}
        get = index.get
        edges: list[tuple[int, int, int, int]] = []
        add = edges.append
        for k, node in enumerate(self.nodes):
            for slot, (nxt, input_nr) in enumerate(node.next_functions):
                d = get(nxt) if nxt is not None else None
                if d is not None:
                    add((k, slot, d, input_nr))
        return edges


def walk_graph(
    roots: list[Node],
    scopes: tuple[list[int], list[str]],
    span: tuple[int, int],
    params: ParamNames,
    *,
    saved_tensors: bool = True,
) -> Table:
    """Walk the graph from ``roots`` (iteratively) and give every node its op, scope and saved tensors.

    ``scopes`` is the scope log ``(starts, names)``: nodes numbered from ``starts[i]`` on were made in
    ``names[i]``. ``span`` is the range of sequence numbers of the recorded forward: older nodes are
    the inputs' history and are left out; newer ones (views autograd rebuilt lazily) take their
    user's scope. Edges, shapes and the plain data are left for ``GraphRecording``, which reads them
    when asked from the live nodes.
    """
    with no_gc():
        params.new_walk()
        table = _walk(roots, scopes, span, params)
        if saved_tensors:
            read_saved(table.saved, table.nodes, table.order, params)
        return table


def _walk(roots: list[Node], scopes: tuple[list[int], list[str]], span: tuple[int, int], params: ParamNames) -> Table:
    # The hot loop of every recording (and of the node-hook recorder on every forward): the loop does
    # only what needs the node in hand; the rest runs over whole lists afterwards, or when first used.
    lo, hi = span
    t = Table(log=scopes, span=span, names=params)
    index: dict[Node, int] = {}  # node -> row; -1 for nodes older than the forward
    nodes, seqs, leaves = t.nodes, t.seqs, t.leaves
    add_node, add_seq = nodes.append, seqs.append
    todo = list(reversed(roots))
    pop, push, accumulate, number = todo.pop, todo.append, ACCUMULATE_GRAD, sequence_nr
    while todo:
        node = pop()
        if node in index:
            continue
        k = len(nodes)
        if type(node) is accumulate:  # a leaf: no number in the forward's order, no next functions
            index[node] = k
            add_node(node)
            add_seq(None)
            leaves.append(k)
            continue
        seq = number(node)
        if seq < lo:
            index[node] = -1
            continue
        index[node] = k
        add_node(node)
        add_seq(seq)
        for nxt, _ in node.next_functions:
            if nxt is not None and nxt not in index:
                push(nxt)
    op_of = _op_names.get
    ops = t.ops = [op_of(type(node)) or _op_of(node) for node in nodes]
    late = [k for k, seq in enumerate(seqs) if seq is not None and seq >= hi]
    if late:  # rare: views autograd rebuilt lazily; their scopes need the walk's index, so now
        _scope_by_user(t, late, index)
    t.roots = [index[root] for root in roots if index.get(root, -1) >= 0]
    number_of = cast(Callable[[int], int], seqs.__getitem__)  # sorts only rows with a number
    if HIDDEN in scopes[1] or not HIDDEN_OPS.isdisjoint(ops):  # the explorer's own nodes are there (rare)
        hidden = t.hidden = [op in HIDDEN_OPS or scope == HIDDEN for op, scope in zip(ops, t.scopes, strict=True)]
        t.order = sorted((k for k, s in enumerate(seqs) if s is not None and not hidden[k]), key=number_of)
    else:
        t.hidden = [False] * len(nodes)
        t.order = sorted((k for k, s in enumerate(seqs) if s is not None), key=number_of)
    return t


def _scopes_by_number(seqs: list[int | None], log: tuple[list[int], list[str]], lo: int, hi: int) -> list[str]:
    """The scope of each sequence number in ``seqs`` by the log; ``""`` for numbers outside ``[lo, hi)``."""
    starts, names = log
    if not starts:
        return [""] * len(seqs)
    if hi - lo <= 4 * len(seqs) + 4096:  # a table of every number of the forward: one index per node
        table = [""] * (min(starts[0], hi) - lo)
        for name, start, end in zip(names, starts, [*starts[1:], hi], strict=True):
            end = min(end, hi)
            if end > start:
                table += [name] * (end - start)
        return [table[seq - lo] if seq is not None and seq < hi else "" for seq in seqs]
    right, first = bisect.bisect_right, starts[0]  # a forward that made far more nodes than its graph kept
    return [names[right(starts, seq) - 1] if seq is not None and first <= seq < hi else "" for seq in seqs]


def _scope_leaves(t: Table, rows: list[int], params: ParamNames) -> None:
    """Give the AccumulateGrad rows their parameter's name and its module's scope (``""`` for other leaves)."""
    nodes, scopes, names = t.nodes, t.scopes, t.params
    keys = [id(nodes[k].variable) for k in rows]  # type: ignore[attr-defined]  # stubs lack AccumulateGrad's variable
    found = list(map(params.by_id.get, keys))
    for k, name, scope in zip(rows, found, map(params.scopes.get, keys), strict=True):
        if name is None:  # replaced since the names were read, or no parameter (an input)
            name = names[k] = params.name(nodes[k].variable)  # type: ignore[attr-defined]  # as above
            scopes[k] = name.rpartition(".")[0] if name is not None else ""
        else:
            names[k] = name
            scopes[k] = scope if scope is not None else ""  # read with the name: there whenever the name is


def _scope_by_user(t: Table, late: list[int], index: dict[Node, int]) -> None:
    """Give nodes made after the forward (views autograd rebuilt lazily) the scope of their first user."""
    todo = set(late)
    for k, node in enumerate(t.nodes):  # users come before what they use in the walk's order
        if k in todo:
            continue
        for nxt, _ in node.next_functions:
            d = index.get(nxt) if nxt is not None else None
            if d in todo:
                t.scopes[d] = t.scopes[k]
                todo.discard(d)


def _ids(t: Table) -> list[str]:
    """Ids: ``scope/op#n`` with n the creation rank in (scope, op); AccumulateGrad by parameter name."""
    ids = [""] * len(t.nodes)
    ops, scopes = t.ops, t.scopes
    counts: dict[str, int] = {}  # "scope/op" -> nodes numbered so far
    get = counts.get
    for k in t.order:
        prefix = scopes[k] + "/" + ops[k]
        n = get(prefix, 0)
        counts[prefix] = n + 1
        ids[k] = f"{prefix}#{n}"
    unnamed = 0
    for k in t.leaves:  # in the walk's order, which numbers leaves that are no parameter
        if t.hidden[k]:
            continue
        param, scope = t.params[k], scopes[k]
        if param is not None:
            ids[k] = f"{scope}/{ops[k]}#{param[len(scope) + 1 :] if scope else param}"
        else:
            ids[k], unnamed = f"{scope}/{ops[k]}#leaf{unnamed}", unnamed + 1
    return ids
