"""The module dataflow graph: modules as nodes and the tensors passed between them, from a scoped autograd graph."""

from __future__ import annotations

from typing import TypedDict

from .plain import Dataflow, DataflowEdge, DataflowNode, GraphData

INPUT = "<input>"
OUTPUT = "<output>"


class _Flow(TypedDict):
    """A dataflow edge while it is gathered: the distinct tensors as ``(maker node, input_nr)``."""

    src: str
    dst: str
    tensors: set[tuple[str, int]]
    uses: int
    shapes: list[list[int] | None]


def _flow(src: str, dst: str) -> _Flow:
    return {"src": src, "dst": dst, "tensors": set(), "uses": 0, "shapes": []}


def _collapse(module: str, depth: int | None) -> str:
    if depth is None or module in (INPUT, OUTPUT):
        return module
    return ".".join(module.split(".")[:depth]) if depth > 0 else ""


def dataflow_graph(graph_data: GraphData, *, depth: int | None = None) -> Dataflow:
    """Modules as nodes, tensors as edges, derived from ``GraphRecording.data()``.

    An edge ``{"src", "dst", "tensors", "uses", "shapes"}`` says that ``dst`` used ``tensors`` distinct
    tensors made by ``src`` (``uses`` times in all), in forward direction. A module node stands for the
    ops its own forward ran (its submodules are nodes of their own); ``depth`` merges every module into
    its ancestor at that depth (``depth=1``: ``layer1.0.conv1`` -> ``layer1``), dropping edges inside it.
    Inputs that require grad come from ``"<input>"``, the outputs go to ``"<output>"``. Parameters are
    no dataflow and are left out. Returns ``{"nodes": [{"module", "ops"}], "edges": [...]}``, nodes in
    forward order and edges by their source's, then their destination's place in it.
    """
    module_of: dict[str, str] = {}
    ops: dict[str, int] = {}
    for node in graph_data["nodes"]:
        if node["op"] == "AccumulateGrad":
            if node["param"] is None:
                module_of[node["id"]] = INPUT
            continue
        module = _collapse(node["module"], depth)
        module_of[node["id"]] = module
        ops[module] = ops.get(module, 0) + 1

    # an autograd edge src -> dst carries the gradient of a tensor dst made and src used
    flows: dict[tuple[str, str], _Flow] = {}
    for edge in graph_data["edges"]:
        user, maker = module_of.get(edge["src"]), module_of.get(edge["dst"])
        if user is None or maker is None or user == maker:
            continue
        flow = flows.setdefault((maker, user), _flow(maker, user))
        tensor = (edge["dst"], edge["input_nr"])
        if tensor not in flow["tensors"]:
            flow["tensors"].add(tensor)
            flow["shapes"].append(edge.get("shape"))
        flow["uses"] += 1
    for out in graph_data.get("outputs", []):
        maker = module_of.get(out)
        if maker is not None:
            flow = flows.setdefault((maker, OUTPUT), _flow(maker, OUTPUT))
            flow["tensors"].add((out, 0))
            flow["uses"] += 1

    order = list(dict.fromkeys(module_of.values()))
    if INPUT in order:
        order.remove(INPUT)
        order.insert(0, INPUT)
    if any(dst == OUTPUT for _, dst in flows):
        order.append(OUTPUT)
    nodes: list[DataflowNode] = [{"module": m, "ops": ops.get(m, 0)} for m in order]
    rank = {m: k for k, m in enumerate(order)}
    ordered = sorted(flows.values(), key=lambda f: (rank[f["src"]], rank[f["dst"]]))
    edges: list[DataflowEdge] = [
        {"src": f["src"], "dst": f["dst"], "tensors": len(f["tensors"]), "uses": f["uses"], "shapes": f["shapes"]}
        for f in ordered
    ]
    return {"nodes": nodes, "edges": edges}
