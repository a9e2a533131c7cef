"""ex.logit_lens() against a few lines of torch on GPT-2 and Llama, with labels, a custom unembed and bad inputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import hook_state


def reference_lens(model: nn.Module, blocks: nn.ModuleList, norm: nn.Module, ids: torch.Tensor, k: int):
    """The lens written by hand: hidden states from block hooks, final norm, lm_head, softmax, top-k."""
    hidden = []
    handles = [
        b.register_forward_hook(lambda m, a, o: hidden.append(o[0] if isinstance(o, tuple) else o)) for b in blocks
    ]
    with torch.no_grad():
        logits = model(ids).logits
        rows = [model.lm_head(norm(h)) for h in hidden] + [logits]
    for h in handles:
        h.remove()
    probs, top = torch.stack(rows).softmax(-1).topk(k, dim=-1)
    return top, probs, logits


@pytest.mark.parametrize(
    ("build", "blocks", "norm"),
    [
        (tm.gpt2, lambda m: m.transformer.h, lambda m: m.transformer.ln_f),
        (tm.llama, lambda m: m.model.layers, lambda m: m.model.norm),
    ],
    ids=["gpt2", "llama"],
)
def test_the_lens_equals_block_outputs_through_the_final_norm_and_unembedding(build, blocks, norm):
    model = build(layers=3)
    ids = tm.token_ids(batch=2, length=7)
    ex = Explorer(model, ids)
    hooks = hook_state(model)
    lens = ex.logit_lens(top_k=4)
    top, probs, logits = reference_lens(model, blocks(model), norm(model), ids, 4)
    prefix = "transformer.h" if build is tm.gpt2 else "model.layers"
    assert lens["layers"] == [f"{prefix}.0", f"{prefix}.1", f"{prefix}.2", "output"]
    assert lens["ids"].shape == lens["probs"].shape == (4, 2, 7, 4)
    assert torch.equal(lens["ids"], top)
    torch.testing.assert_close(lens["probs"], probs)
    assert torch.equal(lens["ids"][-1, ..., 0], logits.argmax(-1))  # the output row: the model's top predictions
    assert "labels" not in lens  # no tokenizer, no labels
    assert hook_state(model) == hooks


def test_labels_are_the_tokenizers_strings_of_the_ids():
    tokenizer = tm.tokenizer()
    model = tm.gpt2(vocab=len(tokenizer))
    ids = torch.tensor([tokenizer.convert_tokens_to_ids(["the", "cat", "sat", "on"])])
    lens = Explorer(model, ids, tokenizer=tokenizer).logit_lens(top_k=2)
    labels = lens["labels"]
    assert (len(labels), len(labels[0]), len(labels[0][0]), len(labels[0][0][0])) == (3, 1, 4, 2)
    for layer in range(3):
        for t in range(4):
            assert labels[layer][0][t] == tokenizer.convert_ids_to_tokens(lens["ids"][layer, 0, t].tolist())


def test_the_model_is_left_as_found_and_the_explorers_hooks_record_nothing():
    model = tm.gpt2().train()
    ex = Explorer(model, tm.token_ids())
    ex.attach("transformer.h.0")
    ex.logit_lens()
    assert ex.step == 0 and not ex.captures.get("transformer.h.0", {}).get("forward")
    assert all(m.training for m in model.modules())
    assert all(p.grad is None for p in model.parameters())


def test_given_inputs_are_read_instead_of_the_example():
    model = tm.gpt2()
    ex = Explorer(model, tm.token_ids(length=5))
    lens = ex.logit_lens(tm.token_ids(batch=3, length=9, seed=7), top_k=1)
    assert lens["ids"].shape == (3, 3, 9, 1)


class Residual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.linear(x)


class Stack(nn.Module):
    """A hand-written decoder: embedding, blocks in a ModuleList, a final LayerNorm, and a head it does not declare."""

    def __init__(self, vocab: int = 11, width: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Residual(width) for _ in range(2))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def test_a_model_without_an_output_embedding_asks_for_unembed_and_uses_it():
    torch.manual_seed(0)
    model = Stack().eval()
    ids = torch.tensor([[1, 2, 3]])
    ex = Explorer(model, ids)
    with pytest.raises(ValueError, match="pass unembed=callable"):
        ex.logit_lens()
    lens = ex.logit_lens(unembed=lambda h: model.head(model.norm(h)), top_k=3)
    assert lens["layers"] == ["blocks.0", "blocks.1", "output"]
    with torch.no_grad():
        expected = model.head(model.norm(model.blocks[0](model.embed(ids)))).softmax(-1).topk(3)
    assert torch.equal(lens["ids"][0], expected.indices)
    assert torch.equal(lens["ids"][1], lens["ids"][2])  # the last block through the same projection: the output


def test_a_model_with_no_blocks_and_a_bad_top_k_are_refused(cnn, image):
    with pytest.raises(ValueError, match="no nn.ModuleList of blocks"):
        Explorer(cnn, image).logit_lens(unembed=lambda h: h)
    ex = Explorer(tm.gpt2(), tm.token_ids())
    with pytest.raises(ValueError, match="top_k must be a positive int"):
        ex.logit_lens(top_k=0)
    with pytest.raises(ValueError, match="exceeds the vocabulary of 96"):
        ex.logit_lens(top_k=97)


def test_an_encoder_decoders_rows_are_its_decoders_blocks_through_its_final_norm_and_t5s_scale():
    model = tm.t5()
    inputs = {"input_ids": tm.token_ids(length=5), "decoder_input_ids": tm.token_ids(length=4, seed=3)}
    lens = Explorer(model, inputs).logit_lens(top_k=3)
    assert lens["layers"] == ["decoder.block.0", "decoder.block.1", "output"]
    hidden = []
    handles = [b.register_forward_hook(lambda m, a, o: hidden.append(o[0])) for b in model.decoder.block]
    with torch.no_grad():
        model(**inputs)
        # T5 scales the decoder's output by d_model ** -0.5 before lm_head, without a module
        scale = model.config.d_model**-0.5
        rows = [model.lm_head(model.decoder.final_layer_norm(h) * scale) for h in hidden]
    for h in handles:
        h.remove()
    probs, top = torch.stack(rows).softmax(-1).topk(3, dim=-1)
    assert torch.equal(lens["ids"][:2], top) and torch.equal(lens["ids"][1], lens["ids"][2])
    torch.testing.assert_close(lens["probs"][:2], probs)
