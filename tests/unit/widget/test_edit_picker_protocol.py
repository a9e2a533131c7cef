"""The inspector's edit picker: what the selection offers it (output axes, heads, recorded outputs) and the edits it
sends (ablate along a dim, ablate heads, replace and mean-ablate from a recorded run), checked against the same edits
written by hand."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from hookwidgets import HookExplorer
from hookwidgets.widget import protocol
from tests import transformer_models as tm

from ._messages import browser_sends, browser_sets
from ._shapes import problems

BLOCK = "transformer.h.0"


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(ids).logits.detach()


def _patched(model: torch.nn.Module, ids: torch.Tensor, target: str, hook) -> torch.Tensor:
    """The logits of ``model`` on ``ids`` with ``hook`` as a forward hook on ``target``, written by hand."""
    handle = model.get_submodule(target).register_forward_hook(hook)
    try:
        return _logits(model, ids)
    finally:
        handle.remove()


def _with_first(out, tensor: torch.Tensor):
    """A block's output with its hidden states (the output, or its first element) replaced by ``tensor``."""
    return tensor if isinstance(out, torch.Tensor) else (tensor, *out[1:])


@pytest.fixture
def gpt2():
    model, ids = tm.gpt2(), tm.token_ids(batch=2)
    ex = HookExplorer(model, example_inputs=ids)
    yield ex, model, ids
    ex.close()


def test_the_selection_offers_heads_on_gpt2s_and_berts_attention_and_not_on_an_mlp_or_a_conv(gpt2, explorer):
    ex, _, _ = gpt2
    view = ex.view
    for target, heads in [("transformer.h.0.attn", 4), ("transformer.h.0.mlp", None), (BLOCK, None)]:
        browser_sets(view, selected=target)
        assert view.selection["heads"] == heads, target
        assert problems(view.selection, protocol.Selection) == []
    with HookExplorer(tm.bert(heads=2), example_inputs=tm.token_ids()) as bert:
        for target, heads in [
            ("bert.encoder.layer.0.attention", 2),  # projected by its child output.dense
            ("bert.encoder.layer.0.attention.self", 2),  # by its sibling output.dense
            ("bert.encoder.layer.0.intermediate", None),
        ]:
            browser_sets(bert.view, selected=target)
            assert bert.view.selection["heads"] == heads, target
    browser_sets(explorer.view, selected="features.conv")  # the CNN's conv
    assert explorer.view.selection["heads"] is None
    browser_sets(explorer.view, selected="head.fc.weight")  # a parameter: no edit offers at all
    assert {k: explorer.view.selection[k] for k in ("axes", "heads", "records")} == {
        "axes": None,
        "heads": None,
        "records": [],
    }


def test_the_selection_names_the_output_axes_for_ablates_dim(gpt2, explorer, cnn):
    ex, _, _ = gpt2
    browser_sets(ex.view, selected=BLOCK)
    assert ex.view.selection["axes"] == ["batch", "tokens", "features"]
    browser_sets(explorer.view, selected="features.conv")
    assert explorer.view.selection["axes"] == ["batch", "channels", "height", "width"]
    browser_sets(explorer.view, selected="head.fc")
    assert explorer.view.selection["axes"] == ["batch", "features"]
    with HookExplorer(cnn) as blind:  # no example inputs: no output shape known
        browser_sets(blind.view, selected="features.conv")
        assert blind.view.selection["axes"] is None


def test_the_selection_lists_the_modules_forward_records_newest_first(gpt2):
    ex, _, _ = gpt2
    view = ex.view
    browser_sets(view, selected=BLOCK)
    assert view.selection["records"] == []
    browser_sends(view, type="attach", path=BLOCK, kind="forward")
    browser_sends(view, type="run", mode="forward")
    browser_sends(view, type="run", mode="forward")
    assert view.selection["records"] == [
        {"step": 2, "call": 0, "shape": [2, 8, 32]},
        {"step": 1, "call": 0, "shape": [2, 8, 32]},
    ]
    assert problems(view.selection, protocol.Selection) == []
    browser_sends(view, type="attach", path=BLOCK, kind="forward", action="stats")  # no tensors: nothing to patch
    browser_sends(view, type="run", mode="forward")
    assert [r["step"] for r in view.selection["records"]] == [2, 1]
    browser_sets(view, selected="transformer.h.1")
    assert view.selection["records"] == []


def test_replace_with_a_recorded_run_patches_that_output_in(gpt2):
    ex, model, ids = gpt2
    view = ex.view
    other = tm.token_ids(batch=2, seed=5)
    ex.attach(BLOCK, "forward")
    ex.run(other)  # step 1: the block's output on other tokens
    recorded = ex.captures[BLOCK]["forward"][-1].tensor.clone()
    ex.detach(BLOCK, "forward")
    browser_sets(view, selected=BLOCK)
    reply = browser_sends(view, type="attach", path=BLOCK, kind="forward", edit=["replace", {"step": 1, "call": 0}])
    assert reply["ok"], reply
    assert view.hooks[0]["edit"] == [["replace", "tensor (2, 8, 32)"]]
    got = _logits(model, ids)
    expected = _patched(_bare(model), ids, BLOCK, lambda m, a, out: _with_first(out, recorded))
    assert torch.allclose(got, expected, atol=1e-6) and not torch.allclose(got, _logits(_bare(model), ids))


def test_mean_ablate_with_a_recorded_run_puts_in_its_batch_mean(gpt2):
    ex, model, ids = gpt2
    ex.attach(BLOCK, "forward")
    ex.run(tm.token_ids(batch=2, seed=5))
    mean = ex.captures[BLOCK]["forward"][-1].tensor.mean(0, keepdim=True).clone()
    ex.detach(BLOCK, "forward")
    reply = browser_sends(
        ex.view, type="attach", path=BLOCK, kind="forward", edit=["mean_ablate", {"step": 1, "call": 0}]
    )
    assert reply["ok"], reply
    expected = _patched(_bare(model), ids, BLOCK, lambda m, a, out: _with_first(out, mean.expand(2, -1, -1)))
    assert torch.allclose(_logits(model, ids), expected, atol=1e-6)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"step": 7, "call": 0}, "no forward capture of step 7 (call 0) of this module is kept: it was never captured"),
        ({"step": 1, "call": 3}, "no forward capture of step 1 (call 3)"),
        ({"step": -1, "call": 0}, "expected its step and call, such as"),
        ({"call": 0}, "expected its step and call"),
        ({"step": True, "call": 0}, "expected its step and call"),
        (3, "the widget sent 3 as the recorded run of 'replace'"),
    ],
)
def test_a_recorded_run_that_is_not_kept_or_not_a_reference_is_refused_naming_the_target(gpt2, ref, message):
    ex, _, _ = gpt2
    ex.attach(BLOCK, "forward")
    ex.run()
    ex.detach(BLOCK, "forward")
    reply = browser_sends(ex.view, type="attach", path=BLOCK, kind="forward", edit=["replace", ref])
    assert not reply["ok"] and message in reply["error"]
    assert message in ex.view.error and ex.view.status["state"] == "error"
    assert ex.hooks == []
    if message.startswith("no forward capture"):
        assert "'transformer.h.0'" in reply["error"] and reply["error"].endswith(
            "capture this module's forward, Run, then pick the run"
        )


def test_a_recorded_run_the_budget_evicted_says_so(cnn, image):
    with HookExplorer(cnn.eval(), example_inputs=image, memory_budget=1) as ex:
        ex.attach("head.fc", "forward")
        ex.run()
        ex.run()  # the budget keeps only the newest record: step 1's went
        assert [r.step for r in ex.captures["head.fc"]["forward"]] == [2]
        reply = browser_sends(
            ex.view, type="attach", path="head.fc", kind="forward", edit=["mean_ablate", {"step": 1, "call": 0}]
        )
        assert "mean_ablate on 'head.fc': no forward capture of step 1 (call 0)" in reply["error"]
        assert "the capture store evicted it" in reply["error"] and "memory_budget=1 bytes" in reply["error"]


def test_a_record_of_another_shape_is_refused_at_attach_with_both_shapes(gpt2):
    ex, _, _ = gpt2
    ex.attach(BLOCK, "forward")
    ex.run(tm.token_ids(batch=1, length=5))
    ex.detach(BLOCK, "forward")
    reply = browser_sends(ex.view, type="attach", path=BLOCK, kind="forward", edit=["replace", {"step": 1, "call": 0}])
    assert not reply["ok"]
    assert "has shape (1, 5, 32), the hooked tensor (2, 8, 32)" in reply["error"] and ex.hooks == []


def test_ablate_along_a_dim_from_the_picker(gpt2):
    ex, model, ids = gpt2
    reply = browser_sends(ex.view, type="attach", path=BLOCK, kind="forward", edit=["ablate", [1, 4], -1])
    assert reply["ok"] and _sent(ex.view.hooks[0]["edit"]) == [["ablate", [1, 4], -1]]

    def by_hand(m, a, out):
        hidden = (out if isinstance(out, torch.Tensor) else out[0]).clone()
        hidden[..., [1, 4]] = 0
        return _with_first(out, hidden)

    assert torch.allclose(_logits(model, ids), _patched(_bare(model), ids, BLOCK, by_hand), atol=1e-6)
    reply = browser_sends(ex.view, type="attach", path=BLOCK, kind="forward", edit=["ablate", [0], 3])
    assert "ablate dim 3 is out of range for a tensor of shape (2, 8, 32)" in reply["error"]
    reply = browser_sends(ex.view, type="attach", path=BLOCK, kind="forward", edit=["ablate", [8], 1])
    assert "ablate index 8 is out of range: the tensor has 8 indices along dim 1" in reply["error"]


def _sent(value):
    """``value`` as the page receives it (JSON: tuples become lists)."""
    return json.loads(json.dumps(value))


def _bare(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` without the explorer's hooks."""
    twin = copy.deepcopy(model)
    for module in twin.modules():
        module._forward_hooks.clear()
        module._forward_pre_hooks.clear()
    return twin


def test_ablate_heads_from_the_picker_zeroes_their_context_before_c_proj(gpt2):
    ex, model, ids = gpt2
    attn = "transformer.h.1.attn"
    reply = browser_sends(ex.view, type="attach", path=attn, kind="forward", edit=["ablate_heads", [0, 2]])
    assert reply["ok"] and _sent(ex.view.hooks[0]["edit"]) == [["ablate_heads", [0, 2]]]
    twin = _bare(model)

    def zero_heads(m, args):
        context = args[0].clone()
        context[..., 0:8] = 0  # 4 heads of 8 features
        context[..., 16:24] = 0
        return (context,)

    twin.get_submodule(f"{attn}.c_proj").register_forward_pre_hook(zero_heads)
    assert torch.allclose(_logits(model, ids), _logits(twin, ids), atol=1e-6)
    reply = browser_sends(ex.view, type="attach", path=attn, kind="forward", edit=["ablate_heads", [4]])
    assert "head 4 is out of range, it has 4" in reply["error"]
    reply = browser_sends(ex.view, type="attach", path=BLOCK, kind="forward", edit=["ablate_heads", [0]])
    assert "on module 'transformer.h.0' (GPT2Block): no output projection found" in reply["error"]


def test_the_code_of_a_replace_from_the_picker_runs_with_the_record_bound_to_patches(gpt2):
    ex, model, ids = gpt2
    ex.attach(BLOCK, "forward")
    ex.run(tm.token_ids(batch=2, seed=5))
    record = ex.captures[BLOCK]["forward"][-1]
    ex.detach(BLOCK, "forward")
    browser_sets(ex.view, selected=BLOCK)
    browser_sends(ex.view, type="attach", path=BLOCK, kind="forward", edit=["replace", {"step": 1, "call": 0}])
    code = ex.view.selection["code"]
    assert "patches[0]" in code and "Their shapes: (2, 8, 32)." in code
    patched = _logits(model, ids)
    twin = _bare(model)
    namespace = {"torch": torch, "model": twin, "patches": [record.tensor]}
    exec(compile(code, "<selection code>", "exec"), namespace)
    assert torch.allclose(_logits(twin, ids), patched, atol=1e-6)
