"""bf16 and fp16 models on the CPU: statistics computed wider than the model's dtype (finite where the dtype's own
sums overflow), captures kept in its dtype, and attention, token attributions and the lens as on a float32 model."""

from __future__ import annotations

import math

import pytest
import torch

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import hook_state
from tests.unit.core.attribution.test_tokens import _captum
from tests.unit.core.model.test_attention_transformers import eager_reference

DTYPES = [torch.bfloat16, torch.float16]


def half_gpt2(dtype: torch.dtype) -> torch.nn.Module:
    """A GPT-2 in ``dtype`` whose final norm scales by 300: the squares of its output sum past float16's 65504."""
    model = tm.gpt2().to(dtype)
    with torch.no_grad():
        model.transformer.ln_f.weight.fill_(300)
    return model


def reference_norms(model: torch.nn.Module, ids: torch.Tensor) -> dict[str, float]:
    """Each module's output norm (its first tensor's, as a stats record reads it) in float64, from plain hooks."""
    norms: dict[str, float] = {}

    def hook(path: str):
        def read(_module, _args, output) -> None:
            first = output if isinstance(output, torch.Tensor) else output[0]  # a tuple's, or a ModelOutput's logits
            norms[path] = first.double().norm().item()

        return read

    handles = [module.register_forward_hook(hook(path)) for path, module in model.named_modules()]
    with torch.no_grad():
        model(ids)
    for handle in handles:
        handle.remove()
    return norms


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
def test_stats_are_computed_wider_than_the_model_and_captures_keep_its_dtype(dtype):
    model, ids = half_gpt2(dtype), tm.token_ids(2, 6)
    expected = reference_norms(model, ids)
    assert expected["transformer.ln_f"] ** 2 > torch.finfo(torch.float16).max  # a float16 sum of squares is inf
    before = hook_state(model)
    with Explorer(model, ids) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        forward, grad = ex.attach("transformer.h.0.mlp", ["forward", "grad"])
        ex.run(target="top")
        rows = {row["path"]: row for row in ex.summary()}
        assert ex.captures.latest(forward.target, "forward").tensor.dtype == dtype
        assert ex.captures.latest(grad.target, "grad").tensor.dtype == dtype
    for path, norm in expected.items():
        assert rows[path]["act_norm"] == pytest.approx(norm, rel=1e-6), path  # the dtype's own sum is off by ~1e-3
    for row in rows.values():
        assert all(math.isfinite(v) for v in row.values() if isinstance(v, float)), row["path"]
    assert sum("grad_norm" in row for row in rows.values()) > len(rows) // 2
    assert hook_state(model) == before


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
def test_attention_attributions_and_the_lens_work_in_the_models_dtype(dtype):
    model, inputs = tm.gpt2().to(dtype), {"input_ids": tm.token_ids(2, 6)}
    with Explorer(model, inputs) as ex:
        attention = ex.attention()
        saliency = ex.attribute(method="saliency")
        integrated = ex.attribute(method="integrated_gradients", n_steps=8)
        lens = ex.logit_lens(top_k=3)
    for got, expected in zip(attention.values(), eager_reference(model, inputs).attentions, strict=True):
        assert got.dtype == dtype and torch.equal(got, expected)
    assert saliency.dtype == integrated.dtype == dtype
    assert torch.equal(saliency, _captum(model, inputs, "transformer.wte", "saliency", saliency.classes))
    # Captum sums the steps in float32; the explorer's scores are in the model's dtype: equal to its precision
    expected = _captum(model, inputs, "transformer.wte", "integrated_gradients", integrated.classes, n_steps=8)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(integrated.float(), expected.float(), rtol=eps, atol=eps * expected.abs().max().item())
    with torch.no_grad():
        probs, top = model(**inputs).logits.float().softmax(-1).topk(3)
    assert lens["probs"].dtype == torch.float32
    assert torch.equal(lens["ids"][-1], top) and torch.equal(lens["ids"][-2], top)
    torch.testing.assert_close(lens["probs"][-1], probs)
