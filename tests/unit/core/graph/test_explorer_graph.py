"""ex.graph() as the user sees it: plain data with no tensor, rooted at the outputs, the explorer's own
nodes hidden, nothing left behind, and the bad inputs said in words."""

from __future__ import annotations

import gc
import warnings
import weakref

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import LateInPlace, hook_state
from tests.unit.core.graph.test_record import global_state
from tests.unit.core.graph.test_scoping import ResidualCNN, TransformerBlock

PLAIN = (str, int, float, bool, type(None))


def non_plain(value: object, path: str = "graph") -> list[str]:
    """Paths of everything in ``value`` that is not a dict, list or plain scalar (iteratively)."""
    found, todo = [], [(value, path)]
    while todo:
        value, path = todo.pop()
        if isinstance(value, dict):
            todo.extend((v, f"{path}[{k!r}]") for k, v in value.items())
            found.extend(f"{path} key {k!r}" for k in value if not isinstance(k, str))
        elif isinstance(value, list):
            todo.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
        elif not isinstance(value, PLAIN):
            found.append(f"{path}: {type(value).__name__}")
    return found


def keep_relu_outputs(model: nn.Module) -> tuple[list, object]:
    """Weak references to every ReLU output: ReluBackward0 saves it, so it lives exactly as long as a graph."""
    refs: list[weakref.ref] = []
    handles = [
        m.register_forward_hook(lambda mod, args, out: refs.append(weakref.ref(out)))
        for m in model.modules()
        if isinstance(m, nn.ReLU)
    ]
    return refs, handles


@pytest.mark.parametrize("how", ["graph", "run"])
def test_graph_data_holds_no_tensor_and_the_activations_are_freed(how):
    torch.manual_seed(0)
    model, x = ResidualCNN(), torch.randn(2, 3, 8, 8)
    with Explorer(model, example_inputs=x) as ex:
        refs, handles = keep_relu_outputs(model)
        gc.disable()  # freed by reference counting: no cycle may hold the graph
        try:
            if how == "graph":
                graph = ex.graph()
            else:
                ex.run(x, record_graph=True)  # no backward: the saved tensors are still in the graph
                graph = ex.graph()
            assert len(refs) >= 3 and graph["nodes"]
            assert [r() for r in refs] == [None] * len(refs)  # no activation outlives the recording
        finally:
            gc.enable()
            for handle in handles:
                handle.remove()
    assert non_plain(graph) == []  # no tensor, no Size, no dtype, no node: only dicts, lists and scalars
    saved = [s for node in graph["nodes"] for s in node["saved"]]
    assert saved and all(isinstance(s["shape"], list) and isinstance(s["dtype"], str) for s in saved)


def test_recording_is_on_demand_and_leaves_no_hook_behind():
    model, x = ResidualCNN(), torch.randn(2, 3, 8, 8)
    before_globals, before_model = global_state(), hook_state(model)
    with Explorer(model, example_inputs=x) as ex:
        assert global_state() == before_globals  # plain forwards pay nothing: no recorder until asked
        ex.graph()
        ex.run(x, target=0, record_graph=True)
        assert global_state() == before_globals and hook_state(model) == before_model


def test_the_graph_is_rooted_at_the_outputs_not_at_the_backward_score():
    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(4, 6)
            self.cls, self.box = nn.Linear(6, 3), nn.Linear(6, 2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = torch.relu(self.body(x))
            return self.box(h), self.cls(h)

    model = TwoHeads()
    with Explorer(model, example_inputs=torch.randn(5, 4)) as ex:
        ex.run(torch.randn(5, 4), target=lambda out: out[1][:, 0].sum(), record_graph=True)
        graph = ex.graph()
    assert graph["outputs"] == ["box/AddmmBackward0#0", "cls/AddmmBackward0#0"]  # in output order
    ops = {n["op"] for n in graph["nodes"]}
    assert "SelectBackward0" not in ops and "SumBackward0" not in ops  # the score is outside the model
    # every node is reached from an output
    users: dict[str, list[str]] = {}
    for edge in graph["edges"]:
        users.setdefault(edge["src"], []).append(edge["dst"])
    reached, todo = set(), list(graph["outputs"])
    while todo:
        node = todo.pop()
        if node not in reached:
            reached.add(node)
            todo.extend(users.get(node, []))
    assert reached == {n["id"] for n in graph["nodes"]}


def test_the_explorers_own_backward_hooks_and_edits_are_hidden_from_the_graph():
    torch.manual_seed(0)
    model, x = ResidualCNN(), torch.randn(2, 3, 8, 8)
    with Explorer(model, example_inputs=x) as ex:
        plain = ex.graph()
        ex.attach("layer1.0", ["backward", "backward_pre"])
        ex.attach("fc", "backward")
        ex.attach("stem", "backward_pre")
        ex.attach("stem.2", "forward", edit=("scale", 2.0))
        ex.attach("layer1.1.conv1", "forward", edit=("clip", 0.1))
        ex.run(x, target=0, record_graph=True)
        hooked = ex.graph()
        assert all(h.fired for h in ex.hooks)
    assert "BackwardHookFunctionBackward" not in {n["op"] for n in hooked["nodes"]}
    assert [n["id"] for n in hooked["nodes"]] == [n["id"] for n in plain["nodes"]]
    edges = lambda g: sorted((e["src"], e["dst"], e["input_nr"]) for e in g["edges"])  # noqa: E731
    assert edges(hooked) == edges(plain)
    assert hooked["outputs"] == plain["outputs"] == ["fc/AddmmBackward0#0"]


def test_a_forward_that_raises_gives_the_partial_graph_with_the_error():
    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.head = nn.Linear(5, 2)  # wrong width: the forward fails here

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(torch.relu(self.fc(x)))

    model = Broken()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the probe run fails too, and says so
        ex = Explorer(model, example_inputs=torch.randn(2, 4))
    with ex:
        with pytest.warns(
            RuntimeWarning, match=r"the forward of Broken raised RuntimeError: mat1 and mat2 .* the 5 nodes"
        ):
            graph = ex.graph()
        assert graph["error"].startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
        assert [n["id"] for n in graph["nodes"]] == [
            "fc/AccumulateGrad#weight",
            "fc/TBackward0#0",
            "fc/AccumulateGrad#bias",
            "fc/AddmmBackward0#0",
            "/ReluBackward0#0",
        ]
        assert graph["outputs"] == ["/ReluBackward0#0"]  # rooted where the forward stopped
        assert non_plain(graph) == []
        assert ex.saved_memory() == {"": 2 * 4 * 4, "fc": 2 * 4 * 4}  # ReLU's result, and the input x


def test_a_backward_hook_an_in_place_op_breaks_is_explained_and_detached_and_the_whole_graph_recorded(image):
    model = LateInPlace()
    with Explorer(model, example_inputs=image) as ex:
        ex.attach("conv", "backward")
        model.inplace = True
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph = ex.graph()
        assert "error" not in graph and "/ReluBackward0#0" in [n["id"] for n in graph["nodes"]]
        assert [str(w.message)[:47] for w in caught] == ["the full backward hook 'backward' on 'conv' col"]
        assert ex.hooks == [] and ex.diagnostics == [str(caught[0].message)]
        assert not model.conv._backward_hooks and not model.conv._backward_pre_hooks
    assert hook_state(model) == hook_state(LateInPlace())


class Plain(nn.Module):
    def __init__(self, forward) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self._forward = forward

    def forward(self, x: torch.Tensor):
        return self._forward(self, x)


@pytest.mark.parametrize(
    ("forward", "message"),
    [
        (lambda m, x: {"score": 3}, r"the output of Plain holds no tensor \(got dict\)"),
        (lambda m, x: m.fc.weight, r"returned leaf tensors \(a parameter or an input, as is\)"),
        (lambda m, x: m.fc(x).argmax(-1), r"returned only int64 tensors \(argmax"),
        (lambda m, x: m.fc(x).detach(), r"detached its outputs .* or made them under torch.no_grad\(\) inside"),
        (lambda m, x: torch.no_grad()(m.fc)(x), r"detached its outputs"),
    ],
)
def test_a_run_without_a_graph_says_why(forward, message):
    with Explorer(Plain(forward), example_inputs=torch.randn(4, 3)) as ex:
        with pytest.raises(ValueError, match=message):
            ex.graph()
        assert ex.hooks == []


def test_nothing_requiring_grad_is_named_with_the_fix():
    model = Plain(lambda m, x: m.fc(x)).requires_grad_(False)
    with (
        Explorer(model, example_inputs=torch.randn(4, 3)) as ex,
        pytest.raises(ValueError, match="nothing in Plain's forward requires grad") as error,
    ):
        ex.graph()
    assert "model.requires_grad_()" in str(error.value)
    with Explorer(model, example_inputs=torch.randn(4, 3, requires_grad=True)) as ex:
        assert [n["id"] for n in ex.graph()["nodes"]] == ["/AccumulateGrad#leaf0", "fc/AddmmBackward0#0"]


def test_graph_records_under_a_no_grad_block_and_says_why_under_inference_mode():
    model, x = nn.Linear(3, 2), torch.randn(4, 3)
    with Explorer(model, example_inputs=x) as ex:
        with torch.no_grad():  # the explorer's own run enables grad, as ex.run does
            assert ex.graph()["outputs"] == ["/AddmmBackward0#0"]
        with torch.inference_mode(), pytest.raises(ValueError, match=r"torch.inference_mode\(\).*run it outside"):
            ex.graph(x)


def test_dataflow_of_the_explorer_on_a_transformer_block():
    torch.manual_seed(0)
    with Explorer(TransformerBlock(), example_inputs=torch.randn(2, 5, 8)) as ex:
        flow = ex.dataflow(depth=1)
    edges = {(e["src"], e["dst"]) for e in flow["edges"]}
    # the block's input goes to norm1 and to the root's residual add; attention's output joins it there
    assert ("norm1", "attn") in edges and ("attn", "") in edges and ("", "norm2") in edges
    assert ("norm2", "hand") in edges and ("hand", "") in edges and ("", "ff") in edges
    assert ("ff", "") in edges and ("", "<output>") in edges
    assert [n["module"] for n in flow["nodes"]][-1] == "<output>"
