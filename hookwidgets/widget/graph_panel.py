"""The graph panel's data: the recorded autograd graph and its module dataflow, made compact for the browser.

``ex.graph()`` repeats each node's module and op names and lists every saved tensor; a 20,000-node
graph is then megabytes of JSON. ``compact_autograd`` sends each string once (tables of ops and
modules, integer references), edges as index pairs, and the saved tensors as per-node totals,
with their list only for graphs up to ``SAVED_DETAIL_LIMIT`` nodes. docs/widget-protocol.md has the shape.
"""

from __future__ import annotations

from ..core.graph.dataflow import dataflow_graph
from ..core.graph.plain import GraphData
from .protocol import CompactGraph, Graph

SAVED_DETAIL_LIMIT = 5000
"""Graphs with more nodes than this send saved-tensor totals per node, not the list of saved tensors."""

EMPTY: Graph = {"autograd": None, "dataflow": None, "error": "", "recordable": False}


def compact_autograd(data: GraphData) -> CompactGraph:
    """The plain graph of ``ex.graph()`` with every repeated string sent once and nodes referred to by index."""
    nodes = data["nodes"]
    index = {node["id"]: k for k, node in enumerate(nodes)}
    clusters = data.get("clusters", [])
    modules = [cluster["module"] for cluster in clusters]
    module_index = {module: k for k, module in enumerate(modules)}
    for node in nodes:  # a graph without clusters (hand-made data) still places every node
        if node["module"] not in module_index:
            module_index[node["module"]] = len(modules)
            modules.append(node["module"])
    parents = [-1] * len(modules)
    for k, module in enumerate(modules):
        if module:
            parent = module.rpartition(".")[0]
            while parent not in module_index and parent:
                parent = parent.rpartition(".")[0]
            parents[k] = module_index.get(parent, -1)
    ops: dict[str, int] = {}
    detail = len(nodes) <= SAVED_DETAIL_LIMIT
    saved = []
    for k, node in enumerate(nodes):
        entries = node.get("saved") or []
        if entries:
            own = sum(e["bytes"] for e in entries if e.get("alias") is None)
            listed = [[e["name"], e["shape"], e["dtype"], e["bytes"], e.get("alias")] for e in entries]
            saved.append([k, own, len(entries), listed if detail else None])
    return {
        "ids": [node["id"] for node in nodes],
        "op": [ops.setdefault(node["op"], len(ops)) for node in nodes],
        "ops": list(ops),
        "module": [module_index[node["module"]] for node in nodes],
        "modules": modules,
        "parents": parents,
        "params": [[k, node["param"]] for k, node in enumerate(nodes) if node.get("param")],
        "saved": saved,
        "edges": [[index[e["src"]], index[e["dst"]]] for e in data["edges"] if e["src"] in index and e["dst"] in index],
        "outputs": [index[i] for i in data.get("outputs", []) if i in index],
    }


def graph_payload(data: GraphData | None, error: str = "", *, recordable: bool = True) -> Graph:
    """The ``graph`` traitlet for a recorded graph (or None): compact autograd graph, dataflow, error text, and
    whether the explorer has example inputs to record one from (``recordable``)."""
    if data is None:
        return {**EMPTY, "error": error, "recordable": recordable}
    return {
        "autograd": compact_autograd(data),
        "dataflow": dataflow_graph(data),
        "error": error or data.get("error") or "",  # a failed forward's partial graph says why it stops
        "recordable": recordable,
    }
