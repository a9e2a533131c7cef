"""Sequence figures drawn for the pane: as wide as the frame with their colour bar and norms inside, every
feature shown (averaged in blocks when more than pixels, said), heads in as many columns as the width holds,
and the values under the mouse equal to the tensor's."""

from __future__ import annotations

import io
import re

import matplotlib.image
import numpy as np
import pytest
import torch
from matplotlib.colors import LogNorm

from hookwidgets.plots import attention_figure, attention_heads_figure, token_map_figure
from hookwidgets.plots.frame import CSS_DPI, using_frame
from hookwidgets.plots.hover import figure_image

WIDTHS = (400, 600, 900, 1400)
TOKENS = [f"tok{i}" for i in range(12)]


def _title(fig) -> str:
    """The heads' title (over their grid, maybe on more lines) as one line."""
    return " ".join(fig.axes[0].get_title().split())


def _png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels of a PNG."""
    height, width = matplotlib.image.imread(io.BytesIO(png)).shape[:2]
    return width, height


def _inside(fig) -> None:
    """Every axes (maps, norms, colour bars) lies within the figure's box, and the figure is at most the frame wide."""
    fig.canvas.draw()
    box = fig.bbox
    for ax in fig.axes:
        tight = ax.get_tightbbox()
        assert tight.x0 >= box.x0 - 1 and tight.x1 <= box.x1 + 1, (ax, tight, box)


def _cells(region) -> np.ndarray:
    return np.frombuffer(region["values"], "<f4").reshape(region["rows"], region["cols"])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("ratio", [1, 2])
def test_a_token_map_is_as_wide_as_the_frame_at_its_pixel_ratio_with_norms_and_colour_bar_inside(width, ratio):
    with using_frame({"width": width, "ratio": ratio}):
        fig = token_map_figure(torch.randn(1, 12, 768), TOKENS, title="h.0", diverging=True)
        _inside(fig)
        png, hover = figure_image(fig)
    natural, _ = _png_size(png)
    css = fig.get_size_inches()[0] * CSS_DPI
    assert css <= width and natural <= ratio * width
    assert natural >= (1.9 if ratio == 2 else 1.0) * css
    assert len(fig.axes) == 3  # map, norms, colour bar: all three inside the box (checked above)
    assert hover["ratio"] == ratio and hover["width"] <= width


def test_a_wide_token_map_shows_every_feature_averaged_in_blocks_and_says_so():
    hidden = torch.randn(1, 12, 768)
    with using_frame({"width": 600, "ratio": 2}):
        fig = token_map_figure(hidden, TOKENS, title="gpt2.h.0")
        _, hover = figure_image(fig)
    region, _ = hover["regions"]  # the map, the norms
    stride = region["col"]["stride"]
    assert stride > 1 and region["col"]["count"] == 768 and region["cols"] * stride >= 768
    assert f"features averaged in blocks of {stride}" in fig.axes[0].get_title()
    assert region["aggregate"] == "mean" and region["row"]["labels"] == TOKENS
    expected = hidden[0, 5, 3 * stride : 4 * stride].mean().item()
    assert _cells(region)[5, 3] == pytest.approx(expected, rel=1e-5)
    image = fig.axes[0].get_images()[0]
    assert image.get_array().shape == (12, region["cols"])
    assert image.get_extent()[1] >= 767  # the last feature is on the map


def test_a_token_map_that_fits_shows_each_feature_and_its_value_under_the_mouse():
    hidden = torch.randn(2, 16, 128)
    with using_frame({"width": 900, "ratio": 1}):
        fig = token_map_figure(hidden, [f"w{i}" for i in range(16)], item=1, title="h")
        _, hover = figure_image(fig)
    region, _ = hover["regions"]  # the map, the norms
    assert (region["rows"], region["cols"]) == (16, 128) and region["aggregate"] == ""
    assert region["row"]["name"] == "token" and region["row"]["labels"][7] == "w7"
    assert region["col"]["name"] == "feature" and region["quantity"] == "activation"
    assert _cells(region)[7, 100] == hidden[1, 7, 100].item()  # the float32 itself
    norms = hover["regions"][1]
    assert (
        norms["quantity"] == "norm" and norms["row"]["labels"][7] == "w7" and (norms["rows"], norms["cols"]) == (16, 1)
    )
    assert _cells(norms)[7, 0] == pytest.approx(hidden[1, 7].norm().item(), rel=1e-6)
    assert "averaged" not in fig.axes[0].get_title()
    x0, y0, x1, y1 = region["box"]
    assert 0 <= x0 < x1 <= 900 and 0 <= y0 < y1  # in the image's CSS pixels


def test_a_gradients_colour_bar_writes_its_exponent_and_short_labels_and_its_clip_is_said():
    grad = torch.randn(1, 6, 32) * 2e-4
    with using_frame({"width": 600, "ratio": 1}):
        fig = token_map_figure(grad, title="grad", diverging=True)
        _, hover = figure_image(fig)
    assert hover["regions"][0]["quantity"] == "gradient"
    bar = fig.axes[2]
    low, high = bar.get_ylim()
    assert low == pytest.approx(-high)  # symmetric around zero
    assert "×10⁻⁴" in bar.yaxis.get_offset_text().get_text().replace("−", "-")
    labels = [re.sub(r"[${}]|\\mathdefault", "", t.get_text()) for t in bar.get_yticklabels() if t.get_text()]
    assert labels and all(len(t) <= 4 for t in labels), labels  # "−5", "0", "5": the ×10⁻⁴ is above the bar
    assert not any("0.0002" in t for t in labels)
    outlier = torch.randn(1, 20, 64)
    outlier[0, 3, 3] = 1e4
    clipped = token_map_figure(outlier, title="g", diverging=True)
    assert "colours clipped at ±" in clipped.axes[0].get_title()


def test_token_and_feature_axes_tick_whole_numbers_only():
    with using_frame({"width": 1400, "ratio": 1}):
        fig = token_map_figure(torch.randn(1, 3, 5), title="small")
        heads = attention_heads_figure(torch.rand(1, 2, 3, 3), title="small")
        for figure in (fig, heads):
            figure.canvas.draw()
    texts = [t.get_text() for t in fig.axes[0].get_xticklabels() + fig.axes[0].get_yticklabels()]
    texts += [t.get_text() for t in heads.axes[0].get_xticklabels() + heads.axes[0].get_yticklabels()]
    assert texts and all(t.replace("−", "-").lstrip("-").isdigit() for t in texts if t), texts


@pytest.mark.parametrize("width", WIDTHS)
def test_all_twelve_heads_fit_the_frame_each_readable(width):
    probs = torch.softmax(torch.randn(1, 12, 10, 10), dim=-1)
    with using_frame({"width": width, "ratio": 2}):
        fig = attention_heads_figure(probs, TOKENS[:10], title="attn")
        _inside(fig)
        png, hover = figure_image(fig)
    boxes = [r["box"] for r in hover["regions"]]  # each head's cells in the image's CSS pixels
    assert [r["label"] for r in hover["regions"]] == [f"head {h}" for h in range(12)]
    css_width = fig.get_size_inches()[0] * CSS_DPI
    assert css_width <= width and _png_size(png)[0] >= 1.9 * css_width
    assert all(x0 >= 0 and x1 <= css_width for x0, _, x1, _ in boxes)
    assert min(min(x1 - x0, y1 - y0) for x0, y0, x1, y1 in boxes) >= 100  # CSS px: each head readable
    columns = len({round(x0) for x0, *_ in boxes})
    assert columns >= (3 if width >= 600 else 2)


def test_each_heads_hover_names_the_head_the_query_and_key_tokens_and_equals_the_probability():
    probs = torch.softmax(torch.randn(2, 4, 6, 6), dim=-1)
    words = ["the", "cat", "sat", "on", "a", "mat"]
    with using_frame({"width": 600, "ratio": 1}):
        _, hover = figure_image(attention_heads_figure(probs, words, item=1, title="attn"))
    assert [r["label"] for r in hover["regions"]] == ["head 0", "head 1", "head 2", "head 3"]
    region = hover["regions"][2]
    assert region["row"]["name"] == "query" and region["row"]["labels"] == words
    assert region["col"]["name"] == "key" and region["col"]["labels"] == words
    assert region["quantity"] == "attention"
    assert _cells(region)[4, 1] == probs[1, 2, 4, 1].item()


def test_cross_attention_hover_names_the_keys_apart():
    probs = torch.softmax(torch.randn(1, 2, 3, 5), dim=-1)
    with using_frame({"width": 600, "ratio": 1}):
        _, hover = figure_image(attention_heads_figure(probs, ["a", "b", "c"], key_tokens=list("vwxyz")))
    assert hover["regions"][0]["row"]["labels"] == ["a", "b", "c"]
    assert hover["regions"][0]["col"]["labels"] == list("vwxyz")
    x0, y0, x1, y1 = hover["regions"][0]["box"]
    assert x1 - x0 > 1.5 * (y1 - y0)  # 3 queries over 5 keys: a wide panel, not a square of tall cells


def test_attention_scales_per_row_and_log_are_drawn_and_said_and_a_wrong_one_is_refused():
    probs = torch.softmax(torch.randn(1, 2, 5, 5) * 3, dim=-1)
    with using_frame({"width": 600, "ratio": 1}):
        per_row = attention_heads_figure(probs, title="a", scale="per-row")
        _, hover = figure_image(per_row)
    drawn = per_row.axes[0].get_images()[0].get_array()
    np.testing.assert_allclose(drawn.max(axis=1), 1.0, rtol=1e-6)
    assert "each query row scaled to its own max" in _title(per_row)
    assert _cells(hover["regions"][1])[2, 3] == probs[0, 1, 2, 3].item()  # the probability, not the ratio
    log = attention_heads_figure(probs, title="a", scale="log")
    assert isinstance(log.axes[0].get_images()[0].norm, LogNorm)
    assert "log scale, floored at" in _title(log)
    assert "log scale" not in attention_heads_figure(probs, title="a").get_suptitle()
    with pytest.raises(ValueError, match="scale must be one of 'linear', 'per-row', 'log', not 'cubic'"):
        attention_heads_figure(probs, scale="cubic")
    assert attention_figure(probs[0], scale="log").axes[0].get_images()[0].norm.vmin > 0


def test_a_long_attention_is_averaged_to_the_panel_and_its_hover_stays_bounded():
    probs = torch.softmax(torch.randn(1, 12, 400, 400), dim=-1)
    with using_frame({"width": 600, "ratio": 2}):
        fig = attention_heads_figure(probs, title="long")
        _, hover = figure_image(fig)
    assert "queries averaged in blocks of" in _title(fig)
    assert sum(r["rows"] * r["cols"] for r in hover["regions"]) <= 65_536
    region = hover["regions"][0]
    rs, cs = region["row"]["stride"], region["col"]["stride"]
    assert region["aggregate"] == "mean" and region["row"]["count"] == 400 and region["row"]["labels"] is None
    expected = probs[0, 0, rs : 2 * rs, 2 * cs : 3 * cs].mean().item()
    assert _cells(region)[1, 2] == pytest.approx(expected, rel=1e-4)
    images = fig.axes[0].get_images()
    top = max(float(np.nanmax(image.get_array())) for image in images)
    assert images[0].norm.vmax == pytest.approx(top)  # the colours span the block means drawn, not the raw peak
    assert top < probs[0].max().item()


def test_in_the_narrowest_pane_long_tokens_are_cut_and_the_colour_bar_goes_under_the_map():
    long = [f"{'very_long_token_' * 8}{i}" for i in range(6)]
    with using_frame({"width": 240, "ratio": 2}):
        fig = token_map_figure(torch.randn(1, 6, 768) * 1e-3, long, title="narrow", diverging=True)
        _inside(fig)
        _, hover = figure_image(fig)
        heads = attention_heads_figure(torch.softmax(torch.randn(1, 3, 6, 6), -1), long, title="narrow")
        _inside(heads)
    bar = fig.axes[2]
    assert bar.get_position().width > bar.get_position().height  # horizontal, under the map
    exponent = bar.xaxis.get_offset_text()
    assert "×10⁻³" in exponent.get_text().replace("−", "-") and exponent.get_window_extent().y0 >= 0  # in view
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert all(t.endswith("…") and len(t) < len(long[0]) for t in ticks)
    assert hover["regions"][0]["row"]["labels"] == long  # the hover names each token whole
    assert fig.get_size_inches()[0] * CSS_DPI <= 240 and heads.get_size_inches()[0] * CSS_DPI <= 240


def test_in_a_narrow_pane_heads_go_two_a_row_under_a_title_kept_inside():
    words = ["Hello", " world", ",", " the", " cat", " sat", "."]
    with using_frame({"width": 400, "ratio": 1}):
        fig = attention_heads_figure(
            torch.softmax(torch.randn(1, 12, 7, 7), -1), words, title="transformer.h.0.attn · attention probabilities"
        )
        _inside(fig)
        _, hover = figure_image(fig)
    assert len({round(r["box"][0]) for r in hover["regions"]}) == 2  # two columns, six rows
    title = fig.axes[0].title.get_window_extent()
    assert title.x0 >= 0 and title.x1 <= fig.bbox.x1 and title.y1 <= fig.bbox.y1
    assert _title(fig).startswith("transformer.h.0.attn · attention probabilities")
