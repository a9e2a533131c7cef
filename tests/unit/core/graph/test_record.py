"""The recorded graph as plain data: ids, saved tensors, scale, bad input, cleanup, dataflow."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn

from hookwidgets.core.graph.record import GraphRecorder, dataflow_graph, node_id, parse_node_id, record_graph
from tests.conftest import GLOBAL_DICTS
from tests.unit.core.graph.test_scoping import ResidualCNN


def global_state() -> dict:
    """Torch's global module hook dicts, ``nn.Module.__call__``, the function mode stack and saved-tensor hooks."""
    state = {name: list(getattr(module_globals, name, {}).items()) for name in GLOBAL_DICTS}  # torch 2.3 lacks one
    state["module_call"] = nn.Module.__call__  # a recorder wraps it while it follows forwards
    state["function_modes"] = torch._C._len_torch_function_stack()
    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)  # torch 2.3 lacks it
    state["saved_tensor_hooks"] = top(False) if top is not None else None
    return state


def deep_mlp(blocks: int, width: int = 4) -> nn.Sequential:
    """Linear+ReLU blocks with identity weights, so activations neither vanish nor turn denormal."""
    layers: list[nn.Module] = []
    for _ in range(blocks):
        linear = nn.Linear(width, width)
        nn.init.eye_(linear.weight)
        nn.init.zeros_(linear.bias)
        layers += [linear, nn.ReLU()]
    return nn.Sequential(*layers)


class Chain(nn.Module):
    """``steps`` times ``sin(x) * w``: two nodes per step, in the root's own forward."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.steps):
            x = torch.sin(x) * self.w
        return x


def test_node_id_format_and_parse():
    assert node_id("layer1.0", "AddBackward0", 0) == "layer1.0/AddBackward0#0"
    assert node_id("", "MulBackward0", 2) == "/MulBackward0#2"
    assert parse_node_id("layer1.0/AddBackward0#0") == ("layer1.0", "AddBackward0", "0")
    assert parse_node_id("fc/AccumulateGrad#weight") == ("fc", "AccumulateGrad", "weight")
    with pytest.raises(ValueError, match="no node id"):
        parse_node_id("layer1.0.conv1")


def test_data_has_the_design_shape_and_is_plain_json():
    data = record_graph(ResidualCNN(), torch.randn(2, 3, 8, 8)).data()
    assert set(data) == {"nodes", "edges", "clusters", "outputs"}
    node = next(n for n in data["nodes"] if n["id"] == "fc/AddmmBackward0#0")
    assert set(node) == {"id", "op", "module", "param", "saved"} and node["op"] == "AddmmBackward0"
    assert {"src", "dst", "input_nr"} <= set(data["edges"][0])
    edge = next(e for e in data["edges"] if e["src"] == "fc/AddmmBackward0#0" and e["dst"] == "/MulBackward0#0")
    assert edge["input_nr"] == 0 and edge["slot"] == 1 and edge["shape"] == [2, 8]
    assert data["outputs"] == ["fc/AddmmBackward0#0"]
    assert json.loads(json.dumps(data)) == data  # plain data, no tensors
    ids = {n["id"] for n in data["nodes"]}
    assert len(ids) == len(data["nodes"])
    assert all(e["src"] in ids and e["dst"] in ids for e in data["edges"])


def test_nodes_come_in_forward_order():
    ids = [n["id"] for n in record_graph(ResidualCNN(), torch.randn(2, 3, 8, 8)).data()["nodes"]]
    order = [
        "stem.0/ConvolutionBackward0#0",
        "layer1.0/AddBackward0#0",
        "layer1.1/AddBackward0#0",
        "pool/MeanBackward1#0",
    ]
    assert [ids.index(i) for i in order] == sorted(ids.index(i) for i in order)
    assert ids.index("fc/AccumulateGrad#weight") == ids.index("fc/TBackward0#0") - 1  # just before its user


def test_clusters_nest_module_scopes_with_their_own_nodes():
    clusters = {c["module"]: c for c in record_graph(ResidualCNN(), torch.randn(2, 3, 8, 8)).data()["clusters"]}
    assert clusters[""]["parent"] is None and clusters[""]["nodes"] == ["/ViewBackward0#0", "/MulBackward0#0"]
    assert clusters["layer1"] == {"module": "layer1", "parent": "", "nodes": []}  # only descendants own nodes
    assert clusters["layer1.0"]["parent"] == "layer1"
    assert set(clusters["layer1.0"]["nodes"]) == {"layer1.0/AddBackward0#0", "layer1.0/ReluBackward0#0"}
    assert clusters["layer1.0.act"]["parent"] == "layer1.0"
    assert list(clusters)[:3] == ["", "stem", "stem.0"]  # module registration order


def test_ids_are_stable_across_recordings_and_lead_to_live_nodes():
    model, x = ResidualCNN(), torch.randn(2, 3, 8, 8)
    first, second = record_graph(model, x), record_graph(model, x)
    assert set(first.node_ids.values()) == set(second.node_ids.values())
    assert [n["id"] for n in first.data()["nodes"]] == [n["id"] for n in second.data()["nodes"]]
    for node in second.data()["nodes"]:
        live = second.node(node["id"])
        assert live.name().removeprefix("torch::autograd::") == node["op"]
        assert second.node_ids[live] == node["id"]
    assert first.node("layer1.0/AddBackward0#0") is not second.node("layer1.0/AddBackward0#0")


def test_unknown_id_is_a_key_error_with_close_matches():
    recording = record_graph(ResidualCNN(), torch.randn(2, 3, 8, 8))
    with pytest.raises(KeyError, match="did you mean 'layer1.0/AddBackward0#0'"):
        recording.node("layer1.0/AddBackward0#5")


def test_accumulate_grad_nodes_stay_referenced_by_the_recording():
    import gc

    model = nn.Linear(3, 2)
    recording = record_graph(model, torch.randn(4, 3))
    acc = recording.node("/AccumulateGrad#weight")
    fired = []
    acc.register_prehook(lambda grads: fired.append(grads[0].shape))
    del acc
    recording.output = None  # only the recording holds the graph now
    gc.collect()
    model(torch.randn(4, 3)).sum().backward()  # torch reuses the parameter's node while it lives
    assert fired == [torch.Size([2, 3])]
    recording.release()
    gc.collect()
    model(torch.randn(4, 3)).sum().backward()  # released: the hooked node is gone, a new one takes its place
    assert fired == [torch.Size([2, 3])]


def test_saved_tensors_of_linear_relu_have_shapes_bytes_and_aliases():
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU())
    recording = record_graph(model, torch.randn(3, 5, requires_grad=True))  # so the weight is saved too
    saved = {n["id"]: n["saved"] for n in recording.data()["nodes"]}
    assert saved["0/AddmmBackward0#0"] == [
        {"name": "mat1", "shape": [3, 5], "dtype": "float32", "bytes": 60, "alias": None},
        {"name": "mat2", "shape": [5, 4], "dtype": "float32", "bytes": 80, "alias": "parameter 0.weight"},
    ]
    assert saved["1/ReluBackward0#0"] == [
        {"name": "result", "shape": [3, 4], "dtype": "float32", "bytes": 48, "alias": None}
    ]
    assert saved["0/TBackward0#0"] == [] and saved["0/AccumulateGrad#weight"] == []
    assert recording.saved_by_module == {"0": 60, "1": 48}  # the weight is a parameter, not activation memory
    sums: dict[str, int] = {}
    for node in recording.data()["nodes"]:
        own = sum(s["bytes"] for s in node["saved"] if s["alias"] is None)
        if own:
            sums[node["module"]] = sums.get(node["module"], 0) + own
    assert sums == recording.saved_by_module


def test_saved_memory_shared_with_an_earlier_node_is_counted_once():
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    recording = record_graph(model, torch.randn(3, 5))
    saved = {n["id"]: n["saved"] for n in recording.data()["nodes"]}
    mat1 = saved["2/AddmmBackward0#0"][0]
    assert mat1["name"] == "mat1" and mat1["alias"] == "1/ReluBackward0#0 result"
    assert recording.saved_by_module == {"0": 60, "1": 48}  # "2" saves only memory others own


def test_a_saved_tensor_on_a_parameters_memory_is_named_after_it_and_not_counted():
    class Detached(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.w = nn.Parameter(torch.randn(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * self.w.detach()  # no view of w: the same memory, without autograd's link to it

    recording = record_graph(Detached(), torch.randn(2, 3))
    saved = {n["id"]: n["saved"] for n in recording.data()["nodes"]}
    assert saved["/MulBackward0#0"] == [
        {"name": "other", "shape": [3], "dtype": "float32", "bytes": 12, "alias": "parameter w"}
    ]
    assert recording.saved_by_module == {"fc": 24}  # the input fc saved; w's memory is no activation


def test_saved_tensors_survive_a_backward_and_can_be_skipped():
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU())
    recording = record_graph(model, torch.randn(3, 5))
    recording.output.sum().backward()  # frees the saved tensors; what was read stays
    assert recording.saved_by_module == {"0": 60, "1": 48}
    bare = record_graph(model, torch.randn(3, 5), saved_tensors=False)
    assert bare.saved_by_module == {} and all(n["saved"] == [] for n in bare.data()["nodes"])


def test_release_keeps_the_data_and_drops_the_live_graph():
    recording = record_graph(ResidualCNN(), torch.randn(2, 3, 8, 8))
    data = recording.data()
    recording.release()
    assert recording.output is None and recording.node_ids == {}
    assert recording.data() == data
    with pytest.raises(KeyError, match="released"):
        recording.node("fc/AddmmBackward0#0")


def test_input_leaves_that_require_grad_are_nodes_without_a_parameter():
    x = torch.randn(2, 3, requires_grad=True)
    data = record_graph(nn.Linear(3, 2), x).data()
    leaf = next(n for n in data["nodes"] if n["id"] == "/AccumulateGrad#leaf0")
    assert leaf["param"] is None and leaf["module"] == ""


def test_history_of_the_inputs_from_before_the_forward_is_left_out():
    x = torch.randn(2, 3, requires_grad=True) * 2  # MulBackward0 made before the recording
    data = record_graph(nn.Sequential(nn.Linear(3, 2)), x).data()
    assert [n["op"] for n in data["nodes"]] == ["AccumulateGrad", "TBackward0", "AccumulateGrad", "AddmmBackward0"]
    assert [e["dst"] for e in data["edges"] if e["src"] == "0/AddmmBackward0#0"] == [
        "0/AccumulateGrad#bias",
        "0/TBackward0#0",
    ]


def test_a_2000_block_mlp_and_a_20000_node_graph_need_no_recursion():
    assert sys.getrecursionlimit() <= 3000  # far below the graphs' depth
    recording = record_graph(deep_mlp(2000), torch.randn(2, 4))
    data = recording.data()
    assert len(data["nodes"]) == 2000 * 5  # Addmm, T, ReLU and two AccumulateGrad per block
    assert data["outputs"] == ["3999/ReluBackward0#0"]
    chain = record_graph(Chain(10_000), torch.randn(3)).data()
    assert len(chain["nodes"]) == 20_000 and chain["nodes"][-1]["id"] == "/MulBackward0#9999"  # 1st sin: no grad


@pytest.mark.parametrize(
    ("context", "message"),
    [(torch.no_grad, "torch.no_grad"), (torch.inference_mode, "inference_mode")],
)
def test_no_graph_under_no_grad_or_inference_mode_says_why(context, message):
    before = global_state()
    with context(), pytest.raises(ValueError, match=message):
        record_graph(ResidualCNN(), torch.randn(2, 3, 8, 8))
    assert global_state() == before


def test_no_graph_when_nothing_requires_grad_or_outputs_are_leaves():
    frozen = nn.Linear(3, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="nothing in Linear's forward requires grad"):
        record_graph(frozen, torch.randn(2, 3))

    class ReturnsWeight(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w

    with pytest.raises(ValueError, match="leaf"):
        record_graph(ReturnsWeight(), torch.randn(2))


class FailsInLayer2(nn.Module):
    def __init__(self, error: type[BaseException] = RuntimeError) -> None:
        super().__init__()
        self.layer1 = nn.Linear(4, 4)
        self.layer2 = nn.Linear(5, 4)  # wrong width: the forward fails here
        self.error = error

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.layer1(x))
        if self.error is not RuntimeError:
            raise self.error("stop")
        return self.layer2(h)


def test_a_raising_forward_gives_the_partial_graph_and_the_error():
    user_hook = module_globals.register_module_forward_hook(lambda m, a, o: None)
    try:
        before = global_state()
        model = FailsInLayer2()
        model.train()
        recording = record_graph(model, torch.randn(2, 4))
        assert global_state() == before
    finally:
        user_hook.remove()
    assert recording.error is not None and recording.error.startswith("RuntimeError: mat1 and mat2 shapes")
    ids = {n["id"] for n in recording.data()["nodes"]}
    assert {"layer1/AddmmBackward0#0", "/ReluBackward0#0", "layer1/AccumulateGrad#weight"} <= ids
    assert recording.output is None and model.training


def test_a_keyboard_interrupt_propagates_and_leaves_everything_restored():
    before = global_state()
    model = FailsInLayer2(KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        record_graph(model, torch.randn(2, 4))
    assert global_state() == before
    recorder = GraphRecorder(model)
    with pytest.raises(KeyboardInterrupt), recorder:
        model(torch.randn(2, 4))
    assert global_state() == before
    partial = recorder.last
    assert partial is not None and partial.error == "KeyboardInterrupt: stop"
    assert "/ReluBackward0#0" in {n["id"] for n in partial.data()["nodes"]}


def test_recorder_restores_global_dicts_and_sees_only_its_model():
    before = global_state()
    model, other = ResidualCNN(), nn.Linear(3, 3)
    with GraphRecorder(model) as recorder:
        other(torch.randn(1, 3))  # a call of another model records nothing
        with pytest.raises(ValueError, match="not called"):
            recorder.result()
        model(torch.randn(2, 3, 8, 8))
    assert global_state() == before
    assert "fc/AddmmBackward0#0" in recorder.result().node_ids.values()


def test_dataflow_connects_the_blocks_in_order_with_the_skip_edges():
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    data = record_graph(ResidualCNN(), x).data()

    fine = {(e["src"], e["dst"]): e for e in dataflow_graph(data)["edges"]}
    assert ("stem.2", "layer1.0.conv1") in fine and ("stem.2", "layer1.0") in fine  # main path and skip
    assert ("layer1.0.bn2", "layer1.0") in fine and ("layer1.0", "layer1.1") in fine
    assert ("<input>", "stem.0") in fine and ("fc", "<output>") in fine
    assert fine[("stem.2", "layer1.0")]["shapes"] == [[2, 8, 8, 8]]

    blocks = dataflow_graph(data, depth=2)
    edges = {(e["src"], e["dst"]): e for e in blocks["edges"]}
    assert edges[("stem.2", "layer1.0")]["tensors"] == 1 and edges[("stem.2", "layer1.0")]["uses"] == 2
    assert edges[("layer1.0", "layer1.1")]["uses"] == 2  # the block's input goes to conv1 and to the add
    assert ("layer1.1", "pool") in edges and ("stem.2", "layer1.1") not in edges

    top = dataflow_graph(data, depth=1)
    assert [n["module"] for n in top["nodes"]] == ["<input>", "stem", "layer1", "pool", "", "fc", "<output>"]
    chain = [("<input>", "stem"), ("stem", "layer1"), ("layer1", "pool"), ("pool", ""), ("", "fc"), ("fc", "<output>")]
    assert sorted((e["src"], e["dst"]) for e in top["edges"]) == sorted(chain)


def test_a_dropped_recorder_frees_its_graph_at_once_and_stops_following_forwards():
    import gc
    import weakref

    model = deep_mlp(3)
    before = global_state()
    saved = []  # a ReLU output: ReluBackward0 saves it, so it lives exactly as long as the graph
    handle = model[1].register_forward_hook(lambda m, a, out: saved.append(weakref.ref(out)))
    gc.disable()  # freed by reference counting alone: no cycle may keep the graph alive
    try:
        recorder = GraphRecorder(model)
        recorder.start()
        try:
            output = model(torch.randn(2, 4, requires_grad=True))
            assert len(recorder.result()) > 0
            del output
            assert saved[0]() is not None  # the recorder's result holds the graph
        finally:
            del recorder
        assert saved[0]() is None
        assert global_state() == before
    finally:
        gc.enable()
        handle.remove()


@dataclass
class Scores:
    logits: torch.Tensor
    label: str = "scores"


class ScoresNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> Scores:
        return Scores(self.fc(x).relu())


def test_a_dataclass_output_has_the_graph_of_its_tensors():
    recording = record_graph(ScoresNet(), torch.randn(2, 4))
    data = recording.data()
    ops = [n["op"] for n in data["nodes"] if n["op"] != "AccumulateGrad"]
    assert ops == ["TBackward0", "AddmmBackward0", "ReluBackward0"]
    assert data["outputs"] == [n["id"] for n in data["nodes"] if n["op"] == "ReluBackward0"]
    with pytest.raises(ValueError, match="nothing in ScoresNet's forward requires grad"):
        record_graph(ScoresNet().requires_grad_(False), torch.randn(2, 4))
