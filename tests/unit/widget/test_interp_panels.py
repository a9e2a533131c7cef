"""Issue 24 in the widget: attribution methods that fit the selection, token scores for the page to colour, the
rollouts on attention modules, the logit-lens panel and the patching panel."""

from __future__ import annotations

import pytest
import torch

from hookwidgets import HookExplorer
from hookwidgets.core import method_name
from hookwidgets.widget import lens_panel
from tests import transformer_models as tm
from tests.conftest import hook_state

from ._messages import browser_sends, browser_sets

PNG = b"\x89PNG\r\n\x1a\n"
TOKEN_METHODS = ["integrated_gradients", "saliency", "input_x_grad"]
ROLLOUTS = ["attention_rollout", "grad_attention_rollout"]
CAMS = ["gradcam", "gradcam++", "hirescam", "xgradcam", "layercam", "guided_gradcam"]
PIXELS = ["saliency", "input_x_grad", "guided_backprop"]


def _gpt2(**options) -> tuple[HookExplorer, torch.nn.Module, dict]:
    tokenizer = tm.tokenizer()
    model = tm.gpt2(vocab=len(tokenizer), **options)
    batch = tokenizer("the cat sat on a mat", return_tensors="pt")
    return HookExplorer(model, example_inputs=batch, tokenizer=tokenizer), model, batch


def _methods(view, target: str) -> tuple[list[str], str]:
    browser_sets(view, selected=target)
    return view.selection["attribution_methods"], view.selection["attribution_note"]


def test_a_text_model_offers_token_methods_everywhere_and_rollouts_on_attention_but_no_cam():
    ex, _, _ = _gpt2()
    with ex:
        methods, note = _methods(ex.view, "transformer.h.0.attn")
        assert methods == TOKEN_METHODS + ROLLOUTS
        assert "at the embedding" in note
        assert _methods(ex.view, "transformer.h.0.mlp")[0] == TOKEN_METHODS  # a linear layer: no Grad-CAM
        assert _methods(ex.view, "lm_head")[0] == TOKEN_METHODS
        browser_sets(ex.view, selected="transformer.wte.weight")  # a parameter: nothing to attribute
        assert ex.view.selection["attribution_methods"] == []


def test_an_image_model_offers_cams_only_where_the_output_is_a_grid(cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        assert _methods(ex.view, "features.conv")[0] == CAMS + PIXELS
        methods, note = _methods(ex.view, "head.fc")
        assert methods == PIXELS and "spatial grid" in note
    with HookExplorer(tm.vit(), example_inputs=tm.images()) as ex:
        assert _methods(ex.view, "vit.layers.1.layernorm_before")[0] == CAMS + PIXELS  # patch tokens are a grid
        assert _methods(ex.view, "vit.layers.1.attention")[0] == CAMS + PIXELS + ROLLOUTS
        assert _methods(ex.view, "classifier")[0] == PIXELS
    with HookExplorer(cnn) as ex:  # no example inputs: nothing to explain, and the panel says why
        methods, note = _methods(ex.view, "features.conv")
        assert methods == [] and "needs example inputs" in note


@pytest.mark.parametrize("method", TOKEN_METHODS + ROLLOUTS)
def test_a_token_method_sends_each_token_with_its_score(method):
    ex, model, _ = _gpt2()
    with ex:
        browser_sets(ex.view, selected="transformer.h.1.attn")
        reply = browser_sends(ex.view, type="attribute", layer="transformer.h.1.attn", method=method, target="top")
        result = ex.view.attribution
        assert reply["ok"] and result["error"] == "" and result["png"] is None
        expected = ex.attribute(None, "top", method=method)[0]
        assert [t["text"] for t in result["tokens"]] == ["the", "cat", "sat", "on", "a", "mat"]
        assert [t["score"] for t in result["tokens"]] == pytest.approx(expected.tolist(), rel=1e-5, abs=1e-7)
        where = "transformer.wte" if method in TOKEN_METHODS else "transformer.h.*.attn"
        assert result["caption"].startswith(method_name(method)) and result["caption"].endswith(where)
        assert all(p.grad is None for p in model.parameters()) and hook_state(model) == hook_state(tm.gpt2())


def test_the_caption_names_the_explained_token_in_the_tokenizers_words():
    ex, model, batch = _gpt2()
    with ex:
        browser_sets(ex.view, selected="transformer.h.1")
        browser_sends(ex.view, type="attribute", layer="transformer.h.1", method="saliency", target="top")
        top = int(model(**batch).logits[0, -1].argmax())
        word = tm.tokenizer().convert_ids_to_tokens([top])[0]
        assert ex.view.attribution["caption"] == f"saliency of token {top} {word!r} at transformer.wte"


def test_the_attribution_runs_with_the_users_edits_and_says_so():
    ex, _, _ = _gpt2()
    with ex:
        ex.attach("transformer.h.0", "grad", edit=("scale", 0.5))  # every gradient to the embedding passes it
        browser_sets(ex.view, selected="transformer.h.1")
        browser_sends(ex.view, type="attribute", layer="transformer.h.1", method="saliency", target="top")
        result = ex.view.attribution
        assert result["edits"] == "with your edits: scale 0.5 at grad on 'transformer.h.0'"
        edited = ex.attribute(None, "top", method="saliency")[0]
        unedited = ex.attribute(None, "top", method="saliency", edits=False)[0]
        assert [t["score"] for t in result["tokens"]] == pytest.approx(edited.tolist(), rel=1e-5)
        assert edited.tolist() == pytest.approx((unedited * 0.5).tolist(), rel=1e-4)  # saliency: |gradient| halved
        ex.detach()
        browser_sends(ex.view, type="attribute", layer="transformer.h.1", method="saliency", target="top")
        assert ex.view.attribution["edits"] == ""


def test_the_attribution_position_reaches_the_method():
    ex, _, _ = _gpt2()
    with ex:
        browser_sets(ex.view, selected="transformer.h.1")
        browser_sends(ex.view, type="attribute", layer="transformer.h.1", method="saliency", target="top", position=2)
        expected = ex.attribute(None, "top", method="saliency", position=2)[0]
        assert [t["score"] for t in ex.view.attribution["tokens"]] == pytest.approx(expected.tolist(), rel=1e-5)
        assert [t["score"] for t in ex.view.attribution["tokens"]] != pytest.approx(
            ex.attribute(None, "top", method="saliency")[0].tolist(), rel=1e-5
        )
        reply = browser_sends(
            ex.view, type="attribute", layer="transformer.h.1", method="saliency", target="top", position="2"
        )
        assert not reply["ok"] and "the widget sent the run position '2'" in ex.view.attribution["error"]


def test_a_method_that_does_not_fit_names_the_ones_that_do_and_the_error_stays_with_its_module():
    ex, _, _ = _gpt2()
    with ex:
        view = ex.view
        browser_sets(view, selected="transformer.h.0.mlp")
        reply = browser_sends(view, type="attribute", layer="transformer.h.0.mlp", method="gradcam", target="top")
        error = view.attribution["error"]
        assert not reply["ok"] and error == reply["error"]
        assert error.startswith("gradcam does not fit 'transformer.h.0.mlp': a CAM needs an image input")
        assert error.endswith("the methods here are integrated_gradients, saliency, input_x_grad")
        browser_sends(view, type="attribute", layer="transformer.h.0.mlp", method="attention_rollout", target="top")
        assert "the rollouts are offered on an attention module: select one" in view.attribution["error"]
        browser_sends(view, type="plot_step", kind="forward", step=None)  # another message: the error stays
        assert view.attribution["error"].startswith("attention_rollout does not fit")
        browser_sets(view, selected="transformer.h.1.mlp")  # kept, naming its module: the page shows it there only
        assert view.attribution["layer"] == "transformer.h.0.mlp" and view.attribution["error"].startswith(
            "attention_rollout does not fit 'transformer.h.0.mlp'"
        )


def test_a_vit_rollout_is_drawn_over_the_image(cnn, image):
    with HookExplorer(tm.vit(), example_inputs=tm.images()) as ex:
        browser_sets(ex.view, selected="vit.layers.1.attention")
        browser_sends(ex.view, type="attribute", layer="vit.layers.1.attention", method="attention_rollout", target=0)
        result = ex.view.attribution
        assert result["error"] == "" and result["png"][:8] == PNG and result["input_png"][:8] == PNG
        assert result["tokens"] is None and result["caption"] == "attention rollout over vit.layers.*.attention"


def test_nan_token_scores_reach_the_page_as_text():
    from hookwidgets.widget.attribution_panel import token_scores

    scores = token_scores(torch.tensor([0.5, float("nan"), float("-inf")]), ["a", "b", "c"])
    assert scores == [{"text": "a", "score": 0.5}, {"text": "b", "score": "nan"}, {"text": "c", "score": "-inf"}]


def test_the_lens_panel_shows_each_blocks_top_tokens_with_their_probabilities():
    ex, model, _ = _gpt2()
    with ex:
        view = ex.view
        assert view.lens["available"] and view.lens["cells"] == []
        reply = browser_sends(view, type="lens", top_k=3)
        lens = view.lens
        assert reply["ok"] and lens["error"] == ""
        assert lens["layers"] == ["transformer.h.0", "transformer.h.1", "output"]
        assert lens["positions"] == ["the", "cat", "sat", "on", "a", "mat"] and lens["first"] == 0
        expected = ex.logit_lens(top_k=3)
        assert len(lens["cells"]) == 3 and len(lens["cells"][0]) == 6 and len(lens["cells"][0][0]) == 3
        for row in range(3):
            for t in range(6):
                labels = [label for label, _ in lens["cells"][row][t]]
                probs = [prob for _, prob in lens["cells"][row][t]]
                assert labels == expected["labels"][row][0][t]
                assert probs == pytest.approx(expected["probs"][row, 0, t].tolist())
        # the output row is the model's own top prediction
        logits = model(**tm.tokenizer()("the cat sat on a mat", return_tensors="pt")).logits
        assert [cell[0][0] for cell in lens["cells"][-1]] == tm.tokenizer().convert_ids_to_tokens(
            logits[0].argmax(-1).tolist()
        )
        reply = browser_sends(view, type="lens", top_k=0)
        assert not reply["ok"] and "expected an integer from 1 to 20" in view.lens["error"]
        assert view.lens["cells"] == [] and view.lens["available"]


def test_a_long_input_shows_the_last_positions_of_the_lens(monkeypatch):
    monkeypatch.setattr(lens_panel, "MAX_POSITIONS", 4)
    ids = tm.token_ids(length=10)
    with HookExplorer(tm.gpt2(), example_inputs=ids) as ex:
        browser_sends(ex.view, type="lens")
        lens = ex.view.lens
        assert lens["first"] == 6 and lens["positions"] == [f"#{i}" for i in ids[0, 6:].tolist()]
        assert len(lens["cells"][0]) == 4 and lens["cells"][0][0][0][0].startswith("#")
        assert "positions 6–9 of 10" in lens["caption"]


def test_an_encoder_decoders_lens_columns_are_its_decoder_positions():
    inputs = {"input_ids": tm.token_ids(length=8), "decoder_input_ids": tm.token_ids(length=5, seed=7)}
    with HookExplorer(tm.t5(), example_inputs=inputs) as ex:
        browser_sends(ex.view, type="lens")
        lens = ex.view.lens
        assert lens["layers"] == ["decoder.block.0", "decoder.block.1", "output"]
        assert lens["positions"] == [f"#{i}" for i in inputs["decoder_input_ids"][0].tolist()]
        assert all(len(row) == 5 for row in lens["cells"])


def test_the_lens_panel_is_hidden_where_there_is_no_lens_and_says_why(cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        assert not ex.view.lens["available"] and "token ids" in ex.view.lens["reason"]
    with HookExplorer(tm.bert(), example_inputs=tm.token_ids()) as ex:  # a sequence classifier: no unembedding
        assert not ex.view.lens["available"] and "declares no output embedding" in ex.view.lens["reason"]


def test_a_patch_sweep_shows_its_progress_then_its_figure():
    ids = tm.token_ids(batch=2, length=6)
    with HookExplorer(tm.gpt2(), example_inputs=ids[:1]) as ex:
        view = ex.view
        seen, calls = [], []
        view.observe(lambda change: seen.append(change["new"]["progress"]), names="patching")
        result = ex.patch_sweep(ids[:1], ids[1:], batch_size=4, progress=lambda d, t: calls.append((d, t)))
        assert calls == [(4, 12), (6, 12), (10, 12), (12, 12)]  # the user's callback, every call
        assert [12, 12] in seen and seen[-1] is None  # the page saw the end, then the figure
        assert view.patching["png"][:8] == PNG and view.patching["error"] == ""
        assert "2 layers patched in at each of 6 positions" in view.patching["caption"]
        assert view.status["message"] == "patch sweep: 2 layers × 6 positions"
        assert torch.equal(result, ex.patch_sweep(ids[:1], ids[1:]))


def test_a_failing_patch_sweep_raises_in_the_cell_and_says_so_in_the_panel():
    with HookExplorer(tm.gpt2(), example_inputs=tm.token_ids()) as ex:
        ex.view  # noqa: B018 -- the view is open: the panel shows what the cell raises
        with pytest.raises(ValueError, match="differ in length"):
            ex.patch_sweep(tm.token_ids(length=6), tm.token_ids(length=5))
        assert ex.view.patching["error"].startswith("ValueError: the clean inputs")
        assert ex.view.patching["png"] is None and ex.view.status["state"] == "error"


def test_the_lens_panel_marks_where_the_final_answer_first_leads_and_says_it_ran_with_the_edits():
    ex, _, _ = _gpt2()
    with ex:
        ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", [0, 2]))
        browser_sends(ex.view, type="lens", top_k=2)
        lens = ex.view.lens
        expected = ex.logit_lens(top_k=2)  # with the edit, as the panel's
        assert lens["answers"] == [cell[0][0] for cell in lens["cells"][-1]]
        assert lens["answer_probs"] == expected["answer_probs"][:, 0].tolist()
        ranks = expected["answer_ranks"][:, 0]
        assert lens["answer_ranks"] == ranks.tolist() and lens["answer_ranks"][-1] == [1] * 6
        for t, row in enumerate(lens["answer_first"]):
            assert ranks[row, t] == 1 and (ranks[:row, t] > 1).all()
        assert lens["edits"] == "with your edits: ablate_heads 0,2 at forward on 'transformer.h.0.attn'"
        vocab = len(tm.tokenizer())
        assert lens["floor"] == 1 / vocab and f"uniform guess over {vocab} tokens" in lens["caption"]
        ex.detach()
        browser_sends(ex.view, type="lens", top_k=2)
        assert ex.view.lens["edits"] == ""
