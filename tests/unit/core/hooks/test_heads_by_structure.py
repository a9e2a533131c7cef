"""ablate_heads finds the output projection by structure, in a forward of the example inputs: the Linear fed by the
heads' context, whatever its name (DistilBERT's out_lin, BLIP's projection), checked against a hand-written zeroing of
those heads' slices of the context; without example inputs the names are a hint, and the refusal says what to give."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import hook_state

transformers = tm.transformers


def distilbert() -> nn.Module:
    config = transformers.DistilBertConfig(
        n_layers=2, dim=32, hidden_dim=64, n_heads=4, vocab_size=tm.VOCAB, max_position_embeddings=64
    )
    torch.manual_seed(0)
    return transformers.DistilBertForSequenceClassification(config).eval()


def blip_vision() -> nn.Module:
    config = transformers.BlipVisionConfig(
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
        initializer_range=0.2,  # its default (1e-10) leaves every output near zero
    )
    torch.manual_seed(0)
    return transformers.BlipVisionModel(config).eval()


def first_output(out) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out[0]


def zeroed_by_hand(model: nn.Module, inputs, projection: nn.Module, heads: list[int], dim: int) -> torch.Tensor:
    """The model's output with those heads' slices of the projection's input (the context) set to zero."""

    def zero(module: nn.Module, args: tuple) -> tuple:
        context = args[0].clone()
        for h in heads:
            context[..., h * dim : (h + 1) * dim] = 0
        return (context, *args[1:])

    handle = projection.register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            return first_output(model(inputs))
    finally:
        handle.remove()


@pytest.mark.parametrize(
    ("build", "inputs", "attention", "projection"),
    [
        (distilbert, tm.token_ids, "distilbert.transformer.layer.1.attention", "out_lin"),
        (blip_vision, tm.images, "encoder.layers.0.self_attn", "projection"),
    ],
    ids=["distilbert", "blip"],
)
def test_ablate_heads_zeroes_the_heads_context_before_a_projection_of_any_name(build, inputs, attention, projection):
    model, x = build(), inputs(batch=2)
    with torch.no_grad():
        clean = first_output(model(x))
    before = hook_state(model)
    ex = Explorer(model, x)
    assert ex.head_count(attention) == 4
    info = ex.attach(attention, "forward", edit=("ablate_heads", [0, 2]))
    with torch.no_grad():
        edited = first_output(model(x))
    assert info.last_error is None
    ex.close()
    expected = zeroed_by_hand(model, x, model.get_submodule(f"{attention}.{projection}"), [0, 2], 8)
    torch.testing.assert_close(edited, expected)
    assert not torch.allclose(edited, clean)  # it changed something
    assert hook_state(model) == before


def test_without_example_inputs_a_projection_of_another_name_is_refused_with_what_to_give():
    model = distilbert()
    with (
        Explorer(model) as ex,
        pytest.raises(ValueError, match=r"no output projection found; .*: give the explorer example_inputs"),
    ):
        ex.attach("distilbert.transformer.layer.0.attention", "forward", edit=("ablate_heads", [1]))
    with Explorer(model) as ex:
        assert ex.head_count("distilbert.transformer.layer.0.attention") is None
        assert ex.head_count("distilbert.transformer.layer.0.ffn") is None  # no heads at all


class PreNormAttention(nn.Module):
    """Attention that normalizes its input, projects it with a Linear named like an output projection ("proj"), and
    projects the heads' context with one named "mix": the probe goes by what feeds them, not by their names."""

    def __init__(self, width: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.num_heads, self.head_dim = heads, width // heads
        self.norm = nn.LayerNorm(width)
        self.proj = nn.Linear(width, 3 * width)
        self.mix = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, e = x.shape
        q, k, v = self.proj(self.norm(x)).reshape(n, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        context = torch.softmax(q @ k.transpose(-2, -1) / self.head_dim**0.5, dim=-1) @ v
        return self.mix(context.transpose(1, 2).reshape(n, t, e))


def test_the_probe_takes_the_linear_fed_by_the_context_over_one_named_like_a_projection():
    torch.manual_seed(0)
    model = nn.Sequential(PreNormAttention()).eval()
    x = torch.randn(2, 5, 16)
    ex = Explorer(model, x)
    ex.attach("0", "forward", edit=("ablate_heads", [3]))
    with torch.no_grad():
        edited = model(x)
    ex.close()
    torch.testing.assert_close(edited, zeroed_by_hand(model, x, model[0].mix, [3], 4))
