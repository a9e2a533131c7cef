"""Attention rollout and gradient rollout through ``attribute``, against a few lines of torch on the probabilities
a model returns with ``output_attentions=True`` under eager attention (gradients by ``torch.autograd.grad``)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from hookwidgets.core import METHODS, Explorer, check_method
from hookwidgets.core.attribution.rollout import self_attention_stack
from hookwidgets.examples.vit import DigitsViT
from tests import transformer_models as tm
from tests.conftest import hook_state

ROLLOUTS = ("attention_rollout", "grad_attention_rollout")


def reference_rollout(attentions) -> torch.Tensor:
    """Abnar & Zuidema: 0.5·mean over heads + 0.5·I, rows renormalized, the last layer leftmost."""
    result = None
    for a in attentions:
        mixed = 0.5 * a.mean(1) + 0.5 * torch.eye(a.shape[-1])
        mixed = mixed / mixed.sum(-1, keepdim=True)
        result = mixed if result is None else mixed @ result
    return result


def reference_grad_rollout(attentions, grads) -> torch.Tensor:
    """Chefer et al.: R = I, then R += mean over heads of (∇A ⊙ A)⁺ · R, layer by layer in forward order."""
    result = torch.eye(attentions[0].shape[-1]).expand(attentions[0].shape[0], -1, -1)
    for a, g in zip(attentions, grads, strict=True):
        result = result + (g * a).clamp(min=0).mean(1) @ result
    return result


def eager_run(model: nn.Module, inputs: dict, score, attentions: str = "attentions"):
    """Rollout and gradient rollout of a copy of ``model`` under eager attention, from ``output_attentions=True``."""
    reference = copy.deepcopy(model)
    if getattr(type(reference), "_can_record_outputs", None):
        reference.set_attn_implementation("eager")
    else:  # an older model (Falcon) refuses set_attn_implementation
        reference.config._attn_implementation = "eager"
    output = reference(**inputs, output_attentions=True)
    found = getattr(output, attentions)
    grads = torch.autograd.grad(score(output), found)
    found = [a.detach() for a in found]
    return reference_rollout(found), reference_grad_rollout(found, grads)


def explorer(model: nn.Module, inputs) -> Explorer:
    return Explorer(model, example_inputs=inputs)


def top_last(output) -> torch.Tensor:
    logits = output.logits[:, -1]
    return logits.gather(1, logits.argmax(1, keepdim=True)).sum()


@pytest.mark.parametrize("build", [tm.gpt2, tm.llama], ids=["gpt2", "llama"])
def test_causal_text_models_give_the_last_row_of_both_rollouts(build):
    model, inputs = build(), {"input_ids": tm.token_ids(2, 7)}
    plain, weighted = eager_run(model, inputs, top_last)
    ex = explorer(model, inputs)
    got = ex.attribute(inputs, method="attention_rollout")
    assert got.shape == (2, 7)
    torch.testing.assert_close(got, plain[:, -1])
    assert (got.method, got.classes, got.target) == ("attention_rollout", None, "")
    assert got.layer in ("transformer.h.*.attn", "model.layers.*.self_attn")
    got = ex.attribute(inputs, method="grad_attention_rollout")
    torch.testing.assert_close(got, weighted[:, -1])
    logits = model(**inputs).logits[:, -1]
    assert got.classes == logits.argmax(1).tolist()
    assert (got.method, got.target) == ("grad_attention_rollout", "output.logits[:, -1] · top next token")
    assert model.config._attn_implementation == "sdpa"


def test_bert_gives_row_0_the_cls_token_and_explains_the_class_given():
    model = tm.bert()
    inputs = {"input_ids": tm.token_ids(2, 8), "attention_mask": torch.tensor([[1] * 8, [1] * 5 + [0] * 3])}
    plain, weighted = eager_run(model, inputs, lambda output: output.logits[:, 2].sum())
    ex = explorer(model, inputs)
    torch.testing.assert_close(ex.attribute(inputs, method="attention_rollout"), plain[:, 0])
    got = ex.attribute(inputs, 2, method="grad_attention_rollout")
    torch.testing.assert_close(got, weighted[:, 0])
    assert got.classes == [2, 2] and got.layer == "bert.encoder.layer.*.attention.self"


def test_an_older_model_that_returns_its_attentions_when_asked_keeps_them_in_the_graph():
    torch.manual_seed(0)
    config = tm.transformers.FalconConfig(num_hidden_layers=2, hidden_size=16, num_attention_heads=2, vocab_size=96)
    model, inputs = tm.transformers.FalconForCausalLM(config).eval(), {"input_ids": tm.token_ids(2, 6)}
    plain, weighted = eager_run(model, inputs, top_last)
    ex = explorer(model, inputs)
    torch.testing.assert_close(ex.attribute(inputs, method="attention_rollout"), plain[:, -1])
    got = ex.attribute(inputs, method="grad_attention_rollout")
    torch.testing.assert_close(got, weighted[:, -1])
    assert got.layer == "transformer.h.*.self_attention" and model.config._attn_implementation == "sdpa"


def test_a_position_picks_the_row_and_the_score_read_there():
    model, inputs = tm.gpt2(), {"input_ids": tm.token_ids(1, 6)}

    def at_2(output):
        logits = output.logits[:, 2]
        return logits.gather(1, logits.argmax(1, keepdim=True)).sum()

    plain, weighted = eager_run(model, inputs, at_2)
    ex = explorer(model, inputs)
    torch.testing.assert_close(ex.attribute(inputs, method="attention_rollout", position=2), plain[:, 2])
    got = ex.attribute(inputs, method="grad_attention_rollout", position=2)
    torch.testing.assert_close(got, weighted[:, 2])
    torch.testing.assert_close(ex.attribute(inputs, method="attention_rollout", position=-6), plain[:, 0])


def test_a_vit_gives_its_patches_as_a_grid_without_the_class_token():
    model, inputs = tm.vit(), {"pixel_values": tm.images(2)}
    plain, weighted = eager_run(model, inputs, lambda output: output.logits[:, 4].sum())
    ex = explorer(model, inputs)
    got = ex.attribute(inputs, method="attention_rollout")
    assert got.shape == (2, 4, 4)
    torch.testing.assert_close(got, plain[:, 0, 1:].reshape(2, 4, 4))
    got = ex.attribute(inputs, 4, method="grad_attention_rollout")
    torch.testing.assert_close(got, weighted[:, 0, 1:].reshape(2, 4, 4))


def test_digits_vit_with_softmax_modules_gives_an_8x8_grid():
    torch.manual_seed(0)
    model, image = DigitsViT().eval(), torch.randn(2, 1, 32, 32)
    reference = copy.deepcopy(model)
    found: list[torch.Tensor] = []
    for block in reference.blocks:
        block.attn.softmax.register_forward_hook(lambda _m, _a, out: found.append(out))
    output = reference(image)
    score = output.gather(1, output.argmax(1, keepdim=True)).sum()
    grads = torch.autograd.grad(score, found)
    found = [a.detach() for a in found]
    ex = explorer(model, image)
    got = ex.attribute(image, method="attention_rollout")
    assert got.shape == (2, 8, 8) and got.layer == "blocks.*.attn"
    torch.testing.assert_close(got, reference_rollout(found)[:, 0, 1:].reshape(2, 8, 8))
    got = ex.attribute(image, method="grad_attention_rollout")
    torch.testing.assert_close(got, reference_grad_rollout(found, grads)[:, 0, 1:].reshape(2, 8, 8))


class MultiheadModel(nn.Module):
    """Two ``nn.MultiheadAttention`` layers with residuals, called for no weights, and a head on token 0."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.layers = nn.ModuleList(nn.MultiheadAttention(8, 2, batch_first=True) for _ in range(2))
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for attention in self.layers:
            x = x + attention(x, x, x, need_weights=False)[0]
        return self.head(x[:, 0])


def by_hand(attention: nn.MultiheadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention written out: its output and its probabilities (N, heads, T, T)."""
    n, t, d = x.shape
    heads = attention.num_heads
    qkv = nn.functional.linear(x, attention.in_proj_weight, attention.in_proj_bias)
    q, k, v = qkv.reshape(n, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    probabilities = (q @ k.transpose(-2, -1) * (d // heads) ** -0.5).softmax(-1)
    return attention.out_proj((probabilities @ v).transpose(1, 2).reshape(n, t, d)), probabilities


def test_multihead_attention_returns_a_view_of_its_probabilities_and_still_gets_their_gradients():
    torch.manual_seed(0)
    model, x = MultiheadModel().eval(), torch.randn(2, 5, 4)
    hidden, found = model.embed(x), []
    for attention in model.layers:
        out, probabilities = by_hand(attention, hidden)
        hidden = hidden + out
        found.append(probabilities)
    score = model.head(hidden[:, 0])[:, 1].sum()
    grads = torch.autograd.grad(score, found)
    found = [a.detach() for a in found]
    ex = explorer(model, x)
    got = ex.attribute(x, method="attention_rollout")
    assert got.shape == (2, 5) and got.layer == "layers.*"
    torch.testing.assert_close(got, reference_rollout(found)[:, 0])
    got = ex.attribute(x, 1, method="grad_attention_rollout")
    torch.testing.assert_close(got, reference_grad_rollout(found, grads)[:, 0])


def test_an_encoder_decoder_rolls_out_its_encoder_self_attention():
    model = tm.t5()
    inputs = {"input_ids": tm.token_ids(1, 6), "decoder_input_ids": tm.token_ids(1, 4, seed=3)}
    plain, _ = eager_run(model, inputs, lambda output: output.logits.sum(), attentions="encoder_attentions")
    got = explorer(model, inputs).attribute(inputs, method="attention_rollout")
    assert got.shape == (1, 6) and got.layer == "encoder.block.*.layer.0"
    torch.testing.assert_close(got, plain[:, 0])


def test_a_stack_is_the_layers_alike_but_for_the_outermost_index_that_varies():
    a, b, c, d = (torch.full((1, 2, 3, 3), float(i)) for i in range(4))
    blocks = {
        "0.dec.block.0.layer.0": a,
        "0.dec.block.0.layer.1": b,
        "0.dec.block.1.layer.0": c,
        "0.dec.block.1.layer.1": d,
    }
    stack, layers = self_attention_stack(blocks)  # self- and cross-attention over equal lengths, in one block
    assert stack == "0.dec.block.*.layer.0" and [x[0, 0, 0, 0].item() for x in layers] == [0, 2]
    stack, layers = self_attention_stack({"albert.attention": a, "albert.attention#2": b, "head.attention": c})
    assert stack == "albert.attention" and len(layers) == 2  # a shared layer called twice
    stack, layers = self_attention_stack({"cross": torch.ones(1, 2, 3, 5), "enc.layers.0": a, "enc.layers.1": b})
    assert stack == "enc.layers.*" and len(layers) == 2


def test_the_model_its_configs_and_hooks_are_left_as_found_and_the_explorers_hooks_record_nothing():
    model, inputs = tm.gpt2(), {"input_ids": tm.token_ids(1, 5)}
    ex = explorer(model, inputs)
    ex.attach("transformer.h.0.attn", "forward")
    hooks, grads = hook_state(model), [p.grad for p in model.parameters()]
    for method in ROLLOUTS:
        ex.attribute(inputs, method=method)
    assert hook_state(model) == hooks and [p.grad for p in model.parameters()] == grads
    assert model.config._attn_implementation == "sdpa" and not model.training
    assert not ex.captures


def test_a_frozen_model_gives_the_same_gradient_rollout_and_stays_frozen():
    model, inputs = tm.gpt2(), {"input_ids": tm.token_ids(1, 5)}
    expected = explorer(model, inputs).attribute(inputs, method="grad_attention_rollout")
    model.transformer.requires_grad_(False)
    flags = [p.requires_grad for p in model.parameters()]
    got = explorer(model, inputs).attribute(inputs, method="grad_attention_rollout")
    torch.testing.assert_close(got, expected)
    assert [p.requires_grad for p in model.parameters()] == flags and not all(flags)


def test_the_names_are_attribution_methods():
    assert set(ROLLOUTS) <= set(METHODS)
    assert check_method("AttentionRollout") == "attention_rollout"
    assert check_method("grad-attention-rollout") == "grad_attention_rollout"


@pytest.mark.parametrize("method", ROLLOUTS)
def test_a_model_without_attention_is_refused_with_what_was_looked_for(method):
    model = nn.Sequential(nn.Linear(4, 3))
    with pytest.raises(ValueError, match=f"{method} rolls out attention probabilities, but .*found no attention"):
        explorer(model, torch.randn(2, 4)).attribute(torch.randn(2, 4), method=method)


@pytest.mark.parametrize("method", ROLLOUTS)
def test_a_position_out_of_range_names_the_sequence_length(method):
    model, inputs = tm.gpt2(), {"input_ids": tm.token_ids(1, 6)}
    with pytest.raises(IndexError, match=r"position 6 is out of range for a sequence of T=6 tokens"):
        explorer(model, inputs).attribute(inputs, method=method, position=6)


def test_a_layer_is_refused():
    model, inputs = tm.gpt2(), {"input_ids": tm.token_ids(1, 6)}
    with pytest.raises(ValueError, match="attention_rollout rolls out every self-attention layer.*takes no layer"):
        explorer(model, inputs).attribute(inputs, method="attention_rollout", layer="transformer.h.0")


def test_integrated_gradients_options_are_refused_by_a_rollout():
    model, inputs = tm.gpt2(), {"input_ids": tm.token_ids(1, 6)}
    with pytest.raises(ValueError, match="n_steps= apply to method='integrated_gradients'; attention_rollout takes"):
        explorer(model, inputs).attribute(inputs, method="attention_rollout", n_steps=10)
