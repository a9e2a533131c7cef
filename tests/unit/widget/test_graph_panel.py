"""The graph panel driven through the messages the browser sends: record, errors, selection, hook targets."""

import json
import warnings

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.widget.graph_panel import SAVED_DETAIL_LIMIT, compact_autograd, graph_payload

from ._messages import browser_sends, browser_sets
from ._setups import backward_hook_an_in_place_op_breaks


def expand(compact):
    """The nodes and edges of ``ex.graph()`` back from the compact payload (saved lists as sent)."""
    params = dict(map(tuple, compact["params"]))
    saved = {k: (own, count, listed) for k, own, count, listed in compact["saved"]}
    nodes = [
        {
            "id": node_id,
            "op": compact["ops"][compact["op"][k]],
            "module": compact["modules"][compact["module"][k]],
            "param": params.get(k),
            "saved": saved.get(k),
        }
        for k, node_id in enumerate(compact["ids"])
    ]
    edges = [(compact["ids"][s], compact["ids"][d]) for s, d in compact["edges"]]
    return nodes, edges


def test_the_view_starts_without_a_graph(explorer):
    assert explorer.view.graph == {"autograd": None, "dataflow": None, "error": "", "recordable": True}


def test_record_message_fills_the_graph_with_what_ex_graph_returns(explorer):
    view = explorer.view
    browser_sends(view, type="graph")
    data = explorer.graph()
    nodes, edges = expand(view.graph["autograd"])
    assert [(n["id"], n["op"], n["module"], n["param"]) for n in nodes] == [
        (n["id"], n["op"], n["module"], n["param"]) for n in data["nodes"]
    ]
    assert edges == [(e["src"], e["dst"]) for e in data["edges"]]
    conv = next(n for n in nodes if n["op"] == "ConvolutionBackward0")
    own, count, listed = conv["saved"]
    source = next(n for n in data["nodes"] if n["op"] == "ConvolutionBackward0")["saved"]
    assert count == len(source) and own == sum(s["bytes"] for s in source if s["alias"] is None)
    assert listed == [[s["name"], s["shape"], s["dtype"], s["bytes"], s["alias"]] for s in source]
    assert view.graph["autograd"]["modules"] == [c["module"] for c in data["clusters"]]
    outputs = view.graph["autograd"]["outputs"]
    assert [view.graph["autograd"]["ids"][k] for k in outputs] == data["outputs"]
    assert view.graph["dataflow"] == explorer.dataflow()
    assert view.graph["error"] == "" and view.error == ""
    assert view.status["state"] == "idle"
    assert view.status["message"] == f"graph recorded: {len(data['nodes'])} autograd nodes"
    json.dumps(view.get_state()["graph"])  # plain JSON, no buffers


def test_clusters_keep_their_parents(explorer):
    browser_sends(explorer.view, type="graph")
    compact = explorer.view.graph["autograd"]
    parent = {
        m: compact["modules"][p] if p >= 0 else None
        for m, p in zip(compact["modules"], compact["parents"], strict=True)
    }
    assert parent["features.conv"] == "features" and parent["features"] == "" and parent[""] is None


def test_record_again_after_a_python_run_with_record_graph(explorer, image):
    view = explorer.view
    browser_sends(view, type="graph")
    first = view.graph
    explorer.run(image[:1], record_graph=True)  # a new recording reaches the view without a click
    assert view.graph is not first
    assert view.graph["autograd"]["ids"] == first["autograd"]["ids"]
    explorer.graph(image)
    assert view.graph["autograd"]["ids"] == first["autograd"]["ids"]


class NoGradNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.fc(x)


def test_a_forward_under_no_grad_says_why_there_is_no_graph_and_the_kernel_stays_usable():
    ex = HookExplorer(NoGradNet(), example_inputs=torch.randn(1, 4))
    view = ex.view
    browser_sends(view, type="graph")
    assert view.graph["autograd"] is None and view.graph["dataflow"] is None
    assert view.graph["error"].startswith("no graph: no output tensor of NoGradNet has a grad_fn")
    assert view.status["state"] == "error"
    assert ex.run().shape == (1, 2)
    ex.close()


class FailsHalfway(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(5, 2)  # wrong in_features: the forward raises here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def test_a_failing_forward_shows_its_partial_graph_and_the_error():
    with pytest.warns(UserWarning, match="probe run"):  # the explorer's probe already tells
        ex = HookExplorer(FailsHalfway(), example_inputs=torch.randn(1, 4))
    view = ex.view
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the panel shows the failure; no warning lands in a log
        browser_sends(view, type="graph")
    nodes, _ = expand(view.graph["autograd"])
    assert {n["op"] for n in nodes} >= {"AddmmBackward0", "ReluBackward0"}
    assert all(n["module"] != "second" or n["op"] == "AccumulateGrad" for n in nodes)
    assert "RuntimeError" in view.graph["error"] and "cannot be multiplied" in view.graph["error"]
    assert view.status["state"] == "error" and "partial graph" in view.status["message"]
    ex.close()


def test_without_example_inputs_the_panel_says_what_to_do(cnn):
    ex = HookExplorer(cnn)
    view = ex.view
    browser_sends(view, type="graph")
    assert view.graph["autograd"] is None
    assert "needs example inputs" in view.graph["error"]
    assert view.status["state"] == "error"
    ex.close()


def test_selecting_a_node_and_attaching_its_hook_from_the_browser(explorer):
    view = explorer.view
    browser_sends(view, type="graph")
    node_id = next(i for i in view.graph["autograd"]["ids"] if "AddmmBackward0" in i)
    browser_sets(view, selected=node_id)
    assert view.selected == node_id and view.error == ""
    assert view.plots["path"] == node_id
    browser_sends(view, type="attach", path=node_id, kind="node")
    assert [(h["path"], h["kind"]) for h in view.hooks] == [(node_id, "node")]
    browser_sets(view, selected="features.conv")  # a module clicked in the graph
    assert view.plots["path"] == "features.conv" and view.error == ""


def _synthetic_graph(blocks: int) -> dict:
    """``ex.graph()``-shaped data: ``blocks`` Linear blocks of 4 nodes each, one saved tensor per matmul."""
    nodes, edges, clusters = [], [], [{"module": "", "parent": None, "nodes": []}]
    previous = None
    for b in range(blocks):
        module = f"blocks.{b}"
        ids = [f"{module}/AccumulateGrad#weight", f"{module}/AccumulateGrad#bias", f"{module}/TBackward0#0"]
        ids.append(f"{module}/AddmmBackward0#0")
        saved = [{"name": "mat1", "shape": [2, 8], "dtype": "float32", "bytes": 64, "alias": None}]
        nodes += [
            {"id": ids[0], "op": "AccumulateGrad", "module": module, "param": f"{module}.weight", "saved": []},
            {"id": ids[1], "op": "AccumulateGrad", "module": module, "param": f"{module}.bias", "saved": []},
            {"id": ids[2], "op": "TBackward0", "module": module, "param": None, "saved": []},
            {"id": ids[3], "op": "AddmmBackward0", "module": module, "param": None, "saved": saved},
        ]
        edges += [{"src": ids[3], "dst": ids[1], "input_nr": 0, "slot": 0, "shape": [8]}]
        edges += [{"src": ids[2], "dst": ids[0], "input_nr": 0, "slot": 0, "shape": [8, 8]}]
        if previous:
            edges += [{"src": ids[3], "dst": previous, "input_nr": 0, "slot": 1, "shape": [2, 8]}]
        clusters.append({"module": module, "parent": "blocks", "nodes": ids})
        previous = ids[3]
    clusters.insert(1, {"module": "blocks", "parent": "", "nodes": []})
    return {"nodes": nodes, "edges": edges, "clusters": clusters, "outputs": [previous]}


def test_a_20000_node_graph_travels_compact_with_saved_totals_only():
    data = _synthetic_graph(5000)
    assert len(data["nodes"]) == 20_000 > SAVED_DETAIL_LIMIT
    payload = graph_payload(data)
    compact = payload["autograd"]
    raw, sent = len(json.dumps(data)), len(json.dumps(compact))
    assert sent < raw / 2.5, (raw, sent)
    assert sent / len(data["nodes"]) < 100  # bytes per node, edges included: the ids themselves are most of it
    assert all(listed is None for *_, listed in compact["saved"])
    assert compact["saved"][0][:3] == [3, 64, 1]
    nodes, edges = expand(compact)
    assert [n["id"] for n in nodes] == [n["id"] for n in data["nodes"]]
    assert len(edges) == len(data["edges"])
    assert len(payload["dataflow"]["nodes"]) == 5000 + 1  # and "<output>"


def test_small_graphs_keep_the_saved_tensor_lists():
    compact = compact_autograd(_synthetic_graph(10))
    assert compact["saved"][0] == [3, 64, 1, [["mat1", [2, 8], "float32", 64, None]]]


def test_record_graph_detaches_a_backward_hook_an_in_place_op_broke_and_says_so_in_the_page(image):
    with backward_hook_an_in_place_op_breaks(image) as ex:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing is left for the kernel's log
            browser_sends(ex.view, type="graph")
        assert ex.view.status["state"] == "idle" and ex.view.graph["error"] == ""
        assert "/ReluBackward0#0" in ex.view.graph["autograd"]["ids"]
        assert ex.view.error.startswith("the full backward hook 'backward' on 'conv' collides with")
        assert ex.view.hooks == []
