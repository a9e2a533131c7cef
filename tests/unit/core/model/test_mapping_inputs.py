"""Inputs that are any Mapping (a tokenizer's BatchEncoding is a UserDict) are keyword arguments, copied with their
type; attributions say the score they explain."""

from __future__ import annotations

import collections
from typing import Any

import pytest
import torch

from hookwidgets.core import Explorer
from hookwidgets.core.attribution.inputs import with_grad
from hookwidgets.core.model.inputs import call_model, describe_inputs
from hookwidgets.core.model.nested import map_tensors
from tests import transformer_models as tm
from tests.conftest import hook_state


def _encoding() -> Any:
    return tm.tokenizer()(["the cat sat on a mat", "a dog ran to the sun"], return_tensors="pt")


def test_a_batch_encoding_is_keyword_arguments_in_every_run():
    encoding = _encoding()
    assert not isinstance(encoding, dict)  # a UserDict: the case a dict check misses
    model = tm.gpt2()
    before = hook_state(model)
    with torch.no_grad():
        expected = model(**encoding).logits
    torch.testing.assert_close(call_model(model, encoding).logits, expected)
    assert describe_inputs(encoding).startswith("{input_ids: Tensor(2, 6), ")
    with Explorer(model, example_inputs=encoding) as ex:
        assert ex.probe_error is None and ex.probe_output["shape"] == [2, 6, tm.VOCAB]
        copy = ex.example_copy()
        assert type(copy) is type(encoding) and copy["input_ids"] is not encoding["input_ids"]
        assert torch.equal(copy["input_ids"], encoding["input_ids"])
        ex.attach("transformer.ln_f.weight", "grad")
        out = ex.run(target="top")
        torch.testing.assert_close(out.logits, expected)
        top = expected[:, -1].argmax(-1)
        assert ex.last_score.classes == top.tolist()
        got = ex.captures["transformer.ln_f.weight"]["grad"][-1].tensors["grad"]
        score = model(**encoding).logits[:, -1].gather(1, top[:, None]).sum()
        torch.testing.assert_close(got, torch.autograd.grad(score, model.transformer.ln_f.weight)[0])
        assert ex.graph()["nodes"]  # the graph's own forward takes keywords too
        comparison = ex.compare_backward("transformer.h.0.mlp", encoding, target=5, position=-2)
        assert comparison.full_grad_output is not None
    assert hook_state(model) == before


def test_copies_of_mapping_inputs_keep_their_type():
    encoding = _encoding()
    copied = map_tensors(encoding, torch.Tensor.clone)
    assert type(copied) is type(encoding) and copied.keys() == encoding.keys()
    assert copied["input_ids"] is not encoding["input_ids"]
    assert encoding.data is not copied.data  # the original's items are left alone
    floats = collections.OrderedDict(x=torch.randn(1, 3, 4, 4), n=torch.ones(1, dtype=torch.long))
    prepared, aliases = with_grad(floats)
    assert type(prepared) is collections.OrderedDict and [a.shape for a in aliases] == [(1, 3, 4, 4)]
    assert prepared["x"].requires_grad and not floats["x"].requires_grad


def test_attributions_name_the_score_they_explain(cnn, image):
    cnn.eval()
    with Explorer(cnn, example_inputs=image) as ex:
        cam = ex.gradcam("features.conv", target=3)
        assert cam.target == "output · class 3" and cam.classes == [3, 3]
        top = cnn(image).argmax(1).tolist()
        saliency = ex.attribute(method="saliency")
        assert saliency.target == "output · top class" and saliency.classes == top
        with pytest.raises(ValueError, match="position=-1 applies to sequence scores"):
            ex.gradcam("features.conv", target=3, position=-1)


def test_a_vit_cam_of_a_class_and_a_mapping_input_image():
    model = tm.vit()
    with Explorer(model) as ex:
        cam = ex.gradcam("vit.layers.1.layernorm_before", {"pixel_values": tm.images(2)}, target=1)
    assert cam.shape == (2, 32, 32) and cam.target == "output.logits · class 1" and cam.classes == [1, 1]
