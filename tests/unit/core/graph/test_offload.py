"""Explorers on offloaded models (accelerate's ``cpu_offload`` and ``dispatch_model`` with weights on disk): the graph
names each weight the offload hook swaps in after its parameter, so node hooks reach its gradient, and gradient hooks
on the placeholders a module holds between calls say why they cannot fire."""

from __future__ import annotations

import pytest
import torch

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import hook_state

accelerate = pytest.importorskip("accelerate", reason="accelerate is a test dependency (make test installs it)")

IDS = tm.token_ids(1, 6)
WEIGHT = "transformer.h.0.mlp.c_fc.weight"
NODE = "transformer.h.0.mlp.c_fc/AccumulateGrad#weight"


def on_disk(folder) -> torch.nn.Module:
    """GPT-2 with its first block offloaded to ``folder`` (its weights meta between calls), the rest on the CPU."""
    model = tm.gpt2()
    placed = {"transformer.wte": "cpu", "transformer.wpe": "cpu", "transformer.drop": "cpu", "transformer.h.0": "disk"}
    placed.update({"transformer.h.1": "cpu", "transformer.ln_f": "cpu", "lm_head": "cpu"})
    return accelerate.dispatch_model(model, placed, offload_dir=str(folder))


def offloaded() -> torch.nn.Module:
    """GPT-2 under ``cpu_offload``: every weight is meta between calls."""
    model = tm.gpt2()
    accelerate.cpu_offload(model, execution_device="cpu")
    return model


def plain(graph: dict) -> tuple:
    nodes = [(n["id"], n["op"], n["module"], n["param"], [(s["name"], s["alias"]) for s in n["saved"]]) for n in graph]
    return nodes


def test_the_graph_of_a_disk_offloaded_model_is_that_of_the_model_with_its_weights(tmp_path):
    with Explorer(tm.gpt2(), example_inputs=IDS) as ex:
        expected, memory = ex.graph(), ex.saved_memory()
    model = on_disk(tmp_path)
    found = hook_state(model)
    with Explorer(model, example_inputs=IDS) as ex:
        graph = ex.graph()
        assert plain(graph["nodes"]) == plain(expected["nodes"])  # ids, scopes, parameters, saved-tensor aliases
        assert [(e["src"], e["dst"]) for e in graph["edges"]] == [(e["src"], e["dst"]) for e in expected["edges"]]
        assert ex.saved_memory() == memory  # the weights swapped in are parameters, not activation memory
    assert hook_state(model) == found


def test_a_node_hook_on_a_weight_an_offload_hook_swaps_in_gets_its_gradient():
    reference = tm.gpt2()
    reference(IDS).logits[:, -1].max(-1).values.sum().backward()
    model = offloaded()
    with Explorer(model, example_inputs=IDS) as ex:
        assert not [n["id"] for n in ex.graph()["nodes"] if "#leaf" in n["id"]]
        hook = ex.attach(NODE, "node")
        ex.run(target="top")
        ex.run(target="top")  # placed again on the next forward's node, which holds the next weight swapped in
        assert hook.fired == 2 and hook.note is None
        for record in ex.captures[NODE]["node"]:
            torch.testing.assert_close(record.tensors["grad_output.0"], reference.get_parameter(WEIGHT).grad)
    assert all(p.is_meta and p.grad is None for p in model.parameters())  # placeholders, as found


@pytest.mark.parametrize("example", [True, False])
def test_gradient_hooks_on_an_offloaded_placeholder_say_why_they_never_fire(example):
    model = offloaded()
    with Explorer(model, example_inputs=IDS if example else None) as ex:
        hooks = ex.attach(WEIGHT, ["grad", "post_accumulate"])
        ex.run(IDS, target="top")
        for info in hooks:
            assert info.fired == 0
            assert f"attach kind 'node' to '{NODE}'" in info.note
            if example:  # seen in the example forward: the module computed with another tensor
                assert "placeholder on the meta device between calls: in the example forward its module " in info.note
            else:
                assert "is on the meta device, which holds no values" in info.note
