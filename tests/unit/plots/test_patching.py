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
    assert ax.get_title() == r"patching \$x\$ [red: higher]"  # a model's string is drawn as text, never as mathtext
    assert figure_png(fig)[:8] == PNG


def test_given_labels_win_and_a_plain_tensor_is_labelled_by_index():
    fig = patch_sweep_figure(torch.zeros(3, 4), tokens=WORDS, layers=["a", "b", "c"])
    assert _ticks(fig.axes[0].get_xticklabels()) == WORDS and _ticks(fig.axes[0].get_yticklabels()) == ["a", "b", "c"]
    plain = patch_sweep_figure(np.zeros((2, 3)))
    assert _ticks(plain.axes[0].get_xticklabels()) == ["0", "1", "2"]
    assert _ticks(plain.axes[0].get_yticklabels()) == ["0", "1"]


def test_nonfinite_cells_are_counted_and_wrong_shapes_or_labels_refused():
    fig = patch_sweep_figure(torch.tensor([[float("nan"), 1.0], [float("inf"), -1.0]]), title="s")
    assert fig.axes[0].get_title() == "s [red: higher] [1 NaN, 1 Inf, drawn magenta]"
    with pytest.raises(ValueError, match=r"\(layers, positions\), got shape \(2, 3, 4\)"):
        patch_sweep_figure(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="3 token labels for 4 positions"):
        patch_sweep_figure(torch.zeros(2, 4), tokens=WORDS[:3])
    with pytest.raises(ValueError, match="1 layer names for 2 rows"):
        patch_sweep_figure(torch.zeros(2, 4), layers=["h.0"])
    assert "empty" in patch_sweep_figure(torch.zeros(0, 4), title="none").axes[0].get_title()


def _red_at(fig, value: float) -> bool:
    """Whether the figure's colour for ``value`` is red (more red than blue)."""
    image = fig.axes[0].get_images()[0]
    r, _, b, _ = image.get_cmap()(image.norm(value))
    return r > b + 0.2


@pytest.mark.parametrize("clean", [2.0, -2.0])
def test_a_full_restoration_is_red_and_the_words_say_red_is_toward_the_clean_run_whatever_its_sign(clean):
    from hookwidgets.plots.patching import restoration

    sweep = torch.tensor([[0.0, clean, clean / 2], [0.0, 0.0, -clean]])
    sweep.clean, sweep.corrupted = clean, 0.0
    fig = patch_sweep_figure(sweep, title="s")
    assert _red_at(fig, clean) and _red_at(fig, clean / 2)  # all of it restored, and half
    assert not _red_at(fig, -clean)  # away from the clean run: blue
    colours = restoration(clean, 0.0)
    assert colours.legend.startswith("red: toward the clean run") and "[red: toward clean]" in fig.axes[0].get_title()


def test_a_sweep_centred_on_the_corrupted_value_and_with_no_direction_says_red_is_only_higher():
    from hookwidgets.plots.patching import restoration

    sweep = torch.tensor([[3.0, 5.0, 1.0]])
    sweep.clean, sweep.corrupted = 1.0, 3.0
    fig = patch_sweep_figure(sweep)
    assert fig.axes[0].get_images()[0].get_clim() == (1.0, 5.0)  # symmetric around the corrupted run's value
    assert _red_at(fig, 1.0) and not _red_at(fig, 5.0)
    assert restoration(2.0, 2.0).legend.startswith("red: above 2, blue: below (the clean and corrupted runs measure")
    assert "[red: higher]" in patch_sweep_figure(torch.ones(1, 3)).axes[0].get_title()


def test_the_positions_where_clean_and_corrupted_differ_are_marked_on_the_axis_and_in_the_hover():
    from hookwidgets.plots.hover import figure_image

    sweep = torch.randn(2, 4)
    sweep.tokens, sweep.differs = WORDS, [1, 3]
    fig = patch_sweep_figure(sweep, title="s")
    ax = fig.axes[0]
    marks = [t for t in ax.texts if t.get_text() == "▼"]
    assert sorted(t.xy[0] for t in marks) == [1, 3]
    assert [t.get_fontweight() for t in ax.get_xticklabels()] == ["normal", "bold", "normal", "bold"]
    assert "[▼: clean and corrupted differ]" in ax.get_title()
    _, hover = figure_image(fig)
    region = next(r for r in hover["regions"] if r.get("col"))
    assert region["col"]["labels"] == ["the", "cat ▼ differs", "sat", "on ▼ differs"]
    assert region["quantity"] == "patching effect"
    sweep.metric = "recovered"
    assert figure_image(patch_sweep_figure(sweep))[1]["regions"][0]["quantity"] == "fraction recovered"
