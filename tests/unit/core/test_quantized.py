"""Models quantized with ``torch.ao.quantization.quantize_dynamic``: gradients stop at their int8 Linears, so every
gradient method refuses naming the first one on the path and gradient hooks upstream say why; the logit lens, head
ablation and the tree's parameter counts treat a quantized Linear as the module it is."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import SmallCNN, hook_state

QUANTIZED = r"\(torch\.ao\.nn\.quantized\.dynamic\.modules\.linear\.Linear\), a quantized module with packed weights"


def quantized(model: nn.Module) -> nn.Module:
    """``model``'s Linears as int8 dynamic-quantized ones (a copy), as a user quantizes for CPU inference."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates torch.ao.quantization in favour of torchao
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


@pytest.fixture(scope="module")
def llama():
    return quantized(tm.llama())  # the tests leave it as found


@pytest.mark.parametrize("method", ["saliency", "input_x_grad", "integrated_gradients"])
def test_token_gradient_methods_refuse_naming_the_first_quantized_module_on_the_path(llama, method):
    ids = tm.token_ids(batch=2, length=6)
    before = hook_state(llama)
    ex = Explorer(llama, ids)
    first = r"'model\.layers\.0\.self_attn\.q_proj' "
    with pytest.raises(
        ValueError,
        match=rf"^{method} needs the gradient .* embedding 'model.embed_tokens', but it "
        rf"stops at {first}{QUANTIZED} whose forward has no autograd path",
    ):
        ex.attribute(ids, method=method, target=5)
    ex.close()
    assert hook_state(llama) == before and all(p.grad is None for p in llama.parameters())


@pytest.mark.parametrize("method", ["gradcam", "saliency", "guided_backprop"])
def test_image_gradient_methods_refuse_at_a_quantized_head(method, image):
    torch.manual_seed(0)
    model = quantized(SmallCNN().eval())
    with pytest.raises(ValueError, match=rf"^{method} needs .* stops at 'head\.fc' {QUANTIZED}"):
        Explorer(model).attribute(image, method=method, target=1)


def test_gradient_rollout_refuses_at_the_first_quantized_module_after_the_attention(llama):
    ids = tm.token_ids(length=6)
    with pytest.raises(
        ValueError,
        match=rf"attention probabilities, but it stops at 'model\.layers\.0\.self_attn\."
        rf"o_proj' {QUANTIZED}",
    ):
        Explorer(llama, ids).attribute(ids, method="grad_attention_rollout", target=5)


@pytest.mark.filterwarnings("ignore:quantized..linear_dynamic:UserWarning")  # torch's own, at the backward
def test_gradient_hooks_upstream_of_a_quantized_module_say_why_no_gradient_comes(llama):
    ids = tm.token_ids(length=6)
    stopped = r"^no gradient can come here: it stops at 'lm_head' " + QUANTIZED
    with Explorer(llama, ids) as ex:  # with example inputs: said at attach
        mlp = ex.attach("model.layers.0.mlp", "grad")
        weight = ex.attach("model.embed_tokens.weight", "post_accumulate")
        forward = ex.attach("model.layers.0.mlp", "forward")
        assert re.match(stopped, mlp.note) and re.match(stopped, weight.note)
        assert forward.note is None  # a forward hook sees its values
    with Explorer(llama) as ex:  # without: said by the run whose backward cannot bring it
        mlp = ex.attach("model.layers.1", "backward")
        every = ex.attach("", "global_backward")
        assert mlp.note is None
        ex.run(ids, target=5)
        assert re.match(stopped, mlp.note)
        assert re.match(r"^no gradient can come here for \d+ modules \('model.embed_tokens', ", every.note)


def test_the_logit_lens_reads_through_the_quantized_head_as_written_by_hand(llama):
    ids = tm.token_ids(batch=2, length=6)
    lens = Explorer(llama, ids).logit_lens(top_k=2)
    hidden = []
    handles = [
        b.register_forward_hook(lambda m, a, o: hidden.append(o[0] if isinstance(o, tuple) else o))
        for b in llama.model.layers
    ]
    with torch.no_grad():
        logits = llama(ids).logits
        rows = torch.stack([llama.lm_head(llama.model.norm(h)) for h in hidden])
    for handle in handles:
        handle.remove()
    assert torch.equal(lens["ids"][:2], rows.softmax(-1).topk(2, dim=-1).indices)
    assert torch.equal(lens["ids"][1, ..., 0], logits.argmax(-1))


def test_ablate_heads_zeroes_the_context_before_a_quantized_o_proj(llama):
    ids = tm.token_ids(batch=2, length=6)
    projection = llama.model.layers[1].self_attn.o_proj

    def zero_head_2(module: nn.Module, args: tuple) -> tuple:
        context = args[0].clone()
        context[..., 16:24] = 0  # head 2 of 4 heads of 8 features
        return (context,)

    handle = projection.register_forward_pre_hook(zero_head_2)
    with torch.no_grad():
        expected = llama(ids).logits
    handle.remove()
    for example in (ids, None):  # found by the probe, and by its name without example inputs
        with Explorer(llama, example) as ex:
            ex.attach("model.layers.1.self_attn", "forward", edit=("ablate_heads", [2]))
            with torch.no_grad():
                assert torch.equal(llama(ids).logits, expected)


def test_the_trees_counts_include_packed_weights_and_say_how_many(llama):
    tree = Explorer(llama).tree
    packed = 0
    for module in llama.modules():
        if callable(getattr(module, "weight", None)):  # a quantized Linear: weight() and bias() unpack them
            bias = module.bias()
            packed += module.weight().numel() + (0 if bias is None else bias.numel())
    floats = sum(p.numel() for p in llama.parameters())
    assert packed > 0 and tree["packed"] == packed
    assert tree["trainable"] == floats and tree["frozen"] == packed
    head = next(c for c in tree["children"] if c["path"] == "lm_head")
    assert head["packed"] == head["frozen"] == llama.lm_head.weight().numel() and head["trainable"] == 0
