"""The logit lens reads each block through what the forward runs between the last block and the output embedding,
found in its forward by execution order and data flow: OPT's final norm registered before its layers, OPT-350m's
project_out, T5's scale without a module; a forward that does more without a module is refused, not misread. What the
forward does to the head's logits before returning them (Marian's final_logits_bias, Gemma 2's soft cap) is replayed
on every row."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import hook_state

transformers = tm.transformers


def opt(projection: int = 32, norm_before: bool = True) -> nn.Module:
    """An OPT language model; ``projection`` below the width 32 is OPT-350m's layout (project_in, project_out), and
    ``norm_before=False`` its post-norm blocks without a final norm. The final norm gets random affine weights, so
    that skipping it changes the predictions."""
    config = transformers.OPTConfig(
        num_hidden_layers=2,
        hidden_size=32,
        ffn_dim=64,
        num_attention_heads=4,
        vocab_size=tm.VOCAB,
        max_position_embeddings=64,
        word_embed_proj_dim=projection,
        do_layer_norm_before=norm_before,
    )
    torch.manual_seed(0)
    model = transformers.OPTForCausalLM(config).eval()
    norm = model.model.decoder.final_layer_norm
    if norm is not None:
        with torch.no_grad():
            norm.weight.normal_(0, 2)
            norm.bias.normal_(0, 2)
    return model


def by_hand(model: nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each OPT block's output through the final norm (when there is one), project_out (when there is one) and
    lm_head, with the model's own logits."""
    decoder = model.model.decoder
    hidden = []
    handles = [
        b.register_forward_hook(lambda m, a, o: hidden.append(o[0] if isinstance(o, tuple) else o))
        for b in decoder.layers
    ]
    try:
        with torch.no_grad():
            logits = model(ids).logits
            tails = [m for m in (decoder.final_layer_norm, decoder.project_out) if m is not None]
            rows = []
            for h in hidden:
                for m in tails:
                    h = m(h)
                rows.append(model.lm_head(h))
    finally:
        for h in handles:
            h.remove()
    return torch.stack(rows), logits


@pytest.mark.parametrize(
    ("projection", "norm_before"),
    [(32, True), (16, True), (16, False)],
    ids=["opt", "opt-projected", "opt-350m-layout"],
)
def test_opts_rows_go_through_its_final_norm_and_project_out_and_the_last_block_row_is_its_own_top_1(
    projection, norm_before
):
    model, ids = opt(projection, norm_before), tm.token_ids(batch=2, length=9)
    ex = Explorer(model, ids)
    before = hook_state(model)
    lens = ex.logit_lens(top_k=3)
    rows, logits = by_hand(model, ids)
    assert lens["layers"] == ["model.decoder.layers.0", "model.decoder.layers.1", "output"]
    probs, top = rows.softmax(-1).topk(3, dim=-1)
    assert torch.equal(lens["ids"][:2], top)
    torch.testing.assert_close(lens["probs"][:2], probs)
    assert torch.equal(lens["ids"][1, ..., 0], logits.argmax(-1))  # at every position
    assert hook_state(model) == before
    ex.close()


@pytest.mark.parametrize("build", [tm.gpt2, tm.llama], ids=["gpt2", "llama"])
def test_the_last_block_row_is_the_models_own_top_k_on_gpt2_and_llama(build):
    model, ids = build(layers=3), tm.token_ids(batch=2, length=7)
    with torch.no_grad():
        for module in model.modules():  # final norms with weights that matter
            if isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("RMSNorm"):
                module.weight.normal_(0, 2)
    lens = Explorer(model, ids).logit_lens(top_k=4)
    assert torch.equal(lens["ids"][-2], lens["ids"][-1])
    torch.testing.assert_close(lens["probs"][-2], lens["probs"][-1])


class Residual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.linear(x)


class Squashed(nn.Module):
    """Blocks, a final norm, then a tanh without a module before the head it declares."""

    def __init__(self, vocab: int = 11, width: int = 8, squash: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Residual(width) for _ in range(2))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        self.squash = squash

    def get_output_embeddings(self) -> nn.Module:
        return self.head

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return self.head(x.tanh() if self.squash else x)


def test_a_forward_that_does_more_between_the_last_block_and_the_head_without_a_module_is_refused():
    torch.manual_seed(0)
    ids = torch.tensor([[1, 2, 3, 4]])
    ex = Explorer(Squashed().eval(), ids)
    with pytest.raises(
        ValueError,
        match=r"cannot reproduce what runs between the last block 'blocks.1' and the "
        r"output embedding 'head': .*\('norm'\) .*pass unembed=",
    ):
        ex.logit_lens()
    ex.close()
    plain = Squashed(squash=False).eval()
    lens = Explorer(plain, ids).logit_lens(top_k=2)
    assert torch.equal(lens["ids"][1], lens["ids"][2])  # without the tanh: the norm, then the head


def marian() -> nn.Module:
    """A Marian translation model whose final_logits_bias (added after lm_head, zero at init) is not zero, as in
    every trained checkpoint."""
    config = transformers.MarianConfig(
        encoder_layers=2,
        decoder_layers=2,
        d_model=32,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        vocab_size=tm.VOCAB,
        pad_token_id=0,
        decoder_start_token_id=1,
    )
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 3)
    return model


def gemma2() -> nn.Module:
    """A Gemma 2 language model with a soft cap of its final logits low enough to change their probabilities."""
    config = transformers.Gemma2Config(
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        vocab_size=tm.VOCAB,
        final_logit_softcapping=1.5,
    )
    torch.manual_seed(0)
    return transformers.Gemma2ForCausalLM(config).eval()


@pytest.mark.parametrize(
    ("build", "inputs"),
    [
        (marian, lambda: {"input_ids": tm.token_ids(batch=2, length=6), "decoder_input_ids": tm.token_ids(2, 4)}),
        (gemma2, lambda: tm.token_ids(batch=2, length=7)),
    ],
    ids=["marian-logits-bias", "gemma2-softcap"],
)
def test_what_the_forward_does_to_the_heads_logits_is_applied_to_every_row(build, inputs):
    model, x = build(), inputs()
    ex = Explorer(model, x)
    before = hook_state(model)
    lens = ex.logit_lens(top_k=4)
    assert torch.equal(lens["ids"][-2], lens["ids"][-1])  # the last block's row is the model's own output
    torch.testing.assert_close(lens["probs"][-2], lens["probs"][-1])
    assert hook_state(model) == before
    ex.close()


class SideLogits(Squashed):
    """Calls its head, then returns logits made another way (the head's weight applied by hand, halved)."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.blocks[1](self.blocks[0](self.embed(ids))))
        self.head(x)
        return nn.functional.linear(x, self.head.weight) / 2


def test_logits_not_made_from_the_heads_output_are_refused():
    torch.manual_seed(0)
    ex = Explorer(SideLogits().eval(), torch.tensor([[1, 2, 3, 4]]))
    refused = r"logits are not made from what its output embedding 'head' returned.*unembed="
    with pytest.raises(ValueError, match=refused):
        ex.logit_lens()
    ex.close()


class CappedInPlace(Squashed):
    """Caps its head's logits in place (``tanh`` through ``div_`` and ``mul_``), so they stay the head's tensor."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.blocks[1](self.blocks[0](self.embed(ids))))
        logits = self.head(x)
        return logits.div_(0.5).tanh_().mul_(0.5)


def test_in_place_ops_on_the_heads_output_are_replayed_on_every_row():
    torch.manual_seed(0)
    model, ids = CappedInPlace(squash=False).eval(), torch.tensor([[1, 2, 3, 4, 5]])
    lens = Explorer(model, ids).logit_lens(top_k=3)
    with torch.no_grad():
        hidden = model.norm(model.blocks[1](model.blocks[0](model.embed(ids))))
        probs, top = (model.head(hidden) / 0.5).tanh().mul(0.5).softmax(-1).topk(3, dim=-1)
    assert torch.equal(lens["ids"][1], top) and torch.equal(lens["ids"][2], top)
    torch.testing.assert_close(lens["probs"][1], probs)
