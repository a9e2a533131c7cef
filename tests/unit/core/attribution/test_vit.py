"""Vision-transformer token outputs ``(N, 1+H·W, C)`` as CAM grids: class token dropped, grid inferred."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hookwidgets.core import as_grid, attribute, token_grid


class Block(nn.Module):
    """Pre-norm transformer block: attention and MLP with residuals (the layout of timm's ViT)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, 2, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """4×4 patches of a 16×W image, a class token, two blocks and a head on the class token."""

    def __init__(self, dim: int = 8, classes: int = 3, patches: int = 16) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, 1 + patches, dim) * 0.1)
        self.blocks = nn.Sequential(Block(dim), Block(dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(len(x), -1, -1), tokens], dim=1) + self.pos
        return self.head(self.norm(self.blocks(tokens))[:, 0])


@pytest.mark.parametrize(
    ("tokens", "size", "expected"),
    [
        (197, (224, 224), (1, 14, 14)),
        (196, (224, 224), (0, 14, 14)),
        (1 + 8 * 16, (128, 256), (1, 8, 16)),
        (1 + 16 * 8, (256, 128), (1, 16, 8)),
        (10, (32, 32), (1, 3, 3)),
        (7, (32, 32), None),
        (3, (32, 32), None),
    ],
)
def test_token_counts_map_to_grids_with_the_images_aspect_ratio(tokens, size, expected):
    assert token_grid(tokens, size) == expected


def test_tokens_are_reshaped_row_major_without_the_class_token():
    tokens = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3)  # class token + 2×2 grid, 3 channels
    grid = as_grid(tokens, (32, 32))
    assert grid.shape == (2, 3, 2, 2)
    assert torch.equal(grid[1, :, 0, 1], tokens[1, 2])  # token 1 + (row 0, column 1)
    assert torch.equal(grid[0, :, 1, 0], tokens[0, 3])


def test_gradcam_on_vit_tokens_matches_the_definition_on_the_reshaped_grid():
    torch.manual_seed(0)
    model = TinyViT().eval()
    x = torch.randn(2, 3, 16, 16)
    layer = "blocks.1.norm1"
    acts = {}
    handle = model.blocks[1].norm1.register_forward_hook(lambda m, a, out: acts.setdefault("a", out))
    try:
        logits = model(x)
    finally:
        handle.remove()
    (grads,) = torch.autograd.grad(logits[:, 2].sum(), acts["a"])
    a = acts["a"].detach()[:, 1:].reshape(2, 4, 4, 8).permute(0, 3, 1, 2)
    g = grads[:, 1:].reshape(2, 4, 4, 8).permute(0, 3, 1, 2)
    cam = torch.relu((g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1))
    up = F.interpolate(cam[:, None], size=(16, 16), mode="bilinear", align_corners=False)[:, 0]
    low, high = up.amin(dim=(1, 2), keepdim=True), up.amax(dim=(1, 2), keepdim=True)
    result = attribute(model, x, 2, method="gradcam", layer=layer)
    assert result.map.shape == (2, 16, 16) and result.layer == layer
    torch.testing.assert_close(result.map, (up - low) / (high - low), atol=1e-5, rtol=0)


def test_non_square_images_get_a_non_square_grid_and_the_default_layer_is_a_token_layer():
    torch.manual_seed(0)
    model = TinyViT(patches=8).eval()
    x = torch.randn(1, 3, 8, 16)  # 2×4 patches
    result = attribute(model, x, 0, method="layercam", layer="blocks.0")
    assert result.map.shape == (1, 8, 16)
    assert attribute(model, x, 0, layer="blocks.1.norm1").map.shape == (1, 8, 16)


def test_the_final_norm_gets_no_gradient_on_patch_tokens_so_its_map_is_blank_with_a_warning_naming_it():
    torch.manual_seed(0)
    model, x = TinyViT().eval(), torch.randn(2, 3, 16, 16)
    blank = r"layer 'norm' gets a zero gradient at every patch token, so its gradcam map is blank \(all zeros\)"
    with pytest.warns(UserWarning, match=rf"{blank}: .*final norm.*such as .*'blocks.1.norm1'$"):
        result = attribute(model, x, 1, layer="norm")
    assert result.layer == "norm" and not result.map.any()


@pytest.mark.parametrize("method", ["gradcam", "layercam", "guided_gradcam"])
def test_no_layer_steps_back_from_the_final_norm_to_the_last_block_input_of_its_shape(method):
    torch.manual_seed(0)
    model, x = TinyViT().eval(), torch.randn(2, 3, 16, 16)
    model.blocks[1].mlp[1] = nn.ReLU()  # guided Grad-CAM needs a ReLU
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the map is not blank: nothing to warn about
        result = attribute(model, x, [1, 2], method=method)
    assert result.layer == "blocks.1.norm1" and result.map.flatten(1).amax(dim=1).min() > 0
    torch.testing.assert_close(result.map, attribute(model, x, [1, 2], method=method, layer="blocks.1.norm1").map)


def test_the_digits_vit_example_gives_token_cams_and_attention_weights_to_plot():
    from hookwidgets.examples import load_digits
    from hookwidgets.examples.vit import DigitsViT
    from hookwidgets.plots import attention_figure

    torch.manual_seed(0)
    model = DigitsViT().eval()
    x = load_digits()[0][:2]
    result = attribute(model, x, 3, method="layercam")
    assert result.layer == "blocks.1.norm1" and result.map.shape == (2, 32, 32)  # 65 tokens: class token + 8×8 patches
    assert result.map.flatten(1).amax(dim=1).min() == 1.0
    weights = []
    handle = model.blocks[0].attn.softmax.register_forward_hook(lambda m, a, out: weights.append(out.detach()))
    try:
        with torch.no_grad():
            model(x)
    finally:
        handle.remove()
    (attention,) = weights
    assert attention.shape == (2, 4, 65, 65)
    torch.testing.assert_close(attention.sum(dim=-1), torch.ones(2, 4, 65))
    fig = attention_figure(attention, item=1, heads=[0, 3], title="blocks.0")
    assert [t.get_text() for t in fig.axes[0].texts] == ["head 0", "head 3"]  # the heads' grid, one axes
