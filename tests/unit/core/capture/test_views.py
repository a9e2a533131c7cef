"""The views that fit a captured tensor, chosen from its shape, its module and the inputs' sequences."""

from __future__ import annotations

import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.capture.views import is_attention_source, sequence_axis, tensor_views
from hookwidgets.core.model.tokens import Sequences
from hookwidgets.examples.vit import DigitsViT
from tests import transformer_models as tm
from tests.conftest import SmallCNN

TOKENS = Sequences(tokens=[list("abcdef")], lengths=(6,))


def _captured(model: nn.Module, inputs, target: str) -> tuple[Explorer, dict[str, torch.Tensor]]:
    ex = Explorer(model, inputs)
    ex.attach(target, "forward")
    ex.run()
    return ex, ex.captures[target]["forward"][-1].tensors


def test_a_conv_output_is_feature_maps_never_heads_even_when_its_sides_are_sequence_lengths():
    assert tensor_views((2, 16, 8, 8)) == ["maps", "histogram"]
    # 6×6 maps beside 6-token inputs: still maps, as a conv module is no attention source
    assert tensor_views((2, 16, 6, 6), attention=False, sequences=TOKENS)[0] == "maps"
    model = SmallCNN()
    assert not any(is_attention_source(model, name) for name, _ in model.named_modules())


def test_hidden_states_with_a_known_sequence_length_are_tokens_and_without_one_as_before():
    assert tensor_views((1, 6, 32), sequences=TOKENS) == ["tokens", "histogram"]
    assert tensor_views((1, 7, 32), sequences=TOKENS) == ["maps", "histogram"]  # unknown length: as before
    assert tensor_views((1, 6, 50, 32), sequences=TOKENS) == ["maps", "tokens", "histogram"]
    assert sequence_axis((1, 4, 6, 8), TOKENS) == 2  # (N, heads, T, head_dim)
    assert sequence_axis((1, 8, 6), TOKENS) is None  # the last axis is the features


def test_vectors_are_bars_and_any_other_shape_a_histogram():
    assert tensor_views((2, 10)) == ["bars", "histogram"]
    assert tensor_views((10,)) == ["bars", "histogram"]
    assert tensor_views(()) == ["bars", "histogram"]
    assert tensor_views((2, 3, 4, 5, 6)) == ["histogram"]


def test_a_gpt2_attention_modules_probabilities_are_heads_with_token_labels():
    model = tm.gpt2()
    model.config._attn_implementation = "eager"  # probabilities returned only by eager attention
    ex, tensors = _captured(model, tm.token_ids(length=6), "transformer.h.0.attn")
    with ex:
        assert is_attention_source(model, "transformer.h.0.attn")
        assert not is_attention_source(model, "transformer.h.0.mlp")
        assert list(tensors) == ["output.0", "output.1"]
        seq = ex.sequences
        assert tensor_views(tensors["output.0"].shape, attention=True, sequences=seq) == ["tokens", "histogram"]
        views = tensor_views(tensors["output.1"].shape, attention=True, sequences=seq)
        assert tensors["output.1"].shape == (1, 4, 6, 6) and views == ["heads", "tokens", "histogram"]


def test_a_llama_attention_output_is_tokens_and_its_probabilities_heads():
    model = tm.llama()
    model.config._attn_implementation = "eager"
    ex, tensors = _captured(model, tm.token_ids(length=5), "model.layers.0.self_attn")
    with ex:
        assert is_attention_source(model, "model.layers.0.self_attn")
        output, probs = tensors["output.0"], tensors["output.1"]
        assert tensor_views(output.shape, attention=True, sequences=ex.sequences)[0] == "tokens"
        assert tensor_views(probs.shape, attention=True, sequences=ex.sequences)[0] == "heads"


def test_the_digits_vits_softmax_is_heads_and_its_blocks_tokens_on_a_patch_grid():
    torch.manual_seed(0)
    model = DigitsViT().eval()
    ex, tensors = _captured(model, torch.randn(2, 1, 32, 32), "blocks.0.attn.softmax")
    with ex:
        assert ex.sequences.grid == (8, 8) and ex.sequences.lengths == (65,)
        assert is_attention_source(model, "blocks.0.attn.softmax")
        assert not is_attention_source(model, "blocks.0.mlp")  # not inside an attention module
        assert tensor_views(tensors["output"].shape, attention=True, sequences=ex.sequences)[0] == "heads"
        block = tensor_views((2, 65, 32), sequences=ex.sequences)
        assert block == ["patches", "tokens", "histogram"]


def test_a_transformers_vits_hidden_states_are_patches_first():
    ex, tensors = _captured(tm.vit(), tm.images(2), "vit.layers.0")
    with ex:
        hidden = next(iter(tensors.values()))
        assert hidden.shape == (2, 17, 32)
        assert tensor_views(hidden.shape, sequences=ex.sequences) == ["patches", "tokens", "histogram"]


def test_a_softmax_outside_attention_and_a_path_that_is_no_module_are_no_attention_source():
    model = nn.Sequential(nn.Linear(4, 4), nn.Softmax(dim=-1))
    assert not is_attention_source(model, "1")
    assert not is_attention_source(model, "0.weight")
    assert not is_attention_source(model, "AddmmBackward0#0")
