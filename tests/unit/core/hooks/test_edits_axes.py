"""Edits along any axis: ablate with a dim, ablate_heads before the output projection, replace and mean_ablate;
each against a few lines of hand-written torch, on transformers models, nn.MultiheadAttention and a CNN."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.hooks.tensor_edits import apply_edits, normalize_edits
from hookwidgets.examples.vit import DigitsViT
from tests import transformer_models as tm
from tests.conftest import hook_state


def zero_heads(x: torch.Tensor, heads: list[int], dim: int) -> torch.Tensor:
    """The context ``x`` (..., heads·dim) with those heads' slices zeroed, by hand."""
    x = x.clone()
    for h in heads:
        x[..., h * dim : (h + 1) * dim] = 0
    return x


def reference(model: nn.Module, inputs, module: nn.Module, hook: str, fn) -> torch.Tensor:
    """The model's output with a plain torch hook ``fn`` of kind ``hook`` on ``module``."""
    register = module.register_forward_pre_hook if hook == "pre" else module.register_forward_hook
    handle = register(fn)
    try:
        return logits(model(inputs))
    finally:
        handle.remove()


def logits(out):
    return out if isinstance(out, torch.Tensor) else out.logits


def edited_run(model: nn.Module, inputs, path: str, edit, example: bool = True) -> torch.Tensor:
    before = hook_state(model)
    with Explorer(model, example_inputs=inputs if example else None) as ex:
        info = ex.attach(path, "forward", edit=edit)
        out = logits(model(inputs))
        assert info.last_error is None
    assert hook_state(model) == before  # the model's hook dicts as found after detach
    return out


# --- ablate_heads against the slice zeroed by hand


@pytest.mark.parametrize(
    ("build", "inputs", "path", "projection"),
    [
        (tm.gpt2, tm.token_ids, "transformer.h.0.attn", "transformer.h.0.attn.c_proj"),  # a child Conv1D
        (tm.llama, tm.token_ids, "model.layers.1.self_attn", "model.layers.1.self_attn.o_proj"),  # a child Linear
        (tm.vit, tm.images, "vit.layers.0.attention", "vit.layers.0.attention.o_proj"),
        # BERT: the module computing the context, projected by its sibling, and the module holding both
        (tm.bert, tm.token_ids, "bert.encoder.layer.0.attention.self", "bert.encoder.layer.0.attention.output.dense"),
        (tm.bert, tm.token_ids, "bert.encoder.layer.1.attention", "bert.encoder.layer.1.attention.output.dense"),
    ],
)
def test_ablate_heads_zeroes_the_heads_slice_of_the_context_before_the_projection(build, inputs, path, projection):
    model, x = build().eval(), inputs()
    clean = logits(model(x))
    out = edited_run(model, x, path, ("ablate_heads", [1, 3]))
    dim = 8  # width 32, 4 heads
    ref = reference(model, x, model.get_submodule(projection), "pre", lambda m, a: (zero_heads(a[0], [1, 3], dim),))
    assert torch.allclose(out, ref, atol=1e-6)
    assert not torch.equal(out, clean)  # it did change something
    assert torch.allclose(logits(model(x)), clean)  # and nothing stays after detach


def test_ablate_heads_on_the_examples_vit_attention_zeroes_before_proj():
    model, x = DigitsViT().eval(), torch.randn(2, 1, 32, 32)
    out = edited_run(model, x, "blocks.0.attn", ("ablate_heads", [0]))
    proj = model.blocks[0].attn.proj
    ref = reference(model, x, proj, "pre", lambda m, a: (zero_heads(a[0], [0], 8),))
    assert torch.allclose(out, ref, atol=1e-6)


class MHAModel(nn.Module):
    def __init__(self, batch_first: bool) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=batch_first)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.attn(x, x, x, need_weights=False)
        return self.head(out)


def mha_by_hand(attn: nn.MultiheadAttention, x: torch.Tensor, heads: list[int]) -> torch.Tensor:
    """MHA's output with the heads' context slices zeroed, written out (batch first)."""
    n, t, e = x.shape
    d = e // attn.num_heads
    q, k, v = nn.functional.linear(x, attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)
    split = lambda z: z.reshape(n, t, attn.num_heads, d).transpose(1, 2)  # noqa: E731
    weights = torch.softmax(split(q) @ split(k).transpose(-2, -1) / d**0.5, dim=-1)
    context = (weights @ split(v)).transpose(1, 2).reshape(n, t, e)
    return attn.out_proj(zero_heads(context, heads, d))


@pytest.mark.parametrize("batch_first", [True, False])
def test_ablate_heads_on_multihead_attention_recomputes_the_output_from_the_zeroed_context(batch_first):
    torch.manual_seed(0)
    model, x = MHAModel(batch_first).eval(), torch.randn(2, 5, 16)
    inputs = x if batch_first else x.transpose(0, 1)
    out = edited_run(model, inputs, "attn", ("ablate_heads", [2]))
    expected = model.head(mha_by_hand(model.attn, x, [2]))
    assert torch.allclose(out if batch_first else out.transpose(0, 1), expected, atol=1e-5)


def test_ablate_heads_on_multihead_attention_keeps_gradients_to_the_projection():
    torch.manual_seed(0)
    model, x = MHAModel(True), torch.randn(2, 5, 16)
    with Explorer(model) as ex:
        ex.attach("attn", "forward", edit=("ablate_heads", [0, 1, 2, 3]))  # every head: only the bias is left
        model(x).sum().backward()
    assert torch.count_nonzero(model.attn.out_proj.weight.grad) == 0
    assert model.attn.out_proj.bias.grad.abs().sum() > 0
    assert torch.count_nonzero(model.attn.in_proj_weight.grad) == 0


def test_ablate_heads_without_an_output_projection_names_the_module_and_what_was_looked_for():
    model = nn.Sequential(nn.Linear(4, 4))
    before = hook_state(model)
    with Explorer(model) as ex, pytest.raises(ValueError, match=r"'0' \(Linear\): no output projection found; looked"):
        ex.attach("0", "forward", edit=("ablate_heads", [0]))
    assert hook_state(model) == before


def test_ablate_heads_out_of_range_and_on_another_kind_are_refused():
    model = tm.gpt2()
    with Explorer(model) as ex:
        with pytest.raises(ValueError, match=r"head 4 is out of range, it has 4"):
            ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", [4]))
        with pytest.raises(ValueError, match=r"attach it with kind 'forward'"):
            ex.attach("transformer.h.0.attn", "forward_pre", edit=("ablate_heads", [0]))
        assert ex.hooks == []


# --- ablate along any dim


def test_ablate_dim_zeroes_tokens_or_features_of_a_block_output():
    model, x = tm.gpt2().eval(), tm.token_ids(batch=2)
    block = model.transformer.h[0]

    def by_hand(dim, index):
        def hook(m, a, out):
            out = (out[0] if isinstance(out, tuple) else out).clone()
            out.index_fill_(dim, torch.tensor(index), 0)
            return out

        return hook

    for dim, index in [(2, [3, 5]), (-1, [0]), (1, [2]), (-2, [7])]:
        out = edited_run(model, x, "transformer.h.0", ("ablate", index, dim))
        assert torch.allclose(out, reference(model, x, block, "post", by_hand(dim, index)), atol=1e-6)


def test_ablate_without_a_dim_on_a_cnn_is_channels_as_before():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 6, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2)).eval()
    x = torch.randn(2, 3, 8, 8)
    model(x)
    out = edited_run(model, x, "0", ("ablate", [1, 4]))
    ref = reference(model, x, model[0], "post", lambda m, a, o: o.index_fill(1, torch.tensor([1, 4]), 0))
    assert torch.allclose(out, ref)
    assert torch.allclose(edited_run(model, x, "0", ("ablate", [1, 4], 1)), ref)


def test_ablate_dim_normalizes_and_refuses_a_dim_out_of_range_with_the_shape():
    assert normalize_edits(("ablate", [2, 0], -1)) == (("ablate", (0, 2), -1),)
    with pytest.raises(ValueError, match=r"the dim must be an int"):
        normalize_edits(("ablate", [0], "x"))
    with pytest.raises(IndexError, match=r"ablate dim 3 is out of range for a tensor of shape \(2, 3, 4\)"):
        apply_edits(torch.ones(2, 3, 4), normalize_edits(("ablate", [0], 3)))
    with pytest.raises(
        IndexError, match=r"ablate index 4 is out of range: .* 4 indices along dim 2 \(shape \(2, 3, 4\)"
    ):
        apply_edits(torch.ones(2, 3, 4), normalize_edits(("ablate", [4], -1)))


# --- replace and mean_ablate


def test_replace_with_a_record_of_another_run_patches_the_output():
    model = tm.gpt2().eval()
    clean, corrupted = tm.token_ids(seed=1), tm.token_ids(seed=2)
    with Explorer(model) as ex:
        ex.attach("transformer.h.1", "forward")
        clean_logits = model(clean).logits
        record = ex.captures.latest("transformer.h.1", "forward")
    out = edited_run(model, corrupted, "transformer.h.1", ("replace", record))
    assert torch.allclose(out, clean_logits, atol=1e-5)  # the last block's output decides the logits
    out = edited_run(model, corrupted, "transformer.h.1", ("replace", record.tensor * 0))
    by_hand = reference(model, corrupted, model.transformer.h[1], "post", lambda m, a, o: torch.zeros_like(o))
    assert torch.allclose(out, by_hand)


def test_mean_ablate_puts_the_records_mean_over_the_batch_at_every_item():
    torch.manual_seed(0)
    model, x = MHAModel(True).eval(), torch.randn(4, 5, 16)
    with Explorer(model) as ex:
        ex.attach("attn", "forward")
        model(x)
        record = ex.captures.latest("attn", "forward")
    mean = record.tensor.mean(0, keepdim=True)
    out = edited_run(model, x[:2], "attn", ("mean_ablate", record))
    assert torch.allclose(out, model.head(mean.expand(2, 5, 16)), atol=1e-6)
    # only the primary tensor (the record's): the other outputs pass unchanged
    patched = apply_edits((torch.ones(2, 3), torch.ones(2, 7)), normalize_edits(("mean_ablate", torch.zeros(5, 3))))
    assert torch.equal(patched[0], torch.zeros(2, 3)) and torch.equal(patched[1], torch.ones(2, 7))


def test_a_patch_of_another_shape_is_refused_at_attach_naming_both_shapes():
    model, x = tm.gpt2().eval(), tm.token_ids(length=8)
    before = hook_state(model)
    with Explorer(model, example_inputs=x) as ex:
        with pytest.raises(ValueError, match=r"replacement has shape \(1, 6, 32\), the hooked tensor \(1, 8, 32\)"):
            ex.attach("transformer.h.0", "forward", edit=("replace", torch.zeros(1, 6, 32)))
        with pytest.raises(ValueError, match=r"mean over dim 0 has shape \(1, 8, 16\), the hooked tensor \(1, 8, 32\)"):
            ex.attach("transformer.h.0", "forward", edit=("mean_ablate", torch.zeros(3, 8, 16)))
        with pytest.raises(ValueError, match=r"ablate dim 3 is out of range for a tensor of shape \(1, 8, 32\)"):
            ex.attach("transformer.h.0", "forward", edit=("ablate", [0], 3))
        with pytest.raises(ValueError, match=r"ablate index 8 is out of range: .* along dim 1 \(shape \(1, 8, 32\)"):
            ex.attach("transformer.h.0", "forward", edit=("ablate", [8], 1))
        assert ex.hooks == []
    assert hook_state(model) == before


def test_without_example_inputs_a_misfit_is_recorded_at_the_first_firing_and_the_run_goes_on():
    model, x = tm.gpt2().eval(), tm.token_ids(length=8)
    clean = model(x).logits
    with Explorer(model) as ex:
        info = ex.attach("transformer.h.0", "forward", edit=("replace", torch.zeros(1, 6, 32)))
        with pytest.warns(UserWarning, match="recorded on ex.hooks"):
            out = model(x).logits
    assert "replacement has shape (1, 6, 32), the hooked tensor (1, 8, 32)" in info.last_error
    assert torch.allclose(out, clean)  # the output left as it was


def test_patch_edits_are_described_as_shapes_and_refuse_non_tensors():
    info_edit = normalize_edits(("replace", torch.zeros(2, 3)))
    model = nn.Linear(3, 3)
    with Explorer(model) as ex:
        info = ex.attach("", "forward", edit=info_edit[0])
        assert info.as_dict()["edit"] == [["replace", "tensor (2, 3)"]]
        assert "('replace', 'tensor (2, 3)')" in repr(info)
    with pytest.raises(ValueError, match=r"expected a tensor or a Record of a forward hook"):
        normalize_edits(("replace", [1.0, 2.0]))
    with pytest.raises(ValueError, match=r"write \('mean_ablate', record\)"):
        normalize_edits(("mean_ablate",))


def test_a_replaced_output_is_a_fresh_tensor_and_keeps_the_graph_with_zero_gradients():
    patch = torch.randn(2, 3)
    x = torch.randn(2, 3, requires_grad=True)
    out = apply_edits(x * 2, normalize_edits(("replace", patch)))
    out.add_(1)  # a later in-place op leaves the patch as it was
    assert torch.equal(out, patch + 1) and not torch.equal(patch, out)
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(2, 3))


def test_the_widgets_edit_parser_passes_the_new_forms_through():
    from hookwidgets.widget.message_values import parse_edit

    assert normalize_edits(parse_edit(["ablate", [3, 1], -1])) == (("ablate", (1, 3), -1),)
    assert normalize_edits(parse_edit(["ablate_heads", [2, 0]])) == (("ablate_heads", (0, 2)),)
    assert normalize_edits(parse_edit(["ablate", [0]])) == (("ablate", (0,)),)


class OddHeads(nn.Module):
    """Heads that do not make up the projection's input: 3 heads of 5 features before a projection of 16."""

    def __init__(self) -> None:
        super().__init__()
        self.num_heads, self.head_dim = 3, 5
        self.o_proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.o_proj(x)


def test_heads_that_do_not_make_up_the_projections_input_are_refused():
    with Explorer(OddHeads()) as ex, pytest.raises(ValueError, match=r"3 heads of 5 features do not make up the 16"):
        ex.attach("", "forward", edit=("ablate_heads", [0]))
