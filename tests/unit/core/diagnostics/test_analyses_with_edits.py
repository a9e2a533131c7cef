"""The analyses (logit lens, attention, patching, attributions) run the model the user studies: with the attached
edits, each applied and nothing recorded, or, with ``edits=False``, the unedited model; each result says which."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer, HookFailedWarning
from tests import transformer_models as tm
from tests.conftest import hook_state
from tests.unit.core.diagnostics.test_lens import reference_lens

IDS = tm.token_ids(batch=2, length=7)
HEADS = [1, 3]  # of 4 heads of 8 features (width 32)


def zero_heads(model: nn.Module, layer: int, heads: list[int]) -> torch.utils.hooks.RemovableHandle:
    """A plain torch hook zeroing ``heads``' slices of the context going into layer ``layer``'s c_proj."""
    mask = torch.ones(32)
    for h in heads:
        mask[h * 8 : (h + 1) * 8] = 0
    projection = model.transformer.h[layer].attn.c_proj
    return projection.register_forward_pre_hook(lambda m, args: (args[0] * mask,))


def hand_lens(model: nn.Module, heads: list[int] | None = None):
    handle = zero_heads(model, 0, heads) if heads else None
    try:
        return reference_lens(model, model.transformer.h, model.transformer.ln_f, IDS, 4)
    finally:
        if handle is not None:
            handle.remove()


def test_the_lens_honours_ablate_heads_and_records_nothing() -> None:
    model = tm.gpt2(layers=2)
    top, probs, _ = hand_lens(model, HEADS)  # before the explorer's hooks, which the user's own forwards run
    _, unedited, _ = hand_lens(model)
    assert not torch.allclose(probs, unedited, rtol=0, atol=1e-5)  # the ablation changes the lens
    ex = Explorer(model, IDS)
    ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", HEADS))
    ex.attach("transformer.h.1", "forward")  # a capture: silent in the lens's run
    ex.attach("transformer.h.1.mlp", "forward", edit=("scale", 1.0), action="stats")  # an edit's own action: silent
    hooks, step = hook_state(model), ex.step
    lens = ex.logit_lens(top_k=4)
    assert torch.equal(lens["ids"], top)
    torch.testing.assert_close(lens["probs"], probs)
    assert lens["edits"].startswith("with your edits: ablate_heads 1,3 at forward on 'transformer.h.0.attn'")
    # nothing recorded, counted or begun, and the model's hook dicts as found
    assert ex.captures.get("transformer.h.1", {}).get("forward", []) == []
    assert ex.captures.get("transformer.h.1.mlp", {}).get("forward", []) == []
    assert [info.fired for info in ex.own_hooks] == [0, 0, 0]
    assert ex.step == step and list(ex.timeline) == []
    assert hook_state(model) == hooks


def test_the_lens_says_a_function_hook_did_not_run_in_it() -> None:
    model = tm.gpt2(layers=2)
    top, probs, _ = hand_lens(model)
    ex = Explorer(model, IDS)
    calls = []

    def halve(module, args, output):
        calls.append(1)
        return (output[0] * 0.5, *output[1:])

    ex.attach("transformer.h.0", "forward", action=halve)
    lens = ex.logit_lens(top_k=4)
    assert calls == [] and torch.equal(lens["ids"], top)  # the unedited model's lens, as it says:
    torch.testing.assert_close(lens["probs"], probs)
    assert lens["edits"] == (
        "your functions did not run in it (halve at forward on 'transformer.h.0'): a value they return is not applied"
    )


def test_edits_false_is_the_unedited_lens_and_says_so() -> None:
    model = tm.gpt2(layers=2)
    top, probs, _ = hand_lens(model)
    ex = Explorer(model, IDS)
    ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", HEADS))
    lens = ex.logit_lens(top_k=4, edits=False)
    assert torch.equal(lens["ids"], top)
    torch.testing.assert_close(lens["probs"], probs)
    assert lens["edits"].startswith("without your edits (ablate_heads 1,3") and "unedited model" in lens["edits"]
    ex.detach()
    assert ex.logit_lens()["edits"] == ""  # no edit attached: nothing to say


def test_the_lens_gives_the_final_answers_probability_and_rank_at_each_layer() -> None:
    model = tm.gpt2(layers=2)
    lens = Explorer(model, IDS).logit_lens(top_k=3)
    with torch.no_grad():
        logits = model(IDS).logits
        hidden = model(IDS, output_hidden_states=True).hidden_states[1]  # block 0's output
        first = model.lm_head(model.transformer.ln_f(hidden)).softmax(-1)
    answer = logits.argmax(-1)
    assert lens["answer_probs"].shape == lens["answer_ranks"].shape == (3, 2, 7) and lens["vocab"] == tm.VOCAB
    assert torch.equal(lens["answer_ranks"][-1], torch.ones(2, 7, dtype=torch.long))  # the output row: its own top-1
    expected = first.gather(-1, answer[..., None])[..., 0]
    torch.testing.assert_close(lens["answer_probs"][0], expected)
    assert torch.equal(lens["answer_ranks"][0], (first > expected[..., None]).sum(-1) + 1)


def test_a_failing_edit_leaves_the_run_whole_and_is_said_left_out() -> None:
    model = tm.gpt2(layers=2)
    top, probs, _ = hand_lens(model)
    ex = Explorer(model, IDS[:, :5])
    wrong = torch.zeros(2, 5, 32)  # a patch that fits the example inputs, not the lens's longer ones
    ex.attach("transformer.h.0.mlp", "forward", edit=("replace", wrong))
    hooks = hook_state(model)
    with pytest.warns(HookFailedWarning, match="transformer.h.0.mlp"):
        lens = ex.logit_lens(IDS, top_k=4)
    assert torch.equal(lens["ids"], top)  # the run went on without the failing edit
    torch.testing.assert_close(lens["probs"], probs)
    assert "which failed in this run" in lens["edits"] and "with your edits" not in lens["edits"]
    (info,) = ex.own_hooks
    assert "does not fit" in info.last_error or "shape" in info.last_error
    assert info.fired == 0 and hook_state(model) == hooks


def test_a_failing_edit_raises_under_on_error_raise_and_leaves_the_model_as_found() -> None:
    model = tm.gpt2(layers=2)
    top, _, _ = hand_lens(model)
    ex = Explorer(model, IDS[:, :5], on_error="raise")
    ex.attach("transformer.h.0.mlp", "forward", edit=("replace", torch.zeros(2, 5, 32)))
    hooks = hook_state(model)
    with pytest.raises(ValueError, match="replace"):
        ex.logit_lens(IDS)
    assert hook_state(model) == hooks
    assert torch.equal(ex.logit_lens(IDS, top_k=4, edits=False)["ids"], top)  # the unedited model still runs


def test_attention_and_patch_sweep_honour_the_edit_and_say_so() -> None:
    model = tm.gpt2(layers=2)
    clean, corrupted = IDS[:1], tm.token_ids(length=7, seed=4)
    plain = Explorer(model, IDS).attention()
    handle = zero_heads(model, 0, HEADS)  # the same ablation by hand, seen by a fresh explorer
    try:
        by_hand = Explorer(model, IDS)
        expected, expected_sweep = by_hand.attention(), by_hand.patch_sweep(clean, corrupted)
        by_hand.close()
    finally:
        handle.remove()
    ex = Explorer(model, IDS)
    ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", HEADS))
    edited, unedited = ex.attention(), ex.attention(edits=False)
    for path in expected:
        torch.testing.assert_close(edited[path], expected[path])
        torch.testing.assert_close(unedited[path], plain[path])
    assert not torch.allclose(edited["transformer.h.1.attn"], plain["transformer.h.1.attn"])  # layer 1 sees it
    assert edited.edits.startswith("with your edits") and unedited.edits.startswith("without your edits")
    sweep = ex.patch_sweep(clean, corrupted)
    torch.testing.assert_close(sweep, expected_sweep)
    assert sweep.edits.startswith("with your edits") and "ablate_heads" in sweep.edits
    assert ex.patch_sweep(clean, corrupted, edits=False).edits.startswith("without your edits")


def test_an_attribution_honours_an_edit_of_the_gradients() -> None:
    model = tm.gpt2(layers=2)
    ex = Explorer(model, IDS[:1])
    ex.attach("transformer.h.0", "grad", edit=("zero",))  # every gradient to the embeddings passes through it
    edited = ex.attribute(method="saliency", target="top")
    unedited = ex.attribute(method="saliency", target="top", edits=False)
    assert torch.count_nonzero(edited) == 0 and torch.count_nonzero(unedited) > 0
    assert edited.edits == "with your edits: zero at grad on 'transformer.h.0'"
    assert unedited.edits.startswith("without your edits")
    assert [info.fired for info in ex.own_hooks] == [0]


@pytest.mark.parametrize(
    ("target", "kind"),
    [("1", "backward"), ("2", "backward_pre"), ("1", "grad"), ("", "global_backward"), ("node", "node")],
)
def test_an_attribution_honours_every_kind_of_gradient_edit(target: str, kind: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    images = torch.randn(2, 3, 8, 8)
    ex = Explorer(model, images)
    if kind == "node":  # the ReLU's backward node, by its persistent id
        target = next(node["id"] for node in ex.graph()["nodes"] if node["module"] == "1")
    ex.attach(target, kind, edit=("zero",))  # every gradient to the image passes through it
    edited = ex.attribute(images, target=0, method="saliency")
    unedited = ex.attribute(images, target=0, method="saliency", edits=False)
    assert torch.count_nonzero(edited) == 0 and torch.count_nonzero(unedited) > 0
    assert edited.edits.startswith("with your edits: zero at") and [info.fired for info in ex.own_hooks] == [0]
