"""The graph panel's data: the recorded autograd graph and its module dataflow, made compact for the browser.

``ex.graph()`` repeats each node's module and op names and lists every saved tensor; a 20,000-node
graph is then megabytes of JSON. ``compact_autograd`` sends each string once (tables of ops and
modules, integer references), edges as index pairs, and the saved tensors as per-node totals,
with their list only for graphs up to ``SAVED_DETAIL_LIMIT`` nodes. docs/widget-protocol.md has the shape.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ..core.graph.dataflow import dataflow_graph
from ..core.model.lazy import materialize_notices

if TYPE_CHECKING:
    from .explorer import HookExplorer
    from .view import ExplorerView

SAVED_DETAIL_LIMIT = 5000
"""Graphs with more nodes than this send saved-tensor totals per node, not the list of saved tensors."""

EMPTY: dict[str, Any] = {"autograd": None, "dataflow": None, "error": ""}


def compact_autograd(data: dict[str, Any]) -> dict[str, Any]:
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


def graph_payload(data: dict[str, Any] | None, error: str = "") -> dict[str, Any]:
    """The ``graph`` traitlet for a recorded graph (or None): compact autograd graph, dataflow, error text."""
    if data is None:
        return {**EMPTY, "error": error}
    return {
        "autograd": compact_autograd(data),
        "dataflow": dataflow_graph(data),
        "error": error or data.get("error") or "",  # a failed forward's partial graph says why it stops
    }


def sync_graph(view: ExplorerView, data: dict[str, Any] | None) -> None:
    """Send ``data`` to the view unless it already shows that very graph (recording makes a new dict)."""
    if data is None or getattr(view, "_hw_graph_data", None) is data:
        return
    view.graph = graph_payload(data)
    view._hw_graph_data = data


def record_from_view(explorer: HookExplorer, content: dict[str, Any] | None = None) -> None:
    """The ``{"kind": "graph"}`` message: record the example inputs' graph; a failure goes to ``graph.error``."""
    view = explorer.view
    if explorer.example_inputs is None:
        text = "Record graph needs example inputs: HookExplorer(model, example_inputs=x)"
        view.graph = {**EMPTY, "error": text}
        view.status = {**view.status, "state": "error", "message": text}
        return
    view.status = {**view.status, "state": "busy", "message": "recording the autograd graph…"}
    explained, notices = len(explorer.diagnostics), []
    try:
        with materialize_notices(explorer.model, notices), warnings.catch_warnings():
            # a partial graph's error, and a hook detached after an in-place collision, are shown in the page instead
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.filterwarnings("ignore", message="the full backward hook")
            data = explorer.graph(explorer._inputs(None))  # a copy of the example inputs, recorded again
    except Exception as exc:  # "no graph: …" and failures of the recorder: shown in the panel, kernel alive
        text = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        view.graph = {**EMPTY, "error": text}  # the previous graph stays in ex.graph(), not on screen
        summary = text.splitlines()[0] if text else "recording the graph failed"
        view.status = {**view.status, "state": "error", "message": summary}
        if notices:
            view.error = "\n\n".join(notices)
            explorer._sync(plots=False)  # the tree's new parameter counts
        return
    detached = explorer.diagnostics[explained:]  # full backward hooks an in-place op broke: explained, detached
    if notices or detached:  # the model changed for good (lazy modules), or hooks left: said in the page
        view.error = "\n\n".join([*notices, *detached])
        explorer._sync(plots=False)  # detached hooks' badges leave, the tree gets its new parameter counts
    sync_graph(view, data)
    nodes = len(data["nodes"])
    if data.get("error"):
        view.status = {**view.status, "state": "error", "message": f"partial graph ({nodes} nodes): the forward failed"}
    else:
        view.status = {**view.status, "state": "idle", "message": f"graph recorded: {nodes} autograd nodes"}
