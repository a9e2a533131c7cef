"""Sequence figures: a token map, attention heads and a patch grid, labelled with tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookwidgets.plots import (
    NONFINITE_COLOR,
    attention_heads_figure,
    figure_png,
    patch_grid_figure,
    token_map_figure,
)

PNG = b"\x89PNG\r\n\x1a\n"
WORDS = ["the", "cat", "sat", "on", "a", "mat"]


def _title(fig) -> str:
    """The heads' title (over their grid, maybe on more lines) as one line."""
    return " ".join(fig.axes[0].get_title().split())


def _ticks(ax, axis: str) -> list[str]:
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in labels]


def _bars(ax) -> list:
    return [p for p in ax.patches if p.get_height() > 0]


def test_a_token_map_labels_each_token_row_and_draws_each_tokens_norm():
    hidden = torch.randn(2, 6, 10)
    fig = token_map_figure(hidden, WORDS, item=1, title="h.0 · output.0")
    heat, norms = fig.axes[0], fig.axes[1]
    assert _ticks(heat, "y") == WORDS
    np.testing.assert_allclose(heat.get_images()[0].get_array().data, hidden[1].numpy(), rtol=1e-6)
    widths = [p.get_width() for p in norms.patches]
    np.testing.assert_allclose(widths, hidden[1].norm(dim=1).numpy(), rtol=1e-5)
    assert heat.get_title() == "h.0 · output.0"
    assert figure_png(fig)[:8] == PNG


def test_a_token_map_draws_the_first_features_and_its_norms_over_all_of_them():
    hidden = torch.randn(1, 3, 300)
    fig = token_map_figure(hidden, max_features=50, title="mlp")
    assert fig.axes[0].get_images()[0].get_array().shape == (3, 50)
    assert fig.axes[0].get_title() == "mlp (first 50 of 300 features)"
    np.testing.assert_allclose([p.get_width() for p in fig.axes[1].patches], hidden[0].norm(dim=1), rtol=1e-5)
    assert _ticks(fig.axes[0], "y") == ["0", "1", "2"]  # no tokens: their positions


def test_a_long_sequence_labels_every_kth_token_and_says_so():
    tokens = [f"w{i}" for i in range(300)]
    fig = token_map_figure(torch.randn(1, 300, 8), tokens, title="long")
    labels = _ticks(fig.axes[0], "y")
    step = int(labels[1][1:])
    assert step > 1 and labels == tokens[::step] and len(labels) <= 64
    assert fig.axes[0].get_title() == f"long [every {step}th token labelled]"


def test_a_token_map_marks_nonfinite_values_and_their_tokens_norm_magenta():
    hidden = torch.randn(1, 4, 5)
    hidden[0, 2, 3] = float("nan")
    fig = token_map_figure(hidden, WORDS[:4], title="t")
    assert "[1 NaN, drawn magenta]" in fig.axes[0].get_title()
    magenta = [p for p in fig.axes[1].patches if p.get_facecolor()[:3] == (1.0, 0.0, 1.0)]
    assert len(magenta) == 1 and magenta[0].get_y() == pytest.approx(2 - 0.425)
    assert figure_png(fig)[:8] == PNG


def test_a_token_map_of_complex_values_draws_magnitudes_and_wrong_labels_are_refused():
    z = torch.complex(torch.zeros(1, 2, 3), torch.ones(1, 2, 3))
    assert token_map_figure(z, title="z").axes[0].get_title() == "z (magnitude)"
    with pytest.raises(ValueError, match="3 token labels for 2 tokens"):
        token_map_figure(torch.randn(1, 2, 3), ["a", "b", "c"])
    with pytest.raises(IndexError, match="item 2 is out of range: the tensor holds 1 items"):
        token_map_figure(torch.randn(1, 2, 3), item=2)
    assert "empty (0 elements)" in token_map_figure(torch.zeros(1, 0, 3), title="e").axes[0].get_title()


def test_attention_heads_are_labelled_with_tokens_and_one_head_can_be_picked():
    probs = torch.softmax(torch.randn(2, 4, 6, 6), dim=-1)
    fig = attention_heads_figure(probs, WORDS, item=1, title="attn")
    grid = fig.axes[0]  # every head an image on one axes, titled in it
    assert [t.get_text() for t in grid.texts] == ["head 0", "head 1", "head 2", "head 3"]
    assert _ticks(grid, "x")[:6] == WORDS and _ticks(grid, "y")[:6] == WORDS
    one = attention_heads_figure(probs, WORDS, item=1, heads=2, title="attn")
    assert [t.get_text() for t in one.axes[0].texts] == ["head 2"]
    (image,) = one.axes[0].get_images()
    np.testing.assert_allclose(image.get_array().data, probs[1, 2].numpy(), rtol=1e-6)
    with pytest.raises(IndexError, match="head 4 is out of range: the probabilities hold 4 heads"):
        attention_heads_figure(probs, heads=4)


def test_cross_attention_labels_queries_and_keys_apart():
    probs = torch.softmax(torch.randn(1, 2, 3, 6), dim=-1)  # 3 decoder queries over 6 encoder keys
    fig = attention_heads_figure(probs, ["a", "big", "hat"], key_tokens=WORDS, title="cross")
    panel = fig.axes[0]
    assert _ticks(panel, "y") == ["a", "big", "hat"] and _ticks(panel, "x") == WORDS * 2  # 2 heads side by side
    with pytest.raises(ValueError, match="2 token labels for 6 keys"):
        attention_heads_figure(probs, ["a", "big", "hat"], key_tokens=["x", "y"])


def test_attention_heads_of_a_long_sequence_label_every_kth_token_and_count_nonfinite():
    probs = torch.softmax(torch.randn(1, 1, 200, 200), dim=-1)
    probs[0, 0, 5, 5] = float("inf")
    fig = attention_heads_figure(probs, [f"t{i}" for i in range(200)], title="long")
    labels = _ticks(fig.axes[0], "x")
    assert 1 < len(labels) <= 64 and labels[0] == "t0"
    assert "[1 Inf, drawn magenta]" in _title(fig) and "th token labelled]" in _title(fig)


def test_a_patch_grid_draws_each_patchs_norm_and_the_class_token_apart():
    tokens = torch.randn(2, 17, 8)
    fig = patch_grid_figure(tokens, item=1, title="vit.layers.0")
    grid, cls = fig.axes[0], fig.axes[1]
    norms = tokens[1].norm(dim=1)
    np.testing.assert_allclose(grid.get_images()[0].get_array().data, norms[1:].reshape(4, 4), rtol=1e-5)
    np.testing.assert_allclose(cls.get_images()[0].get_array().data, norms[:1].reshape(1, 1), rtol=1e-5)
    assert grid.get_images()[0].get_clim() == cls.get_images()[0].get_clim()  # one scale
    assert grid.get_title() == "vit.layers.0 · norm over 8 features"
    assert "class" in cls.get_xlabel()


def test_a_patch_grid_draws_several_tokens_before_the_patches_apart_in_a_column():
    tokens = torch.randn(1, 2 + 16, 8)  # DeiT: a class token and a distillation token
    fig = patch_grid_figure(tokens, class_token=2, title="deit.layers.0")
    grid, leading = fig.axes[0], fig.axes[1]
    norms = tokens[0].norm(dim=1)
    np.testing.assert_allclose(grid.get_images()[0].get_array().data, norms[2:].reshape(4, 4), rtol=1e-5)
    np.testing.assert_allclose(leading.get_images()[0].get_array().data, norms[:2].reshape(2, 1), rtol=1e-5)
    assert "2 tokens" in leading.get_xlabel()


def test_a_patch_grid_of_one_feature_without_class_token_and_bad_grids():
    tokens = torch.randn(1, 9, 4)
    fig = patch_grid_figure(tokens, class_token=False, feature=2, title="x")
    assert len(fig.axes) == 2  # grid and colour bar: no class token
    np.testing.assert_allclose(fig.axes[0].get_images()[0].get_array().data, tokens[0, :, 2].reshape(3, 3))
    assert fig.axes[0].get_title() == "x · feature 2"
    with pytest.raises(ValueError, match="7 patch tokens do not fill a square grid: pass grid="):
        patch_grid_figure(torch.randn(1, 8, 4))
    rect = patch_grid_figure(torch.randn(1, 7, 4), class_token=False, grid=(1, 7))
    assert rect.axes[0].get_images()[0].get_array().shape == (1, 7)
    with pytest.raises(IndexError, match="feature 9 is out of range"):
        patch_grid_figure(tokens, feature=9, class_token=False)


def test_a_patch_grid_marks_nonfinite_patches():
    tokens = torch.randn(1, 5, 4)
    tokens[0, 3, 0] = float("nan")
    fig = patch_grid_figure(tokens, title="p")
    assert "[1 NaN, drawn magenta]" in fig.axes[0].get_title()
    assert len(fig.axes[0].get_images()) == 2  # the data, and the magenta marks over it
    assert NONFINITE_COLOR == "#ff00ff" and figure_png(fig)[:8] == PNG


NAME = r"$\frac{a$ & <b>x</b>"


def test_token_labels_and_titles_are_drawn_as_they_are_never_as_mathtext():
    figures = [
        token_map_figure(torch.randn(1, 2, 3), [NAME, "b"], title=NAME),
        attention_heads_figure(torch.rand(1, 1, 2, 2), [NAME, "b"], title=NAME),
        patch_grid_figure(torch.randn(1, 5, 3), title=NAME),
    ]
    for fig in figures:
        assert figure_png(fig, dpi=40)[:8] == PNG  # mathtext would raise here
        texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
        assert any(NAME.replace("$", r"\$") in t for t in texts)
