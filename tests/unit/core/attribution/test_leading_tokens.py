"""Grad-CAM on vision transformers with more than a class token before the patches (DeiT's class and distillation
tokens, DINOv2's register tokens): the tokens before the patches are the sequence's length minus the patch grid."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hookwidgets.core import Explorer, attribute
from tests import transformer_models as tm
from tests.conftest import hook_state

transformers = tm.transformers


def deit() -> nn.Module:
    """DeiT with its teacher head: a class token and a distillation token before 4×4 patches."""
    config = transformers.DeiTConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4, image_size=32, patch_size=8
    )
    config.num_labels = 5
    torch.manual_seed(0)
    return transformers.DeiTForImageClassificationWithTeacher(config).eval()


def dinov2_registers() -> nn.Module:
    """DINOv2 with four register tokens after its class token, before 4×4 patches."""
    config = transformers.Dinov2WithRegistersConfig(
        num_hidden_layers=2,
        hidden_size=32,
        mlp_ratio=2,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
        num_register_tokens=4,
    )
    config.num_labels = 5
    torch.manual_seed(0)
    return transformers.Dinov2WithRegistersForImageClassification(config).eval()


def gradcam_by_hand(model: nn.Module, x: torch.Tensor, layer: nn.Module, target: int, leading: int) -> torch.Tensor:
    """Grad-CAM written out: the layer's tokens after the first ``leading`` on the 4×4 grid, weighted by the mean
    gradient of ``logits[:, target]`` per channel, ReLU, upsampled and scaled to [0, 1] per item."""
    taken = {}
    handle = layer.register_forward_hook(lambda m, a, out: taken.setdefault("a", out))
    try:
        logits = model(x).logits
    finally:
        handle.remove()
    (grads,) = torch.autograd.grad(logits[:, target].sum(), taken["a"])
    n, _, c = grads.shape
    acts = taken["a"].detach()[:, leading:].reshape(n, 4, 4, c).permute(0, 3, 1, 2)
    grads = grads[:, leading:].reshape(n, 4, 4, c).permute(0, 3, 1, 2)
    cam = torch.relu((grads.mean(dim=(2, 3), keepdim=True) * acts).sum(dim=1))
    up = F.interpolate(cam[:, None], size=x.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
    low, high = up.amin(dim=(1, 2), keepdim=True), up.amax(dim=(1, 2), keepdim=True)
    return (up - low) / (high - low)


@pytest.mark.parametrize(
    ("build", "layer", "leading"),
    [
        (deit, "deit.layers.1.layernorm_before", 2),  # class + distillation token
        (dinov2_registers, "dinov2_with_registers.encoder.layer.1.norm1", 5),  # class + 4 register tokens
    ],
    ids=["deit", "dinov2-registers"],
)
def test_gradcam_drops_every_token_before_the_patches_and_defaults_to_the_last_blocks_attention_input(
    build, layer, leading
):
    model, x = build(), tm.images(batch=2)
    before = hook_state(model)
    default = attribute(model, x, 3, method="gradcam")
    assert default.layer == layer  # not the patch embedding, which main fell back to on DeiT
    expected = gradcam_by_hand(model, x, model.get_submodule(layer), 3, leading)
    torch.testing.assert_close(default.map, expected, atol=1e-5, rtol=0)
    assert hook_state(model) == before and all(p.grad is None for p in model.parameters())


def test_every_block_of_deit_takes_a_cam_and_the_explorer_offers_its_tokens_as_patches():
    model, x = deit(), tm.images(batch=1)
    ex = Explorer(model, x)
    for layer in ("deit.layers.0", "deit.layers.1.layernorm_before"):  # main refused every transformer layer
        cam = ex.attribute(x, 1, method="layercam", layer=layer)
        assert cam.shape == (1, 32, 32) and cam.layer == layer and cam.any()
    assert ex.sequences.patch_tokens(18) == 2 and ex.sequences.patch_tokens(17) == 1
    assert ex.sequences.patch_tokens(40) is None  # more tokens before them than patches: not this grid
    ex.close()
    text_and_image = {"input_ids": tm.token_ids(length=20), "pixel_values": tm.images()}
    with Explorer(tm.clip(), text_and_image) as clip:  # a text of 20 tokens is no 4×4 grid after 4 tokens
        assert clip.sequences.patch_tokens(20) is None and clip.sequences.patch_tokens(17) == 1
