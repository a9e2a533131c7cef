"""An attention module's inspector shows its heads, from ex.attention() on the example inputs (sdpa left on)."""

from __future__ import annotations

import torch

from hookwidgets import HookExplorer
from hookwidgets.widget import live
from tests import transformer_models as tm

from ._messages import browser_sends, browser_sets

ATTENTION = "transformer.h.1.attn"


def _heads(view) -> dict | None:
    return next((item for item in view.plots["items"] if item["kind"] == "attention"), None)


def _gpt2_explorer() -> tuple[HookExplorer, torch.nn.Module]:
    tokenizer = tm.tokenizer()
    model = tm.gpt2(vocab=len(tokenizer))
    batch = tokenizer("the cat sat on a mat", return_tensors="pt")
    return HookExplorer(model, example_inputs=batch, tokenizer=tokenizer), model


def test_selecting_an_attention_module_shows_its_heads_with_token_labels_and_a_head_picker():
    ex, model = _gpt2_explorer()
    with ex:
        view = ex.view
        browser_sets(view, selected=ATTENTION)  # no hook attached: the heads come without one
        item = _heads(view)
        assert item is not None and model.config._attn_implementation == "sdpa"
        assert item["view"] == "heads" and item["shape"] == [1, 4, 6, 6] and item["heads"] == 4
        assert item["tokens"] == ["the", "cat", "sat", "on", "a", "mat"] and item["png"]
        assert item["title"].startswith("transformer.h.1.attn · attention probabilities")
        browser_sends(view, type="plot_view", kind="attention", head=3)
        one = _heads(view)
        assert one["head"] == 3 and one["png"] != item["png"]
        browser_sets(view, selected="transformer.h.1.mlp")  # not an attention module: no heads item
        assert _heads(view) is None
        assert view.error == ""


def test_the_heads_are_computed_once_per_selection_and_again_after_a_run():
    ex, model = _gpt2_explorer()
    calls = []
    attention = ex.attention

    def counted(*args, **kwargs):
        calls.append(1)
        return attention(*args, **kwargs)

    ex.attention = counted  # counts the explorer's public method, as the widget calls it
    with ex:
        view = ex.view
        browser_sets(view, selected="transformer.h.0.attn")
        first = _heads(view)
        browser_sends(view, type="plot_view", kind="attention", head=1)  # a head pick draws the held probabilities
        browser_sends(view, type="plot_view", kind="attention", head=None)
        assert len(calls) == 1 and first["shape"] == [1, 4, 6, 6] and _heads(view)["png"] == first["png"]
        with torch.no_grad():
            model.transformer.h[0].attn.c_attn.weight.mul_(3.0)  # trained in another cell, say
        browser_sends(view, type="run", mode="forward")
        assert len(calls) == 2 and _heads(view)["png"] != first["png"]
        browser_sets(view, selected=ATTENTION)  # another selection: what the model computes now
        assert len(calls) == 3


def test_a_failing_attention_run_is_said_in_the_errors_panel():
    ex, _ = _gpt2_explorer()

    def refuses(*args, **kwargs):
        raise ValueError("eager attention refused")

    ex.attention = refuses
    with ex:
        view = ex.view
        browser_sets(view, selected=ATTENTION)
        assert _heads(view) is None
        assert "attention heads of 'transformer.h.1.attn' could not be computed" in view.error
        assert "eager attention refused" in view.error


def test_live_updates_redraw_the_heads_of_a_selected_attention_module(monkeypatch):
    # the user's own loop while the view follows it: the heads are drawn as a click draws them, with the capture
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    ex, model = _gpt2_explorer()
    batch = ex.example_inputs
    with ex:
        view = ex.view
        ex.attach(ATTENTION, "forward")
        browser_sets(view, selected=ATTENTION)
        before = _heads(view)
        assert before is not None and before["step"] == 0
        with torch.no_grad():
            model(**batch)  # the loop starts: counts are pushed, the images wait their turn
            assert view.status["state"] == "live" and _heads(view)["step"] == 0
            model.transformer.h[1].attn.c_attn.weight.mul_(3.0)  # the loop trains
            clock[0] += live.PLOT_INTERVAL_S + live.FIRST_PLOT_COST_S / live.MAX_SHARE  # the images' turn
            model(**batch)
        kinds = [item["kind"] for item in view.plots["items"]]
        assert view.plots["path"] == ATTENTION and kinds == ["forward", "attention"]
        assert view.plots["items"][0]["step"] == 2  # the newest capture
        heads = _heads(view)
        assert heads["step"] == 2 and heads["shape"] == [1, 4, 6, 6] and heads["png"] != before["png"]
        assert view.status["state"] == "live" and view.error == ""


def test_the_heads_run_with_the_users_edits_say_so_and_are_computed_again_when_an_edit_is_attached():
    ex, _ = _gpt2_explorer()
    with ex:
        view = ex.view
        browser_sets(view, selected=ATTENTION)
        plain = _heads(view)
        assert plain["edits"] == ""
        ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", [0, 1, 2, 3]))  # layer 1 sees it
        browser_sets(view, selected="transformer.h.1.mlp")
        browser_sets(view, selected=ATTENTION)  # the same step: computed again for the edit
        edited = _heads(view)
        assert edited["edits"] == "with your edits: ablate_heads 0,1,2,3 at forward on 'transformer.h.0.attn'"
        assert edited["png"] != plain["png"]
