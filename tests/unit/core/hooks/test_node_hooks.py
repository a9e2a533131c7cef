"""Autograd node hooks by id: values against hand-written hooks, persistence, missing ids, cleanup."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import hook_state
from tests.unit.core.graph.test_record import global_state
from tests.unit.core.graph.test_scoping import ResidualCNN


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_a_node_pre_hook_from_the_graph_fires_in_each_later_backward_with_its_values():
    torch.manual_seed(0)
    model = ResidualCNN()
    expected = []
    # the residual add passes its gradient unchanged to bn2's output: a hand-written reference
    with Explorer(model, example_inputs=torch.randn(2, 3, 8, 8)) as ex:
        node = "layer1.0/AddBackward0#0"
        assert node in {n["id"] for n in ex.graph()["nodes"]}
        ex.attach(node, "node_pre")

        def keep_grad(module, args, out):
            out.register_hook(expected.append)

        reference = model.layer1[0].bn2.register_forward_hook(keep_grad)
        for _ in range(3):  # the user's own loop, not an explorer run
            model(torch.randn(2, 3, 8, 8)).pow(2).sum().backward()
        records = ex.captures[node]["node_pre"]
        assert [r.step for r in records] == [1, 2, 3]
        for record, grad in zip(records, expected, strict=True):
            assert list(record.tensors) == ["grad_output.0"]
            assert torch.equal(record.tensor, grad)
        assert not torch.equal(records[0].tensor, records[1].tensor)
    reference.remove()


@pytest.mark.parametrize("kind", ["node_pre", "node"])
def test_a_backward_through_two_forwards_names_each_node_firing_by_its_own_step_and_call(kind):
    model = mlp()
    x1, x2 = torch.randn(5, 4), torch.randn(5, 4)
    node = "2/AddmmBackward0#0"
    with Explorer(model, example_inputs=x1) as ex:
        ex.attach(node, kind)
        out1, out2 = model(x1), model(x2)  # steps 1 and 2
        (out1.pow(2).sum() + out2.sum()).backward()  # one backward through both graphs
        records = ex.captures[node][kind]
        assert sorted((r.step, r.call) for r in records) == [(1, 0), (2, 0)]
        grads = {1: 2 * out1.detach(), 2: torch.ones_like(out2)}  # the loss's gradient at each output
        for record in records:
            torch.testing.assert_close(record.tensors["grad_output.0"], grads[record.step])
        assert [(e.step, e.call) for e in ex.timeline] == [(r.step, r.call) for r in records]


def test_a_node_hook_sees_grad_inputs_as_a_hand_written_node_hook_does():
    model = mlp()
    x = torch.randn(5, 4)
    seen = []
    with Explorer(model, example_inputs=x) as ex:
        ex.attach("2/AddmmBackward0#0", "node")
        out = model(x)
        out.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append((grad_inputs, grad_outputs)))
        out.pow(2).sum().backward()
        record = ex.captures["2/AddmmBackward0#0"]["node"][-1]
    grad_inputs, grad_outputs = seen[0]
    assert torch.equal(record.tensor, grad_outputs[0])  # the output side comes first
    names = [f"grad_input.{i}" for i, g in enumerate(grad_inputs) if g is not None]
    assert [n for n in record.tensors if n.startswith("grad_input")] == names
    for name in names:
        assert torch.equal(record.tensors[name], grad_inputs[int(name.rpartition(".")[2])])


def test_an_accumulate_grad_hook_stays_placed_and_each_firing_belongs_to_its_step():
    model = mlp()
    x = torch.randn(5, 4)
    with Explorer(model, example_inputs=x) as ex:
        ex.attach("2/AccumulateGrad#weight", "node_pre")
        grads = []
        for scale in (1.0, 2.0, 3.0):
            model.zero_grad(set_to_none=True)
            model(x * scale).sum().backward()
            grads.append(model[2].weight.grad.clone())
        records = ex.captures["2/AccumulateGrad#weight"]["node_pre"]
        assert [r.step for r in records] == [1, 2, 3]
        for record, grad in zip(records, grads, strict=True):
            assert torch.allclose(record.tensor, grad)


def test_a_hooked_accumulate_grad_node_is_kept_so_every_gradient_into_its_parameter_is_seen():
    # torch holds a parameter's AccumulateGrad node only weakly: were the explorer to drop the
    # node it hooked, a graph made outside the model's forward (a weight penalty) would get a new one
    import gc

    model = mlp()
    x = torch.randn(5, 4)
    with Explorer(model, example_inputs=x) as ex:
        ex.attach("2/AccumulateGrad#weight", "node_pre")
        model(x).sum().backward()
        gc.collect()
        model.zero_grad(set_to_none=True)
        (model[2].weight ** 2).sum().backward()  # outside any forward of the model
        records = ex.captures["2/AccumulateGrad#weight"]["node_pre"]
        assert len(records) == 2
        assert torch.allclose(records[1].tensor, 2 * model[2].weight.detach())
        assert torch.equal(records[1].tensor, model[2].weight.grad)


def test_edits_and_user_callables_on_node_hooks_change_the_gradient_as_torch_would():
    model = mlp()
    x = torch.randn(5, 4)
    model(x).sum().backward()
    plain = model[0].weight.grad.clone()
    model.zero_grad(set_to_none=True)
    with Explorer(model, example_inputs=x) as ex:
        ex.attach("1/ReluBackward0#0", "node_pre", edit=("scale", 3.0))
        model(x).sum().backward()
        assert torch.allclose(model[0].weight.grad, 3 * plain)
        model.zero_grad(set_to_none=True)

        def halve(grad_inputs, grad_outputs):
            return tuple(None if g is None else g / 2 for g in grad_inputs)

        ex.detach("1/ReluBackward0#0")
        ex.attach("1/ReluBackward0#0", "node", action=halve)
        model(x).sum().backward()
        assert torch.allclose(model[0].weight.grad, plain / 2)
        with pytest.raises(TypeError, match=r"hook\(grad_inputs, grad_outputs\)"):
            ex.attach("1/ReluBackward0#0", "node", action=lambda g: g)


class Branchy(nn.Module):
    """Two paths picked by ``use_tanh``: a node of one path is missing from the other's graph."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.use_tanh = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return torch.tanh(y) if self.use_tanh else torch.sigmoid(y)


def test_an_id_missing_from_a_forward_is_said_on_the_hook_and_placed_again_when_back():
    model = Branchy()
    x = torch.randn(3, 4)
    with Explorer(model, example_inputs=x) as ex:
        info = ex.attach("/TanhBackward0#0", "node_pre")
        model(x).sum().backward()
        assert info.fired == 1 and info.note is None
        model.use_tanh = False
        model(x).sum().backward()
        assert info.fired == 1
        assert "not placed in step 2" in info.note and "'/TanhBackward0#0'" in info.note
        assert "'/SigmoidBackward0#0'" in info.note  # the closest id now
        assert "not placed" in repr(ex.hooks[0])
        model.use_tanh = True
        model(x).sum().backward()
        assert info.fired == 2 and info.note is None


def test_bad_node_targets_and_kinds_name_the_fix():
    model = mlp()
    with Explorer(model, example_inputs=torch.randn(2, 4)) as ex:
        with pytest.raises(KeyError, match=r"did you mean '2/AddmmBackward0#0'"):
            ex.attach("2/AddmmBackward0#3", "node")
        with pytest.raises(ValueError, match=r"valid kinds there: node_pre, node"):
            ex.attach("2/AddmmBackward0#0", "forward")
        with pytest.raises(ValueError, match=r"autograd node ids from ex.graph\(\)"):
            ex.attach("2", "node_pre")
        with pytest.raises(KeyError, match=r"autograd node ids from ex.graph\(\)"):
            ex.attach("nothing.here", "forward")
        assert ex.hooks == []


def test_without_example_inputs_a_node_id_is_taken_and_checked_at_each_forward():
    model = mlp()
    with Explorer(model) as ex:
        info = ex.attach("2/AddmmBackward0#7", "node_pre")
        model(torch.randn(2, 4)).sum().backward()
        assert info.fired == 0 and "'2/AddmmBackward0#0'" in info.note


def test_module_and_node_hooks_share_one_timeline_in_execution_order():
    model = mlp()
    x = torch.randn(2, 4)
    with Explorer(model, example_inputs=x) as ex:
        ex.attach("0/AddmmBackward0#0", "node")
        ex.attach("1", "grad")
        ex.attach("2/AddmmBackward0#0", "node_pre")
        ex.attach("2", "forward")
        model(x).sum().backward()
        assert [(e.phase, e.path, e.kind) for e in ex.timeline] == [
            ("forward", "2", "forward"),
            ("backward", "2/AddmmBackward0#0", "node_pre"),
            ("backward", "1", "grad"),
            ("backward", "0/AddmmBackward0#0", "node"),
        ]
        assert {e.step for e in ex.timeline} == {1}


def test_close_removes_the_recorder_and_the_placed_hooks_and_lists_no_foreign_hook():
    model = mlp()
    x = torch.randn(2, 4)
    before_globals, before_model = global_state(), hook_state(model)
    ex = Explorer(model, example_inputs=x)
    info = ex.attach("2/AddmmBackward0#0", "node_pre")
    assert global_state() != before_globals  # the recorder follows forwards while node hooks exist
    assert [h.foreign for h in ex.hooks] == [False]
    out = model(x)  # a graph with the hook placed on it, then the explorer closes
    ex.close()
    assert global_state() == before_globals and hook_state(model) == before_model
    out.sum().backward()
    assert info.fired == 0


def test_detaching_the_last_node_hook_stops_following_forwards():
    model = mlp()
    before = global_state()
    with Explorer(model, example_inputs=torch.randn(2, 4)) as ex:
        ex.attach("2/AddmmBackward0#0", "node_pre")
        ex.attach("0/AddmmBackward0#0", "node")
        ex.detach("2/AddmmBackward0#0")
        assert global_state() != before
        ex.detach("0/AddmmBackward0#0", "node")
        assert global_state() == before


def test_run_record_graph_keeps_that_graph_and_saved_memory_per_module():
    model = mlp()
    x = torch.randn(2, 4)
    calls = []
    model.register_forward_pre_hook(lambda m, a: calls.append(1))
    with Explorer(model, example_inputs=torch.randn(7, 4)) as ex:
        calls.clear()
        ex.run(x, target=0, record_graph=True)
        graph = ex.graph()
        assert len(calls) == 1  # graph() returned the recorded run: no second forward
        assert graph["outputs"] == ["2/AddmmBackward0#0"]
        assert ex.saved_memory() == {"1": 2 * 8 * 4, "0": 2 * 4 * 4}  # ReLU's result, the input x
        assert ex.dataflow()["edges"][0] == {"src": "0", "dst": "1", "tensors": 1, "uses": 1, "shapes": [[2, 8]]}
        assert model[0].weight.grad is None  # the explorer's run left the model as found


class Fails(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.fc(x))
        raise RuntimeError("boom after relu")
        return y


def test_a_failing_recorded_run_keeps_the_partial_graph_with_its_error():
    with Explorer(Fails()) as ex:
        with pytest.raises(RuntimeError, match="boom after relu"):
            ex.run(torch.randn(2, 4), record_graph=True)
        graph = ex.graph()
        assert graph["error"] == "RuntimeError: boom after relu"
        assert [n["op"] for n in graph["nodes"]][-1] == "ReluBackward0"


def test_graph_without_a_graph_says_why():
    model = mlp().requires_grad_(False)
    with Explorer(model, example_inputs=torch.randn(2, 4)) as ex, pytest.raises(ValueError, match="requires grad"):
        ex.graph()


def test_edits_add_no_nodes_to_the_graph_so_ids_stay_the_same():
    model = mlp()
    x = torch.randn(2, 4)
    with Explorer(model, example_inputs=x) as ex:
        plain = [n["id"] for n in ex.graph()["nodes"]]
        ex.attach("0", "forward", edit=("scale", 2.0))
        ex.attach("1", "forward", edit=("scale", 0.5))
        ex.run(x, record_graph=True)
        assert [n["id"] for n in ex.graph()["nodes"]] == plain
        info = ex.attach("2/AddmmBackward0#0", "node_pre")
        model(x).sum().backward()
        assert info.fired == 1


def test_node_hooks_follow_forwards_run_on_another_thread_than_the_attach():
    import threading

    model = mlp()
    x = torch.randn(2, 4)
    with Explorer(model, example_inputs=x) as ex:
        info = ex.attach("2/AddmmBackward0#0", "node_pre")

        def step() -> None:  # a kernel may handle the Run message on a thread of its own
            model(x).sum().backward()

        for _ in range(2):
            worker = threading.Thread(target=step)
            worker.start()
            worker.join()
        assert info.fired == 2
