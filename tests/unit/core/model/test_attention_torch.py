"""ex.attention() on plain torch models: nn.MultiheadAttention asked for per-head weights for that run only
(fast path off, its caller given what it asked for), the examples' DigitsViT, and the errors a user can meet."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.examples.vit import DigitsViT
from tests.conftest import hook_state


class HandWritten(nn.Module):
    """An MHA called as a user writes it: averaged weights by default (``need_weights``), returned."""

    def __init__(self, need_weights: bool = True) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x: torch.Tensor) -> tuple:
        return self.mha(x, x, x, need_weights=self.need_weights)


def mha_state(mha: nn.MultiheadAttention) -> dict:
    return {k: v for k, v in vars(mha).items() if not k.startswith("_")} | {"modules": dict(mha._modules)}


def slow_path_weights(mha: nn.MultiheadAttention, *args, **kwargs) -> torch.Tensor:
    """Per-head weights from MHA's own forward, on the path that computes them (the fast path off)."""
    enabled = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            return mha(*args, need_weights=True, average_attn_weights=False, **kwargs)[1]
    finally:
        torch.backends.mha.set_fastpath_enabled(enabled)


@pytest.mark.parametrize("need_weights", [True, False], ids=["averaged", "none"])
def test_mha_gives_per_head_weights_and_its_caller_what_it_asked_for(need_weights):
    torch.manual_seed(0)
    model = HandWritten(need_weights).eval()
    x = torch.randn(2, 5, 16)
    seen = []
    model.register_forward_hook(lambda _m, _a, output: seen.append(output))  # what the model returned in the run
    mha_saw = []
    model.mha.register_forward_hook(lambda _m, _a, output: mha_saw.append(output[1]))  # the user's own hook on it
    attrs, hooks, fast_path = mha_state(model.mha), hook_state(model), torch.backends.mha.get_fastpath_enabled()
    ex = Explorer(model, x)
    seen.clear(), mha_saw.clear()  # the explorer's shape probe ran the model once
    got = ex.attention()
    assert len(seen) == len(mha_saw) == 1
    assert (mha_saw[0] is None) == (seen[0][1] is None)  # a hook of the model's own sees what the caller asked for
    assert mha_saw[0] is None or torch.equal(mha_saw[0], seen[0][1])
    assert list(got) == ["mha"]
    assert got["mha"].shape == (2, 4, 5, 5)
    assert torch.equal(got["mha"], slow_path_weights(model.mha, x, x, x))
    assert torch.allclose(got["mha"].sum(-1), torch.ones(2, 4, 5))
    with torch.no_grad():
        asked = model.mha(x, x, x, need_weights=need_weights)
    if need_weights:  # averaged over heads, as the caller asked
        assert seen[0][1].shape == (2, 5, 5)
        assert torch.allclose(seen[0][1], got["mha"].mean(dim=1))
        assert torch.allclose(seen[0][1], asked[1], atol=1e-6)
    else:
        assert seen[0][1] is None
    assert torch.allclose(seen[0][0], asked[0], atol=1e-6)
    assert mha_state(model.mha) == attrs
    assert hook_state(model) == hooks
    assert torch.backends.mha.get_fastpath_enabled() == fast_path


def test_mha_attributes_hook_dicts_and_the_fast_path_flag_are_as_found_when_the_forward_raises():
    class Raising(HandWritten):
        def forward(self, x: torch.Tensor) -> tuple:
            self.mha(x, x, x, need_weights=False)
            raise RuntimeError("after the attention")

    torch.manual_seed(0)
    model = Raising().eval()
    attrs, hooks, fast_path = mha_state(model.mha), hook_state(model), torch.backends.mha.get_fastpath_enabled()
    with pytest.raises(RuntimeError, match="after the attention"):
        Explorer(model).attention(torch.randn(2, 5, 16))
    assert mha_state(model.mha) == attrs
    assert hook_state(model) == hooks
    assert torch.backends.mha.get_fastpath_enabled() == fast_path
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        assert model.mha(x, x, x, need_weights=False)[1] is None  # asked no weights: gets none, as before


class CausalEncoder(nn.Module):
    """nn.TransformerEncoderLayer with a causal mask and the is_causal hint (MHA is called with need_weights=False,
    where the hint alone would do without the mask)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.layer(x, src_mask=mask, is_causal=True)


def test_a_transformer_encoder_layer_with_a_causal_mask_in_eval_without_grad():
    torch.manual_seed(0)
    model = CausalEncoder().eval()
    x = torch.randn(3, 6, 16)
    attrs = mha_state(model.layer.self_attn)
    with torch.no_grad():
        expected_output = model(x)
    got = Explorer(model, x).attention()
    assert list(got) == ["layer.self_attn"]
    weights = got["layer.self_attn"]
    mask = nn.Transformer.generate_square_subsequent_mask(6)
    assert torch.equal(weights, slow_path_weights(model.layer.self_attn, x, x, x, attn_mask=mask))
    assert torch.all(weights.triu(1) == 0)  # causal: no weight on later tokens
    assert torch.allclose(weights.sum(-1), torch.ones(3, 4, 6))
    assert mha_state(model.layer.self_attn) == attrs
    with torch.no_grad():
        assert torch.allclose(model(x), expected_output)


def test_a_transformer_encoder_layer_which_asks_for_no_weights_gives_them():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).eval()
    x = torch.randn(3, 6, 16)
    got = Explorer(layer, x).attention()  # the layer calls self_attn with need_weights=False
    assert torch.equal(got["self_attn"], slow_path_weights(layer.self_attn, x, x, x))


def test_an_unbatched_call_gives_one_item_and_a_second_call_its_own_key():
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.mha(x, x, x)[0]
            return self.mha(y, y, y, None, False)[0]  # need_weights=False, positionally

    torch.manual_seed(0)
    model = Twice().eval()
    x = torch.randn(5, 8)  # unbatched: (L, E)
    got = Explorer(model, x).attention()
    assert list(got) == ["mha", "mha#2"]
    assert got["mha"].shape == got["mha#2"].shape == (1, 2, 5, 5)
    assert torch.equal(got["mha"][0], slow_path_weights(model.mha, x, x, x))


def test_digits_vit_attention_is_each_blocks_softmax():
    torch.manual_seed(0)
    model = DigitsViT().eval()
    x = torch.randn(2, 1, 32, 32)
    expected = []
    handles = [model.blocks[i].attn.softmax.register_forward_hook(lambda *a: expected.append(a[2])) for i in (0, 1)]
    with torch.no_grad():
        model(x)
    for handle in handles:
        handle.remove()
    hooks = hook_state(model)
    got = Explorer(model, x).attention()
    assert list(got) == ["blocks.0.attn", "blocks.1.attn"]
    for a, b in zip(got.values(), expected, strict=True):
        assert a.shape == (2, 4, 65, 65)
        assert torch.equal(a, b)
    assert hook_state(model) == hooks


def test_the_explorers_own_hooks_record_nothing_and_the_model_is_left_as_found():
    torch.manual_seed(0)
    model = DigitsViT().train()
    ex = Explorer(model, torch.randn(1, 1, 32, 32))
    ex.attach("blocks.0.attn.softmax")
    ex.attention()
    assert ex.step == 0 and not ex.captures.get("blocks.0.attn.softmax", {}).get("forward")
    assert model.training and all(m.training for m in model.modules())
    assert all(p.grad is None for p in model.parameters())


def test_a_model_without_attention_names_what_was_looked_for(cnn, image):
    with pytest.raises(ValueError, match="found no attention in SmallCNN") as error:
        Explorer(cnn, image).attention()
    for looked_for in ("_can_record_outputs", "nn.MultiheadAttention", "nn.Softmax"):
        assert looked_for in str(error.value)
    assert "declares no attentions" not in str(error.value)  # no transformers model here


def test_no_example_inputs_and_no_inputs_says_to_pass_them():
    with pytest.raises(ValueError, match="pass them"):
        Explorer(HandWritten()).attention()


def test_attention_modules_that_do_not_run_are_named():
    class Unused(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2)
            self.linear = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x)

    with pytest.raises(ValueError, match=r"found attention modules \('mha'\) but none of them ran"):
        Explorer(Unused(), torch.randn(2, 8)).attention()
