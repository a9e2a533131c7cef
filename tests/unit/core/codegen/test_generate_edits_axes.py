"""hook_code for edits along any axis: ablate with a dim, ablate_heads and patches give what the explorer gives."""

import copy

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.codegen.generate import hook_code
from tests import transformer_models as tm
from tests.unit.core.codegen.test_generate import assert_same_records
from tests.unit.core.hooks.test_edits_axes import MHAModel


def outputs(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x)
    return out if isinstance(out, torch.Tensor) else out.logits


def same_as_explorer(model: nn.Module, x: torch.Tensor, attach, patches=None) -> str:
    """The explorer on ``model`` and the generated code on a copy give the same output and the same records."""
    twin = copy.deepcopy(model)
    clean = outputs(model, x)
    with Explorer(model) as ex:
        attach(ex)
        source = hook_code(ex.hooks)
        ns = {"torch": torch, "model": twin, "patches": patches}
        exec(compile(source, "<hook_code>", "exec"), ns)
        try:
            expected, got = outputs(model, x), outputs(twin, x)
            assert torch.equal(expected, got)
            assert not torch.equal(expected, clean)  # the edit changed something
            for info in ex.hooks:
                assert_same_records(ex, ns["captures"], info.target, info.kind)
        finally:
            for handle in ns["handles"]:
                handle.remove()
    assert outputs(twin, x).equal(clean)  # the generated hooks removed, the copy is the model again
    return source


@pytest.mark.parametrize(
    ("build", "path"),
    [
        (tm.gpt2, "transformer.h.0.attn"),
        (tm.llama, "model.layers.1.self_attn"),
        (tm.bert, "bert.encoder.layer.0.attention.self"),
        (tm.bert, "bert.encoder.layer.1.attention"),
    ],
)
def test_ablate_heads_code_zeroes_the_same_slice_before_the_projection(build, path):
    model, x = build().eval(), tm.token_ids()
    source = same_as_explorer(model, x, lambda ex: ex.attach(path, "forward", edit=("ablate_heads", [0, 2])))
    assert "def _zero_heads(" in source and "prepend=True))" in source.split("# Hook 1")[-1]


def test_ablate_heads_code_on_multihead_attention_reruns_it():
    torch.manual_seed(0)
    model, x = MHAModel(True).eval(), torch.randn(2, 5, 16)
    source = same_as_explorer(model, x, lambda ex: ex.attach("attn", "forward", edit=("ablate_heads", [1])))
    assert "_mha_without_heads(module, args, kwargs, (1,))" in source


def test_ablate_along_a_dim_code():
    model, x = tm.gpt2().eval(), tm.token_ids(batch=2)
    same_as_explorer(model, x, lambda ex: ex.attach("transformer.h.0", "forward", edit=("ablate", [1, 4], -1)))


def test_replace_and_mean_ablate_code_takes_the_tensors_in_patches():
    model, x = tm.gpt2().eval(), tm.token_ids(batch=2)
    with Explorer(model) as ex:
        ex.attach("transformer.h.0", "forward")
        model(tm.token_ids(batch=2, seed=5))
        record = ex.captures.latest("transformer.h.0", "forward")

    def attach(ex):
        ex.attach("transformer.h.0", "forward", edit=("replace", record))
        ex.attach("transformer.h.1", "forward", edit=("mean_ablate", record))

    source = same_as_explorer(model, x, attach, patches=[record.tensor, record.tensor.mean(0, keepdim=True)])
    assert "('replace', patches[0])" in source.replace('"', "'")
    assert "Their shapes: (2, 8, 32), (1, 8, 32)." in source
    with pytest.raises(ValueError, match=r"patches holds 1 tensors; the edits below take 2"):
        exec(compile(source, "<hook_code>", "exec"), {"torch": torch, "model": copy.deepcopy(model), "patches": [1]})
