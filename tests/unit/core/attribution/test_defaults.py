"""The layer a CAM starts at with no layer given: on the image path of a multimodal model, at the input of a vision
transformer's last attention, at the last map of a CNN."""

from __future__ import annotations

import warnings

import pytest
import torch

from hookwidgets.core import Explorer, attribute, default_layer, spatial_layers
from hookwidgets.examples import DigitsCNN
from hookwidgets.examples.vit import DigitsViT
from tests import transformer_models as tm
from tests.conftest import SmallCNN


def _not_blank(cam: torch.Tensor) -> bool:
    return bool(cam.flatten(1).amax(dim=1).min() > 0)


def test_clip_gradcam_with_two_images_and_three_texts_maps_each_image_at_a_vision_layer():
    model = tm.clip()
    inputs = {"input_ids": tm.token_ids(3, 6), "pixel_values": tm.images(2)}
    with Explorer(model, example_inputs=inputs) as ex:
        cam = ex.gradcam(inputs=inputs, target=1)  # logits_per_image (images × texts): a class is a text
    assert cam.layer == "vision_model.encoder.layers.1.layer_norm1" and cam.shape == (2, 32, 32)
    assert cam.classes == [1, 1] and _not_blank(cam)
    by_hand = attribute(model, inputs, lambda out: out.logits_per_image[:, 1], layer=cam.layer).map
    torch.testing.assert_close(cam, by_hand)


def test_a_text_tower_shaped_like_image_tokens_is_never_on_the_image_path():
    model = tm.clip()
    # 2 texts of 17 tokens: the same (2, 1+4·4, 32) outputs as the vision tower's, computed from the ids alone.
    inputs = {"input_ids": tm.token_ids(2, 17), "pixel_values": tm.images(2)}
    layers = spatial_layers(model, inputs, (32, 32))
    assert layers and all(path.split(".")[0] == "vision_model" for path in layers)
    assert "vision_model.embeddings.position_embedding" not in layers  # (1, 17, 32): not one map per image
    assert default_layer(model, inputs, (32, 32)) == "vision_model.encoder.layers.1.layer_norm1"


def test_one_image_skips_the_position_embedding_that_has_its_shape():
    model = tm.clip()
    inputs = {"input_ids": tm.token_ids(1, 17), "pixel_values": tm.images(1)}
    cam = attribute(model, inputs, 0).map
    assert cam.shape == (1, 32, 32) and "vision_model.embeddings.position_embedding" not in spatial_layers(
        model, inputs, (32, 32)
    )


def test_vit_default_layer_is_the_last_blocks_layernorm_before_and_its_map_is_not_blank():
    model, x = tm.vit(layers=3), tm.images(2)
    assert default_layer(model, x, (32, 32)) == "vit.layers.2.layernorm_before"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # chosen directly: no blank map to warn about or step back from
        result = attribute(model, x, [1, 4])
    assert result.layer == "vit.layers.2.layernorm_before" and result.map.shape == (2, 32, 32)
    assert _not_blank(result.map)


def test_digits_vit_default_layer_is_norm1_of_the_last_block():
    torch.manual_seed(0)
    model, x = DigitsViT().eval(), torch.randn(2, 1, 32, 32)
    assert default_layer(model, x, (32, 32)) == "blocks.1.norm1"


def test_cnn_defaults_stay_the_last_map_before_pooling():
    torch.manual_seed(0)
    assert default_layer(DigitsCNN().eval(), torch.randn(2, 1, 32, 32), (32, 32)) == "features"
    assert default_layer(SmallCNN().eval(), torch.randn(2, 3, 8, 8), (8, 8)) == "features"


def test_inputs_without_an_image_say_what_a_cam_needs():
    with pytest.raises(ValueError, match=r"a CAM needs an image input of shape \(N, C, H, W\)"):
        default_layer(tm.gpt2(), tm.token_ids(1, 9), (3, 3))
