"""Token attributions on transformers models, checked against Captum on the embeddings of the input ids."""

from __future__ import annotations

import pytest
import torch
from captum.attr import InputXGradient, IntegratedGradients, Saliency
from torch import nn

from hookwidgets.core import Explorer, attribute
from hookwidgets.core.attribution.tokens import token_attribution
from tests import transformer_models as tm
from tests.conftest import hook_state

LAYERS = {"gpt2": "transformer.wte", "llama": "model.embed_tokens", "bert": "bert.embeddings.word_embeddings"}


def _inputs(name: str, batch: int = 2, length: int = 6) -> dict:
    ids = tm.token_ids(batch, length)
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # padding on the left of the first item: the mask must reach every step of the batch
    inputs = {"input_ids": ids, "attention_mask": mask}
    if name == "t5":
        inputs["decoder_input_ids"] = tm.token_ids(batch, 3, seed=5)
    return inputs


def _through_embeddings(model: nn.Module, inputs: dict, position: int = -1):
    """Captum's forward: embeddings in, the scores a token (or class) target reads out; other inputs repeated."""

    def forward(embeddings: torch.Tensor) -> torch.Tensor:
        repeat = len(embeddings) // len(inputs["input_ids"])
        others = {k: v.repeat(repeat, 1) for k, v in inputs.items() if k != "input_ids"}
        logits = model(inputs_embeds=embeddings, **others).logits
        return logits[:, position] if logits.dim() == 3 else logits

    return forward


def _captum(model: nn.Module, inputs: dict, layer: str, method: str, classes: list[int], **options) -> torch.Tensor:
    embeddings = model.get_submodule(layer)(inputs["input_ids"]).detach()
    forward = _through_embeddings(model, inputs)
    if method == "saliency":
        return Saliency(forward).attribute(embeddings, target=classes, abs=True).sum(-1)
    if method == "input_x_grad":
        return InputXGradient(forward).attribute(embeddings, target=classes).sum(-1)
    baseline = options.pop("baseline", None)
    baselines = None if baseline is None else model.get_submodule(layer)(torch.full_like(inputs["input_ids"], baseline))
    return (
        IntegratedGradients(forward)
        .attribute(embeddings, baselines=baselines, target=classes, method="gausslegendre", **options)
        .sum(-1)
    )


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
@pytest.mark.parametrize("method", ["saliency", "input_x_grad", "integrated_gradients"])
def test_each_method_equals_captums_on_the_embeddings(name, method):
    model = getattr(tm, name)()
    inputs = _inputs(name)
    steps = {"n_steps": 16} if method == "integrated_gradients" else {}
    with Explorer(model, example_inputs=inputs) as ex:
        scores = ex.attribute(method=method, **steps)
    assert scores.shape == (2, 6) and scores.method == method and scores.layer == LAYERS[name]
    assert len(scores.classes) == 2 and scores.abs().sum() > 0
    expected = _captum(model, inputs, LAYERS[name], method, scores.classes, **steps)
    torch.testing.assert_close(scores, expected.detach(), rtol=1e-4, atol=1e-6)


def test_integrated_gradients_is_the_default_on_token_ids_with_50_steps_and_the_top_token():
    model = tm.gpt2()
    ids = tm.token_ids(1, 5)
    scores = attribute(model, ids)  # a lone int tensor
    assert scores.method == "integrated_gradients" and scores.map.shape == (1, 5)
    assert "top next token" in scores.target
    top = model(ids).logits[:, -1].argmax(-1).tolist()
    assert scores.classes == top
    expected = _captum(model, {"input_ids": ids}, "transformer.wte", "integrated_gradients", top, n_steps=50)
    torch.testing.assert_close(scores.map, expected.detach(), rtol=1e-4, atol=1e-6)


def test_a_baseline_token_is_its_embedding_at_every_position():
    model = tm.llama()
    inputs = _inputs("llama")
    scores = attribute(model, inputs, [7, 9], "integrated_gradients", n_steps=8, baseline=0).map
    expected = _captum(model, inputs, "model.embed_tokens", "integrated_gradients", [7, 9], n_steps=8, baseline=0)
    torch.testing.assert_close(scores, expected.detach(), rtol=1e-4, atol=1e-6)
    zeros = attribute(model, inputs, [7, 9], "integrated_gradients", n_steps=8).map
    assert not torch.allclose(scores, zeros)


def test_internal_batch_size_chunks_equal_one_batch_and_captums_chunks():
    model = tm.gpt2()
    inputs = _inputs("gpt2")
    whole = attribute(model, inputs, 5, "integrated_gradients", n_steps=10).map
    chunked = attribute(model, inputs, 5, "integrated_gradients", n_steps=10, internal_batch_size=6).map  # 3+3+3+1
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-6)
    expected = _captum(
        model, inputs, "transformer.wte", "integrated_gradients", [5, 5], n_steps=10, internal_batch_size=6
    )
    torch.testing.assert_close(chunked, expected.detach(), rtol=1e-4, atol=1e-6)


def test_the_loss_target_in_chunks_equals_one_batch():
    model = tm.gpt2()
    inputs = {"input_ids": tm.token_ids(1, 6), "labels": tm.token_ids(1, 6)}
    whole = attribute(model, inputs, "loss", "integrated_gradients", n_steps=7).map
    chunked = attribute(model, inputs, "loss", "integrated_gradients", n_steps=7, internal_batch_size=3).map
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-7)
    assert whole.abs().sum() > 0


def test_bert_classification_attributes_each_token_including_cls():
    model = tm.bert()
    inputs = _inputs("bert")
    scores = attribute(model, inputs, 2, "input_x_grad")
    assert scores.classes == [2, 2] and scores.target == "output.logits · class 2"
    assert scores.map[:, 0].abs().min() > 0  # the [CLS] position, which the classifier reads


def test_an_encoder_decoder_attributes_the_encoder_tokens():
    model = tm.t5()
    inputs = _inputs("t5")
    scores = attribute(model, inputs, None, "saliency")
    assert scores.layer == "encoder.embed_tokens" and scores.map.shape == (2, 6)  # not the 3 decoder tokens
    assert scores.map.abs().sum() > 0


def test_the_tokens_are_named_when_the_explorer_has_a_tokenizer():
    model = tm.gpt2()
    tokenizer = tm.tokenizer()
    inputs = tokenizer(["the cat sat on the mat"], return_tensors="pt")
    with Explorer(model, example_inputs=inputs, tokenizer=tokenizer) as ex:
        scores = ex.attribute(method="saliency")
    assert scores.tokens == [["the", "cat", "sat", "on", "the", "mat"]]


def test_a_cam_on_token_ids_asks_for_an_image_and_names_the_token_methods():
    model = tm.gpt2()
    with pytest.raises(ValueError, match=r"gradcam needs an image input .* token ids \(1, 5\).*'integrated_gradients'"):
        attribute(model, tm.token_ids(1, 5), method="gradcam")


def test_a_baseline_outside_the_vocabulary_names_its_size():
    model = tm.gpt2(vocab=100)
    with pytest.raises(ValueError, match=r"baseline=100 .* vocabulary size is 100: pass a token id from 0 to 99"):
        attribute(model, tm.token_ids(1, 5, vocab=100), method="integrated_gradients", baseline=100)


def test_options_and_layers_that_do_not_apply_are_refused():
    model = tm.gpt2()
    ids = tm.token_ids(1, 5)
    with pytest.raises(ValueError, match=r"baseline= apply to method='integrated_gradients'; saliency takes none"):
        attribute(model, ids, method="saliency", baseline=0)
    with pytest.raises(ValueError, match=r"leave layer=None"):
        attribute(model, ids, method="integrated_gradients", layer="transformer.h.0")
    with pytest.raises(ValueError, match=r"integrated_gradients attributes input tokens: it needs integer token ids"):
        attribute(nn.Conv2d(3, 2, 3), tm.images(1), method="integrated_gradients")


def test_integrated_gradients_on_token_ids_beside_an_image_says_that_the_image_is_explained():
    inputs = {"input_ids": tm.token_ids(3, 5), "pixel_values": tm.images(2)}  # CLIP: three texts, two images
    message = r"the inputs hold an image \(N, C, H, W\) beside the token ids \(3, 5\), .* use method='saliency'"
    with pytest.raises(ValueError, match=message):
        attribute(tm.clip(), inputs, method="integrated_gradients")


class OneHotLM(nn.Module):
    """Token ids embedded by a one-hot product: no nn.Embedding sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(10, 4, bias=False)
        self.head = nn.Linear(4, 10)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(nn.functional.one_hot(ids, 10).float()))


def test_no_embedding_of_the_ids_names_what_was_looked_for():
    with pytest.raises(ValueError, match=r"found no nn.Embedding called on the input_ids \(1, 4\)"):
        attribute(OneHotLM(), torch.tensor([[1, 2, 3, 4]]), method="saliency")


@pytest.mark.parametrize("method", ["saliency", "integrated_gradients"])
def test_the_model_is_left_as_found_and_the_explorers_hooks_record_nothing(method):
    model = tm.gpt2()
    model.train()
    inputs = _inputs("gpt2")
    with Explorer(model, example_inputs=inputs) as ex:
        ex.attach("transformer.wte", ["forward", "grad"])
        ex.attach("transformer.h.0", "forward")
        step, hooks = ex.step, hook_state(model)
        ex.attribute(method=method, n_steps=4 if method == "integrated_gradients" else None, internal_batch_size=None)
        assert ex.step == step and len(ex.captures) == 0 and ex.timeline == []
        assert all(info.fired == 0 for info in ex.hooks)
        assert hook_state(model) == hooks
    assert all(m.training for m in model.modules())
    assert all(p.grad is None for p in model.parameters())


def test_token_attribution_of_inputs_without_token_ids_says_so():
    # mypy found it: the ids (None) reached the message's ids.shape, an AttributeError instead of this ValueError
    model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.ReLU())
    with pytest.raises(ValueError, match="token attributions need token ids"):
        token_attribution(model, torch.randn(1, 3, 8, 8), "top", None, "saliency")
