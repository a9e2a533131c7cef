"""Issue 36: a patch sweep started from the page (the ``patch`` message): the boxes offered and prefilled, the
lengths checked, the metric chosen, progress then the figure, the differing positions, the edits it ran with."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookwidgets import HookExplorer
from hookwidgets.core import ProbeFailedWarning
from tests import transformer_models as tm

from ._messages import browser_sends, browser_sets

PNG = b"\x89PNG\r\n\x1a\n"
CLEAN = "the cat sat on a mat"
CORRUPTED = "the cat sat on a hat"  # another last word: this random GPT-2 predicts another token


def _gpt2(**options) -> tuple[HookExplorer, object]:
    tokenizer = tm.tokenizer()
    model = tm.gpt2(vocab=len(tokenizer))
    return HookExplorer(model, example_inputs=tokenizer(CLEAN, return_tensors="pt"), tokenizer=tokenizer, **options), (
        tokenizer
    )


def _cells(patching: dict) -> np.ndarray:
    region = next(r for r in patching["hover"]["regions"] if r["type"] == "cells")
    return np.frombuffer(region["values"], "<f4").reshape(region["rows"], region["cols"])


def test_a_text_model_offers_text_boxes_filled_with_its_example_and_a_hint():
    ex, _ = _gpt2()
    with ex:
        offer = ex.view.patching
        assert offer["available"] and offer["reason"] == "" and offer["mode"] == "text"
        assert offer["clean"] == CLEAN and offer["corrupted"] == "" and "one word changed" in offer["hint"]
        assert offer["metric"] == "recovered" and offer["png"] is None and offer["edits"] == ""


def test_without_a_tokenizer_the_boxes_hold_token_ids_and_a_second_item_is_the_corrupted_one(cnn, image):
    ids = tm.token_ids(batch=2, length=5)
    with HookExplorer(tm.gpt2(), example_inputs=ids) as ex:
        offer = ex.view.patching
        assert offer["available"] and offer["mode"] == "ids"
        assert offer["clean"] == " ".join(map(str, ids[0].tolist()))
        assert offer["corrupted"] == " ".join(map(str, ids[1].tolist()))
    with HookExplorer(cnn, example_inputs=image) as ex:
        assert not ex.view.patching["available"] and "token ids" in ex.view.patching["reason"]
    with HookExplorer(tm.gpt2()) as ex:
        assert not ex.view.patching["available"] and "needs example inputs" in ex.view.patching["reason"]


def test_a_failed_shape_probe_is_named_as_the_reason_no_sweep_is_offered():
    ids = torch.full((1, 5), 10**6)  # past the vocabulary: the probe's forward raises
    with pytest.warns(ProbeFailedWarning):
        ex = HookExplorer(tm.gpt2(), example_inputs=ids)
    with ex:
        reason = ex.view.patching["reason"]
        assert not ex.view.patching["available"] and reason.startswith("the shape probe failed: IndexError"), reason


def test_a_sweep_from_the_page_shows_its_progress_then_the_fraction_recovered_with_the_differing_position():
    ex, tokenizer = _gpt2()
    with ex:
        view = ex.view
        seen = []
        view.observe(lambda change: seen.append(change["new"]["progress"]), names="patching")
        reply = browser_sends(view, type="patch", clean=CLEAN, corrupted=CORRUPTED)
        patching = view.patching
        assert reply == {"type": "reply", "request_id": reply["request_id"], "ok": True, "error": ""}
        assert [12, 12] in seen and seen[-1] is None  # progress, then the figure
        assert patching["png"][:8] == PNG and patching["error"] == ""
        assert patching["tokens"] == CLEAN.split() and patching["differs"] == [5]
        assert (patching["clean"], patching["corrupted"], patching["metric"]) == (CLEAN, CORRUPTED, "recovered")
        caption = patching["caption"]
        assert caption.startswith("activation patching: the fraction of the logit difference recovered (0: corrupted")
        assert "red: toward the clean run (a full restoration: 1)" in caption
        assert "▼ marks the position where clean and corrupted differ" in caption
        headless = ex.patch_sweep(
            tokenizer(CLEAN, return_tensors="pt"), tokenizer(CORRUPTED, return_tensors="pt"), metric="recovered"
        )
        np.testing.assert_allclose(_cells(patching), headless.numpy(), rtol=1e-5, atol=1e-6)
        assert float(headless[-1, -1]) == pytest.approx(1.0, abs=1e-5)
        browser_sends(view, type="patch", clean=CLEAN, corrupted=CORRUPTED, metric="logit_diff")
        assert view.patching["metric"] == "logit_diff"
        assert "the logit difference (clean answer" in view.patching["caption"]
        np.testing.assert_allclose(_cells(view.patching), headless.numpy() * headless_gap(ex, tokenizer), rtol=1e-4)


def headless_gap(ex: HookExplorer, tokenizer) -> float:
    """The clean run's logit difference minus the corrupted run's: what ``logit_diff`` gives a full restoration."""
    clean, corrupted = tokenizer(CLEAN, return_tensors="pt"), tokenizer(CORRUPTED, return_tensors="pt")
    return ex.patch_sweep(clean, corrupted, metric="logit_diff").clean


def test_inputs_of_different_lengths_are_refused_naming_both_lengths_and_the_fix():
    ex, _ = _gpt2()
    with ex:
        reply = browser_sends(ex.view, type="patch", clean=CLEAN, corrupted="the big cat sat on a hat")
        error = ex.view.patching["error"]
        assert not reply["ok"] and reply["error"] == error
        assert error.startswith("the clean input is 6 tokens and the corrupted input 7: patching swaps activations")
        assert "change the corrupted text so the tokenizer makes as many tokens" in error
        assert ex.view.patching["png"] is None and ex.view.patching["progress"] is None
        assert ex.view.status["message"] == "the patch sweep did not start: see the patching panel"
        reply = browser_sends(ex.view, type="patch", clean=CLEAN, corrupted="  ")
        assert not reply["ok"] and "the corrupted box is empty" in ex.view.patching["error"]
        reply = browser_sends(ex.view, type="patch", clean=CLEAN, corrupted=CORRUPTED, metric="ratio")
        assert not reply["ok"] and "the patching metric 'ratio'" in ex.view.patching["error"]


def test_a_sweep_the_metric_cannot_measure_says_why_in_the_panel():
    ex, _ = _gpt2()
    with ex:
        reply = browser_sends(ex.view, type="patch", clean=CLEAN, corrupted="the dog sat on a mat")
        assert not reply["ok"] and "both runs predict token 9 'mat' at the last position" in reply["error"]
        assert ex.view.patching["error"].startswith("ValueError: metric='recovered' compares the clean answer")
        assert ex.view.status["state"] == "error"


def test_a_failed_sweep_stays_said_when_the_theme_changes_after_a_drawn_one():
    ex, _ = _gpt2()
    with ex:
        assert browser_sends(ex.view, type="patch", clean=CLEAN, corrupted=CORRUPTED)["ok"]
        browser_sends(ex.view, type="patch", clean=CLEAN, corrupted="the dog sat on a mat")
        browser_sets(ex.view, theme={"name": "dark", "background": "#1e1e1e", "foreground": "#d4d4d4"})
        assert ex.view.patching["png"] is None and "both runs predict token" in ex.view.patching["error"]
        assert browser_sends(ex.view, type="patch", clean=CLEAN, corrupted=CORRUPTED)["ok"]
        browser_sends(ex.view, type="patch", clean=CLEAN, corrupted="the cat")  # refused before any sweep
        browser_sets(ex.view, theme={"name": "light", "background": "#ffffff", "foreground": "#212121"})
        assert ex.view.patching["png"] is None and "the clean input is 6 tokens" in ex.view.patching["error"]


def test_ids_typed_in_the_boxes_are_swept_and_bad_ones_named():
    ids = tm.token_ids(batch=1, length=5)
    with HookExplorer(tm.gpt2(), example_inputs=ids) as ex:
        clean = ids[0].tolist()
        corrupted = [*clean[:-1], (clean[-1] + 1) % 96]
        text = [" ".join(map(str, row)) for row in (clean, corrupted)]
        reply = browser_sends(ex.view, type="patch", clean=text[0], corrupted=text[1], metric="logit_diff")
        assert reply["ok"] and ex.view.patching["differs"] == [4]
        expected = ex.patch_sweep(ids, torch.tensor([corrupted]), metric="logit_diff")
        np.testing.assert_allclose(_cells(ex.view.patching), expected.numpy(), rtol=1e-5, atol=1e-6)
        reply = browser_sends(ex.view, type="patch", clean=text[0], corrupted="1 2 x")
        assert not reply["ok"] and "the corrupted box holds '1 2 x': type token ids" in reply["error"]


def test_a_sweep_with_an_edit_attached_says_so():
    ex, _ = _gpt2()
    with ex:
        ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", [1]))
        browser_sends(ex.view, type="patch", clean=CLEAN, corrupted=CORRUPTED)
        assert ex.view.patching["edits"] == f"with your edits: {'; '.join(ex.edits)}"
        assert "ablate_heads" in ex.view.patching["edits"]
