"""Figures in the notebook's theme (``theme=``) and readable at their default size: no text under 9 px,
layer names apart, whole steps on step axes, legends beside the data, the input as big as its attribution."""

from __future__ import annotations

import io
import itertools
from types import SimpleNamespace

import matplotlib.colors
import matplotlib.image
import matplotlib.text
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from hookwidgets.plots import (
    DARK,
    LIGHT,
    attention_heads_figure,
    bars_figure,
    cam_overlay_figure,
    feature_map_figure,
    figure_png,
    histogram_figure,
    matrix_figure,
    patch_grid_figure,
    patch_sweep_figure,
    stats_figure,
    summary_heatmap_figure,
    token_map_figure,
    update_ratio_figure,
    using_theme,
)
from hookwidgets.plots.distributed import rank_chart_figure
from hookwidgets.plots.overlay import input_image_figure
from hookwidgets.plots.theme import as_theme

DPI = 96  # figure_png's, the widget's


def _records(steps: int = 5, calls: int = 1) -> list[SimpleNamespace]:
    stats = {"mean": 0.5, "std": 1.0, "min": -1.0, "max": 2.0, "nan": 0, "inf": 0}
    return [SimpleNamespace(step=s, call=c, stats=dict(stats)) for s in range(steps) for c in range(calls)]


def _summary_rows(layers: int, steps: int = 4) -> list[dict]:
    return [
        {"path": f"model.layers.{i}.mlp.down_proj", "step": s, "grad_norm": 1.0 + i + s}
        for i in range(layers)
        for s in range(steps)
    ]


def _ratios(steps: int = 3) -> list[dict]:
    return [{"param": "fc.weight", "step": s, "ratio": 1e-3 * (s + 1)} for s in range(steps)]


FIGURES = {
    "histogram": lambda **kw: histogram_figure(torch.randn(100), title="h", **kw),
    "feature maps": lambda **kw: feature_map_figure(torch.randn(1, 10, 6, 6), title="conv1", **kw),
    "bars": lambda **kw: bars_figure(torch.randn(12), title="fc", **kw),
    "matrix": lambda **kw: matrix_figure(torch.randn(5, 7), title="m", **kw),
    "tokens": lambda **kw: token_map_figure(torch.randn(1, 6, 16), ["a", "b", "c", "d", "e", "f"], title="t", **kw),
    "heads": lambda **kw: attention_heads_figure(torch.rand(1, 2, 4, 4), ["a", "b", "c", "d"], title="at", **kw),
    "patch grid": lambda **kw: patch_grid_figure(torch.randn(1, 17, 8), class_token=True, grid=(4, 4), **kw),
    "patch sweep": lambda **kw: patch_sweep_figure(torch.randn(3, 5), title="sweep", **kw),
    "overlay": lambda **kw: cam_overlay_figure(torch.rand(1, 3, 16, 16), torch.rand(1, 4, 4), title="cam", **kw),
    "input": lambda **kw: input_image_figure(torch.rand(1, 3, 16, 16), title="input", **kw),
    "stats": lambda **kw: stats_figure(_records(), title="s", **kw),
    "summary": lambda **kw: summary_heatmap_figure(_summary_rows(6), **kw),
    "ratios": lambda **kw: update_ratio_figure(_ratios(), **kw),
    "ranks": lambda **kw: rank_chart_figure([], **kw),
}


def _pixels(fig) -> np.ndarray:
    return matplotlib.image.imread(io.BytesIO(figure_png(fig)))[..., :3]


def _rgb(color) -> np.ndarray:
    return np.array(matplotlib.colors.to_rgb(color))


def _texts(fig) -> list[matplotlib.text.Text]:
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]


@pytest.mark.parametrize("name", FIGURES)
def test_a_dark_theme_draws_the_page_background_and_light_text(name):
    fig = FIGURES[name](theme="dark")
    pixels = _pixels(fig)
    for corner in (pixels[0, 0], pixels[0, -1], pixels[-1, 0], pixels[-1, -1]):
        np.testing.assert_allclose(corner, _rgb(DARK.background), atol=1 / 255)
    for ax in fig.axes:
        assert matplotlib.colors.to_hex(ax.get_facecolor()) == DARK.background
    FigureCanvasAgg(fig).draw()  # the ticks are made when drawn: their labels too must be light
    for text in _texts(fig):
        # The feature map's channel numbers are white on their own dark boxes, in either theme.
        assert matplotlib.colors.to_hex(text.get_color()) in (DARK.foreground, "#ffffff"), text.get_text()


@pytest.mark.parametrize("name", FIGURES)
def test_no_text_is_drawn_below_9_px_at_the_default_size(name):
    fig = FIGURES[name]()
    FigureCanvasAgg(fig).draw()
    for text in _texts(fig):
        assert text.get_fontsize() * DPI / 72 >= 9, (text.get_text(), text.get_fontsize())


def test_without_a_theme_a_figure_keeps_the_light_look():
    pixels = _pixels(stats_figure(_records(), title="s"))
    np.testing.assert_allclose(pixels[0, 0], [1.0, 1.0, 1.0])
    fig = stats_figure(_records(), title="s", theme="light")
    assert matplotlib.colors.to_hex(fig.get_facecolor()) == LIGHT.background


def test_the_pages_colours_are_used_and_an_unreadable_one_is_left_at_the_named_themes():
    page = {"name": "dark", "background": "#1e1e1e", "foreground": "#d4d4d4"}
    fig = bars_figure(torch.randn(8), title="fc", theme=page)
    np.testing.assert_allclose(_pixels(fig)[0, 0], _rgb("#1e1e1e"), atol=1 / 255)
    assert matplotlib.colors.to_hex(fig.axes[0].title.get_color()) == "#d4d4d4"
    odd = as_theme({"name": "dark", "background": "var(--jp-layout-color1)", "foreground": 3})
    assert (odd.background, odd.foreground) == (DARK.background, DARK.foreground)
    with pytest.raises(ValueError, match="theme must be 'light', 'dark'"):
        bars_figure(torch.randn(8), theme="solarized")


def test_using_theme_is_the_default_inside_the_block_only():
    with using_theme("dark"):
        inside = bars_figure(torch.randn(8))
    outside = bars_figure(torch.randn(8))
    assert matplotlib.colors.to_hex(inside.get_facecolor()) == DARK.background
    assert matplotlib.colors.to_hex(outside.get_facecolor()) == "#ffffff"


def test_a_dark_feature_map_grid_has_no_white_gutters_or_empty_tiles():
    # 10 channels on a 4 × 3 grid: two empty tiles, and gutters between all of them
    fig = feature_map_figure(torch.rand(1, 10, 6, 6) * 0.5, title="conv1", theme="dark")
    grid = np.asarray(fig.axes[0].images[0].get_array())  # the composed tiles (channel numbers are text on top)
    assert not (grid[..., :3] == 255).all(axis=-1).any()
    assert (grid[..., :3] == [17, 17, 17]).all(axis=-1).any()  # the gutters and empty tiles: the background


def test_a_150_layer_summary_names_layers_readably_and_apart():
    fig = summary_heatmap_figure(_summary_rows(150))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    labels = [t for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert len(labels) >= 50  # every second or third layer named, not a handful
    assert all(t.get_fontsize() * DPI / 72 >= 9 for t in _texts(fig))
    boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.y0)
    assert all(upper.y0 > lower.y1 for lower, upper in itertools.pairwise(boxes))  # none over another


def test_step_axes_tick_whole_steps_only():
    for fig in (stats_figure(_records(steps=3, calls=2), title="s"), update_ratio_figure(_ratios(3))):
        ax = fig.axes[0]
        FigureCanvasAgg(fig).draw()
        low, high = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if low <= t <= high]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_the_statistics_legend_sits_beside_the_lines_not_over_them():
    fig = stats_figure(_records(steps=30), title="s")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(canvas.get_renderer())
    assert not legend.overlaps(ax.get_window_extent(canvas.get_renderer()))
    assert legend.x1 <= canvas.get_width_height()[0]  # and inside the figure


def test_the_input_is_drawn_as_big_as_its_attribution():
    image = torch.rand(1, 3, 24, 40)
    figures = [
        cam_overlay_figure(image, torch.rand(1, 6, 10), title="gradcam of class 3 at a rather long layer.name.here"),
        input_image_figure(image, title="input (item 0)"),
    ]
    sizes = []
    for fig in figures:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        box = fig.axes[0].images[0].get_window_extent(canvas.get_renderer())
        sizes.append((canvas.get_width_height()[0], round(box.width, 3), round(box.height, 3)))
    assert sizes[0] == sizes[1]


def test_a_deep_patch_sweep_names_its_layers_apart():
    layers = [f"model.layers.{i}" for i in range(120)]
    fig = patch_sweep_figure(torch.randn(120, 6), layers=layers, tokens=list("abcdef"), title="sweep")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    labels = [t for t in fig.axes[0].get_yticklabels() if t.get_text()]
    boxes = sorted((t.get_window_extent(canvas.get_renderer()) for t in labels), key=lambda b: b.y0)
    assert len(labels) >= 20 and all(upper.y0 > lower.y1 for lower, upper in itertools.pairwise(boxes))
    assert labels[1].get_text() == layers[int(fig.axes[0].get_yticks()[1])]  # each name at its own row
    assert "th layer labelled" in fig.axes[0].get_title()
