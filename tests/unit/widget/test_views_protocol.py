"""The inspector's views of transformers' captures: tokens, heads, patches, bars, maps; element and head pickers."""

from __future__ import annotations

import pytest
import torch

from hookwidgets import HookExplorer
from hookwidgets.examples.vit import DigitsViT
from hookwidgets.widget import protocol
from hookwidgets.widget.captures import heads_item
from tests import transformer_models as tm

from ._messages import browser_sends, browser_sets
from ._shapes import problems

PNG = b"\x89PNG\r\n\x1a\n"
WORDS = ["the", "cat", "sat", "on", "a", "mat"]


def _eager_gpt2():
    model = tm.gpt2()
    model.config._attn_implementation = "eager"  # attention probabilities come out of eager attention only
    return model


def _item(view, kind: str = "forward") -> dict:
    (item,) = [i for i in view.plots["items"] if i["kind"] == kind]
    assert not problems(item, protocol.PlotItem), problems(item, protocol.PlotItem)
    assert item["png"][:8] == PNG
    return item


def test_a_gpt2_blocks_hidden_states_are_a_token_map_labelled_with_the_tokens():
    with HookExplorer(tm.gpt2(), tm.token_ids(length=6), tokens=WORDS) as ex:
        view = ex.view
        ex.attach("transformer.h.0", "forward")
        browser_sets(view, selected="transformer.h.0")
        browser_sends(view, type="run", mode="forward")
        item = _item(view)
        assert item["view"] == "tokens" and item["views"] == ["tokens", "histogram"]
        assert item["tokens"] == WORDS and item["element"] == "output" and item["heads"] == 0
        browser_sends(view, type="plot_view", kind="forward", view="histogram")
        assert _item(view)["view"] == "histogram" and _item(view)["tokens"] is None


def test_an_attention_modules_elements_are_picked_and_its_probabilities_shown_as_heads_one_or_all():
    with HookExplorer(_eager_gpt2(), tm.token_ids(length=6), tokens=WORDS) as ex:
        view = ex.view
        ex.attach("transformer.h.1.attn", "forward")
        browser_sets(view, selected="transformer.h.1.attn")
        browser_sends(view, type="run", mode="forward")
        first = _item(view)
        assert first["elements"] == ["output.0", "output.1"] and first["element"] == "output.0"
        assert first["view"] == "tokens" and first["title"] == "transformer.h.1.attn · output.0"
        browser_sends(view, type="plot_view", kind="forward", element="output.1")
        heads = _item(view)
        assert heads["element"] == "output.1" and heads["shape"] == [1, 4, 6, 6]
        assert heads["view"] == "heads" and heads["views"] == ["heads", "tokens", "histogram"]
        assert heads["heads"] == 4 and heads["head"] is None and heads["tokens"] == WORDS
        browser_sends(view, type="plot_view", kind="forward", head=2)
        one = _item(view)
        assert one["head"] == 2 and one["title"].endswith("· head 2") and one["png"] != heads["png"]
        browser_sends(view, type="plot_view", kind="forward", head=None)
        assert _item(view)["head"] is None
        browser_sends(view, type="plot_view", kind="forward", head=9)  # no such head: all of them
        assert _item(view)["head"] is None
        reply = browser_sends(view, type="plot_view", kind="forward", head="2")
        assert not reply["ok"] and "head must be a head number or null" in reply["error"]


def test_a_vits_block_is_a_patch_grid_first_and_its_softmax_heads():
    torch.manual_seed(0)
    with HookExplorer(DigitsViT().eval(), torch.randn(1, 1, 32, 32)) as ex:
        view = ex.view
        ex.attach("blocks.0", "forward")
        ex.attach("blocks.0.attn.softmax", "forward")
        browser_sends(view, type="run", mode="forward")
        browser_sets(view, selected="blocks.0")
        block = _item(view)
        assert block["view"] == "patches" and block["views"] == ["patches", "tokens", "histogram"]
        browser_sends(view, type="plot_view", kind="forward", view="tokens")
        tokens = _item(view)["tokens"]  # the class token, then each patch's row and column (8×8)
        assert _item(view)["view"] == "tokens" and tokens[:3] == ["CLS", "0,0", "0,1"] and tokens[-1] == "7,7"
        browser_sets(view, selected="blocks.0.attn.softmax")  # another target: its own default view
        softmax = _item(view)
        assert softmax["view"] == "heads" and softmax["heads"] == 4


def test_deits_block_is_a_patch_grid_with_its_class_and_distillation_tokens_apart():
    config = tm.transformers.DeiTConfig(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=4, image_size=32, patch_size=8
    )
    torch.manual_seed(0)
    model = tm.transformers.DeiTForImageClassificationWithTeacher(config).eval()
    with HookExplorer(model, tm.images()) as ex:
        view = ex.view
        ex.attach("deit.layers.0", "forward")
        browser_sends(view, type="run", mode="forward")
        browser_sets(view, selected="deit.layers.0")
        assert _item(view)["view"] == "patches"  # 2 tokens before 4×4 patches (main offered no patch grid)


def test_a_cnns_maps_and_a_linears_bars_are_unchanged(explorer):
    view = explorer.view
    explorer.attach("features.conv", "forward")
    explorer.attach("head.fc", ["forward", "backward"])
    explorer.run(target=0)
    browser_sets(view, selected="features.conv")
    assert _item(view)["view"] == "maps" and _item(view)["views"] == ["maps", "histogram"]
    browser_sets(view, selected="head.fc")
    assert _item(view)["view"] == "bars" and _item(view)["views"] == ["bars", "histogram"]
    backward = _item(view, "backward")
    assert backward["elements"] == ["grad_output.0", "grad_input.0"] and backward["element"] == "grad_output.0"
    browser_sends(view, type="plot_view", kind="backward", element="grad_input.0")
    assert _item(view, "backward")["element"] == "grad_input.0" and _item(view, "backward")["shape"] == [2, 16]
    browser_sends(view, type="plot_view", kind="forward", view="heads")  # a view that does not fit: the default
    assert _item(view)["view"] == "bars"


def test_a_t5_decoders_captures_take_the_decoder_tokens():
    tokenizer = tm.tokenizer()
    inputs = dict(tokenizer(["the cat sat on a mat"], return_tensors="pt"))
    inputs["decoder_input_ids"] = tokenizer(["a big red"], return_tensors="pt")["input_ids"]
    with HookExplorer(tm.t5(), inputs, tokenizer=tokenizer) as ex:
        view = ex.view
        ex.attach("decoder.block.0", "forward")
        ex.attach("encoder.block.0", "forward")
        browser_sends(view, type="run", mode="forward")
        browser_sets(view, selected="decoder.block.0")
        assert _item(view)["tokens"] == ["a", "big", "red"]
        browser_sets(view, selected="encoder.block.0")
        assert _item(view)["tokens"] == WORDS


def test_a_heads_item_is_made_from_computed_attention_probabilities():
    probs = torch.softmax(torch.randn(1, 2, 6, 6), dim=-1)
    item = heads_item(probs, "transformer.h.0.attn", WORDS)
    assert not problems(item, protocol.PlotItem), problems(item, protocol.PlotItem)
    assert item["view"] == "heads" and item["heads"] == 2 and item["tokens"] == WORDS
    assert item["title"] == "transformer.h.0.attn · attention probabilities" and item["png"][:8] == PNG
    one = heads_item(probs, "transformer.h.0.attn", WORDS, head=1)
    assert one["head"] == 1 and one["png"] != item["png"]
    cross = heads_item(torch.rand(1, 2, 3, 6), "decoder.block.0.layer.1", ["a", "b", "c"], key_tokens=WORDS)
    assert cross["tokens"] == ["a", "b", "c"] and cross["view"] == "heads"
    with pytest.raises(ValueError, match=r"attention probabilities are \(N, heads, T_q, T_k\)"):
        heads_item(torch.rand(2, 6, 6), "x")
