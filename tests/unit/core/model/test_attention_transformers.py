"""ex.attention() on transformers models left on their default implementation (sdpa): the probabilities equal
output_attentions=True under eager, in execution order, and the configs and hook dicts come back as found."""

from __future__ import annotations

import copy
from typing import ClassVar

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import hook_state

transformers = tm.transformers


def configs_state(model: nn.Module) -> list:
    """Every config reachable from the model (each module's, their sub-configs'), with its attention
    implementation and a copy of its attributes, in a stable order."""
    seen: dict[int, object] = {}

    def add(config: object) -> None:
        if config is None or id(config) in seen or not hasattr(config, "_attn_implementation"):
            return
        seen[id(config)] = config
        for key in getattr(config, "sub_configs", None) or ():
            add(getattr(config, key, None))

    for module in model.modules():
        add(getattr(module, "config", None))
    return [(id(c), c._attn_implementation, dict(vars(c))) for c in seen.values()]


def eager_reference(model: nn.Module, inputs: dict) -> object:
    """The model's output with output_attentions=True under eager attention, from a copy."""
    reference = copy.deepcopy(model)
    reference.set_attn_implementation("eager")
    with torch.no_grad():
        return reference(**inputs, output_attentions=True)


def execution_order(model: nn.Module, inputs: dict, paths: list[str]) -> list[str]:
    """The order in which the modules at ``paths`` run in a forward of a copy."""
    reference = copy.deepcopy(model)
    order: list[str] = []
    for path in paths:
        reference.get_submodule(path).register_forward_hook(lambda *_, p=path: order.append(p))
    with torch.no_grad():
        reference(**inputs)
    return order


def assert_same(got: list[torch.Tensor], expected: tuple) -> None:
    assert len(got) == len(expected) > 0
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    ("build", "inputs", "paths"),
    [
        (tm.gpt2, lambda: {"input_ids": tm.token_ids(2, 8)}, ["transformer.h.0.attn", "transformer.h.1.attn"]),
        (tm.llama, lambda: {"input_ids": tm.token_ids(2, 8)}, ["model.layers.0.self_attn", "model.layers.1.self_attn"]),
        (
            tm.bert,
            lambda: {"input_ids": tm.token_ids(2, 8), "attention_mask": torch.tensor([[1] * 8, [1] * 5 + [0] * 3])},
            ["bert.encoder.layer.0.attention.self", "bert.encoder.layer.1.attention.self"],
        ),
        (tm.vit, lambda: {"pixel_values": tm.images(2)}, ["vit.layers.0.attention", "vit.layers.1.attention"]),
    ],
    ids=["gpt2", "llama", "bert", "vit"],
)
def test_attention_equals_output_attentions_under_eager_on_a_model_left_on_sdpa(build, inputs, paths):
    model, inputs = build(), inputs()
    assert model.config._attn_implementation == "sdpa"
    configs, hooks = configs_state(model), hook_state(model)
    got = Explorer(model, inputs).attention()
    assert list(got) == paths
    assert_same(list(got.values()), eager_reference(model, inputs).attentions)
    assert configs_state(model) == configs
    assert hook_state(model) == hooks
    assert not model.training


@pytest.mark.parametrize(
    ("build", "inputs", "self_suffix", "cross_suffix"),
    [
        (tm.t5, {"input_ids": tm.token_ids(2, 8), "decoder_input_ids": tm.token_ids(2, 5, seed=3)}, ".0", ".1"),
        (
            tm.whisper,
            {"input_features": torch.randn(2, 16, 32), "decoder_input_ids": tm.token_ids(2, 5, seed=3)},
            ".self_attn",
            ".encoder_attn",
        ),
    ],
    ids=["t5", "whisper"],
)
def test_encoder_decoder_self_and_cross_attention_in_execution_order(build, inputs, self_suffix, cross_suffix):
    model = build()
    configs, hooks = configs_state(model), hook_state(model)
    got = Explorer(model, inputs).attention()
    expected = eager_reference(model, inputs)
    encoder = [k for k in got if "encoder." in k and "decoder." not in k]
    decoder_self = [k for k in got if "decoder." in k and k.endswith(self_suffix)]
    cross = [k for k in got if "decoder." in k and k.endswith(cross_suffix)]
    assert len(encoder) == len(decoder_self) == len(cross) == 2
    assert_same([got[k] for k in encoder], expected.encoder_attentions)
    assert_same([got[k] for k in decoder_self], expected.decoder_attentions)
    assert_same([got[k] for k in cross], expected.cross_attentions)
    assert list(got) == execution_order(model, inputs, list(got))
    assert list(got) == [encoder[0], encoder[1], decoder_self[0], cross[0], decoder_self[1], cross[1]]
    assert got[cross[0]].shape[-2:] == (5, got[encoder[0]].shape[-1])
    assert configs_state(model) == configs
    assert hook_state(model) == hooks


def clip_inputs() -> dict:
    return {"input_ids": tm.token_ids(3, 8), "pixel_values": tm.images(2)}


def test_clip_both_towers_in_execution_order():
    model, inputs = tm.clip(), clip_inputs()
    got = Explorer(model, inputs).attention()
    expected = eager_reference(model, inputs)
    vision = [k for k in got if k.startswith("vision_model.")]
    text = [k for k in got if k.startswith("text_model.")]
    assert vision + text == list(got) == execution_order(model, inputs, list(got))
    assert_same([got[k] for k in vision], expected.vision_model_output.attentions)
    assert_same([got[k] for k in text], expected.text_model_output.attentions)
    assert got[text[0]].shape == (3, 4, 8, 8)


def test_a_clip_with_mixed_implementations_comes_back_exactly_as_found():
    model, inputs = tm.clip(), clip_inputs()
    model.set_attn_implementation({"text_config": "eager", "vision_config": "sdpa"})
    assert (model.config.text_config._attn_implementation, model.config.vision_config._attn_implementation) == (
        "eager",
        "sdpa",
    )
    configs, hooks = configs_state(model), hook_state(model)
    got = Explorer(model, inputs).attention()
    assert len(got) == 4
    assert configs_state(model) == configs
    assert model.text_model.config._attn_implementation == "eager"
    assert model.vision_model.config._attn_implementation == "sdpa"
    assert hook_state(model) == hooks


def test_a_model_subclass_defined_in_a_notebook_works_and_comes_back_as_found():
    class Tagged(transformers.GPT2LMHeadModel):  # as a notebook defines one: a class of __main__, a new forward
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    torch.manual_seed(0)
    model = Tagged(tm.gpt2().config).eval()
    inputs = {"input_ids": tm.token_ids(1, 6)}
    configs, hooks = configs_state(model), hook_state(model)
    got = Explorer(model, inputs).attention()
    assert list(got) == ["transformer.h.0.attn", "transformer.h.1.attn"]
    assert_same(list(got.values()), eager_reference(model, inputs).attentions)
    assert configs_state(model) == configs
    assert model.config._attn_implementation == "sdpa"
    assert hook_state(model) == hooks


def test_configs_hook_dicts_and_the_fast_path_flag_are_restored_when_the_forward_raises():
    model = tm.gpt2()

    def boom(*_):
        raise RuntimeError("boom in the second block")

    model.transformer.h[1].mlp.register_forward_hook(boom)  # a hook of the user's own, outside any explorer
    configs, hooks = configs_state(model), hook_state(model)
    fast_path = torch.backends.mha.get_fastpath_enabled()
    with pytest.raises(RuntimeError, match="boom in the second block"):
        Explorer(model).attention({"input_ids": tm.token_ids()})
    assert configs_state(model) == configs
    assert model.config._attn_implementation == "sdpa"
    assert hook_state(model) == hooks
    assert torch.backends.mha.get_fastpath_enabled() == fast_path
    assert not model.training


def test_a_config_that_refuses_eager_says_why_and_what_to_do():
    model = tm.gpt2()

    class FlashOnly(type(model.config)):
        @property
        def _attn_implementation(self):
            return "flash_attention_2"

        @_attn_implementation.setter
        def _attn_implementation(self, value):
            pass

    model.config.__class__ = FlashOnly
    configs = configs_state(model)
    with pytest.raises(ValueError, match="flash_attention_2") as error:
        Explorer(model).attention({"input_ids": tm.token_ids()})
    assert "'(model)'" in str(error.value) and "attn_implementation='eager'" in str(error.value)
    assert configs_state(model) == configs


def test_a_module_that_computes_no_probabilities_under_eager_is_named():
    class Config:  # a transformers-like config, duck-typed
        _attn_implementation = "sdpa"

    class KernelAttention(nn.Module):
        def forward(self, x):
            return x, None  # a fused kernel of its own: no probabilities, whatever the config says

    class Model(nn.Module):
        _can_record_outputs: ClassVar[dict] = {"attentions": KernelAttention}

        def __init__(self):
            super().__init__()
            self.config = Config()
            self.attn = KernelAttention()

        def forward(self, x):
            return self.attn(x)[0]

    model = Model()
    with pytest.raises(ValueError, match=r"'attn' \(KernelAttention\) returned no attention probabilities"):
        Explorer(model).attention(torch.randn(1, 3))
    assert vars(model.config) == {} and model.config._attn_implementation == "sdpa"


def test_a_forward_hook_on_an_attention_module_under_sdpa_says_its_probabilities_are_none():
    model = tm.gpt2()
    ex = Explorer(model, {"input_ids": tm.token_ids()})
    note = ex.attach("transformer.h.0.attn").note
    assert "not computed under sdpa" in note and "output.1" in note and "ex.attention()" in note
    assert ex.attach("transformer.h.0.mlp").note is None
    assert ex.attach("transformer.h.0.attn", "backward").note is None  # it is about the output a forward hook sees
    t5 = Explorer(tm.t5(), {"input_ids": tm.token_ids(), "decoder_input_ids": tm.token_ids()})
    assert "(the last element of its output)" in t5.attach("encoder.block.0.layer.0").note  # output.1: position bias
    ex.run()  # the hook fires: the note stays true
    assert ex.hooks[0].note == note
    record = ex.captures["transformer.h.0.attn"]["forward"][-1]
    assert "output.0" in record.tensors and "output.1" not in record.tensors  # the probabilities: None


def test_no_note_on_an_attention_module_that_runs_eager():
    model = tm.clip()
    model.set_attn_implementation({"text_config": "eager", "vision_config": "sdpa"})
    ex = Explorer(model, clip_inputs())
    assert ex.attach("text_model.encoder.layers.0.self_attn").note is None
    assert "sdpa" in ex.attach("vision_model.encoder.layers.0.self_attn").note


def older_model(name: str) -> nn.Module:
    """A model of the older kind, which passes output_attentions down and declares nothing to record."""
    torch.manual_seed(0)
    if name == "bloom":  # eager by default
        return transformers.BloomForCausalLM(
            transformers.BloomConfig(n_layer=2, hidden_size=16, n_head=2, vocab_size=tm.VOCAB)
        ).eval()
    if name == "falcon":  # sdpa by default, and refuses set_attn_implementation
        return transformers.FalconForCausalLM(
            transformers.FalconConfig(num_hidden_layers=2, hidden_size=16, num_attention_heads=2, vocab_size=tm.VOCAB)
        ).eval()
    config = transformers.DebertaV2Config(  # attention.self inside attention: both named …Attention
        num_hidden_layers=2,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=tm.VOCAB,
        max_position_embeddings=32,
    )
    return transformers.DebertaV2ForSequenceClassification(config).eval()


@pytest.mark.parametrize(
    ("name", "paths"),
    [
        ("bloom", ["transformer.h.0.self_attention", "transformer.h.1.self_attention"]),
        ("falcon", ["transformer.h.0.self_attention", "transformer.h.1.self_attention"]),
        ("debertav2", ["deberta.encoder.layer.0.attention.self", "deberta.encoder.layer.1.attention.self"]),
    ],
)
def test_an_older_model_called_with_output_attentions_gives_them_keyed_by_the_module_that_computed_them(name, paths):
    model = older_model(name)
    inputs = {"input_ids": tm.token_ids(2, 6)}
    configs, hooks = configs_state(model), hook_state(model)
    got = Explorer(model, inputs).attention()
    assert list(got) == paths
    reference = copy.deepcopy(model)
    reference.config._attn_implementation = "eager"  # Falcon refuses set_attn_implementation
    with torch.no_grad():
        expected = reference(**inputs, output_attentions=True).attentions
    assert_same(list(got.values()), expected)
    assert configs_state(model) == configs
    assert hook_state(model) == hooks


def test_falcon_left_on_sdpa_gives_the_causal_probabilities_of_eager_attention():
    model = older_model("falcon")
    assert model.config._attn_implementation == "sdpa"
    weights = Explorer(model, {"input_ids": tm.token_ids(1, 6)}).attention()["transformer.h.0.self_attention"]
    assert torch.all(weights.triu(1) == 0)  # no weight on later tokens (sdpa's boolean mask would add 0 or 1)


def test_a_transformers_model_that_declares_no_attentions_and_returns_none_says_what_was_looked_for():
    class Config:  # a transformers-like config, duck-typed
        _attn_implementation = "sdpa"

    class OldStyle(nn.Module):  # passes output_attentions down, but returns no attentions
        def __init__(self):
            super().__init__()
            self.config = Config()
            self.dense = nn.Linear(3, 3)

        def forward(self, x, output_attentions=False):
            return self.dense(x)

    with pytest.raises(ValueError, match="found no attention in OldStyle") as error:
        Explorer(OldStyle()).attention(torch.randn(1, 3))
    assert "output_attentions=True" in str(error.value) and "softmax over keys" in str(error.value)
    assert vars(OldStyle().config) == {}
