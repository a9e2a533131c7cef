"""The patch sweep figure: layers × positions, diverging around zero, labelled with layers and tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookwidgets.plots import figure_png, patch_sweep_figure

PNG = b"\x89PNG\r\n\x1a\n"
WORDS = ["the", "cat", "sat", "on"]


def _ticks(labels) -> list[str]:
    return [t.get_text() for t in labels]


def test_a_sweep_is_drawn_with_its_layers_and_tokens_on_a_scale_centred_on_zero():
    sweep = torch.tensor([[0.5, -2.0, 0.0, 1.0], [0.1, 0.2, -0.3, 1.5]])
    sweep.layers, sweep.tokens = ["h.0", "h.1"], WORDS
    fig = patch_sweep_figure(sweep, title="patching $x$")
    ax = fig.axes[0]
    image = ax.get_images()[0]
    np.testing.assert_allclose(image.get_array().data, sweep.numpy())
    assert image.get_clim() == (-2.0, 2.0)
    assert image.get_cmap().name.startswith("RdBu_r")
    assert _ticks(ax.get_xticklabels()) == WORDS and _ticks(ax.get_yticklabels()) == ["h.0", "h.1"]
    assert ax.get_title() == r"patching \$x\$"  # a model's string is drawn as text, never as mathtext
    assert figure_png(fig)[:8] == PNG


def test_given_labels_win_and_a_plain_tensor_is_labelled_by_index():
    fig = patch_sweep_figure(torch.zeros(3, 4), tokens=WORDS, layers=["a", "b", "c"])
    assert _ticks(fig.axes[0].get_xticklabels()) == WORDS and _ticks(fig.axes[0].get_yticklabels()) == ["a", "b", "c"]
    plain = patch_sweep_figure(np.zeros((2, 3)))
    assert _ticks(plain.axes[0].get_xticklabels()) == ["0", "1", "2"]
    assert _ticks(plain.axes[0].get_yticklabels()) == ["0", "1"]


def test_nonfinite_cells_are_counted_and_wrong_shapes_or_labels_refused():
    fig = patch_sweep_figure(torch.tensor([[float("nan"), 1.0], [float("inf"), -1.0]]), title="s")
    assert fig.axes[0].get_title() == "s [1 NaN, 1 Inf, drawn magenta]"
    with pytest.raises(ValueError, match=r"\(layers, positions\), got shape \(2, 3, 4\)"):
        patch_sweep_figure(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="3 token labels for 4 positions"):
        patch_sweep_figure(torch.zeros(2, 4), tokens=WORDS[:3])
    with pytest.raises(ValueError, match="1 layer names for 2 rows"):
        patch_sweep_figure(torch.zeros(2, 4), layers=["h.0"])
    assert "empty" in patch_sweep_figure(torch.zeros(0, 4), title="none").axes[0].get_title()
