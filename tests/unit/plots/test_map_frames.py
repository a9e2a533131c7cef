"""Feature and gradient maps drawn for the pane: as wide as the frame, crisp at its pixel ratio, every tile
described for the hover with the tensor's own values, colour bars that say their scale."""

from __future__ import annotations

import io

import matplotlib.image
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from hookwidgets.plots import (
    cam_overlay_figure,
    feature_map_figure,
    gradient_map_figure,
    patch_grid_figure,
    patch_sweep_figure,
)
from hookwidgets.plots.frame import Frame, using_frame
from hookwidgets.plots.hover import figure_image
from hookwidgets.plots.overlay import input_image_figure

WIDTHS = (400, 600, 900, 1400)


def _draw(draw, frame: Frame):
    with using_frame(frame):
        fig = draw()
        png, hover = figure_image(fig)
    return fig, matplotlib.image.imread(io.BytesIO(png), format="png"), hover


def _values(region) -> np.ndarray:
    return np.frombuffer(region["values"], "<f4").reshape(region["rows"], region["cols"])


def _texts_inside(fig) -> None:
    """Every drawn text (title, labels, colour-bar ticks and its ×10ⁿ) lies within the figure's box."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    hidden = set()  # tick labels past the axis' ends, or of an axes turned off, are not drawn
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks():
                if not ax.axison or not low - 1e-12 <= tick.get_loc() <= high + 1e-12:
                    hidden.update((id(tick.label1), id(tick.label2)))
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text() and id(text) not in hidden:
            extent = text.get_window_extent(renderer)
            assert box.x0 - 0.5 <= extent.x0 and extent.x1 <= box.x1 + 0.5, f"{text.get_text()!r} leaves the figure"
            assert box.y0 - 0.5 <= extent.y0 and extent.y1 <= box.y1 + 0.5, f"{text.get_text()!r} leaves the figure"
    for ax in fig.axes:
        assert ax.get_position().x1 <= 1 + 1e-9


@pytest.mark.parametrize("ratio", [1.0, 2.0])
@pytest.mark.parametrize("width", WIDTHS)
def test_a_64_map_grid_fits_the_frame_at_its_pixel_ratio(width, ratio):
    maps = torch.rand(1, 64, 56, 56, generator=torch.Generator().manual_seed(0))
    fig, png, hover = _draw(
        lambda: feature_map_figure(maps, max_channels=64, title="layer1.0.conv1"), Frame(width, ratio)
    )
    assert hover["width"] <= width and png.shape[1] <= ratio * width + 1
    assert abs(png.shape[1] - ratio * hover["width"]) <= 1  # natural = ratio × CSS: ≥ 1.9× at ratio 2
    _texts_inside(fig)
    # The grid is drawn 1:1 in device pixels: a 56×56 map is 56 × a whole zoom, never resampled.
    tile = _values(hover["regions"][0])
    assert len(hover["regions"]) == 64 and tile.shape == (28, 28)


def test_the_column_count_follows_the_width_and_ratio_2_doubles_the_device_pixels_per_cell():
    maps = torch.rand(1, 64, 56, 56, generator=torch.Generator().manual_seed(0))

    def layout(width, ratio):
        fig, png, hover = _draw(lambda: feature_map_figure(maps, max_channels=64), Frame(width, ratio))
        grid = fig.axes[0].get_images()[0].get_array()
        boxes = [r["box"] for r in hover["regions"]]
        columns = len({round(b[0]) for b in boxes})
        return columns, grid.shape, png.shape

    columns_600, grid_600, _ = layout(600, 1.0)
    columns_900, grid_900, _ = layout(900, 1.0)
    assert columns_600 == 8 and grid_600 == (8 * 57 - 1, 8 * 57 - 1, 4)  # 56 px tiles, 1 px apart, in 530 px
    assert columns_900 == 13 and grid_900 == (5 * 57 - 1, 13 * 57 - 1, 4)  # the wider pane: fewer rows
    columns_hidpi, grid_hidpi, png_hidpi = layout(600, 2.0)
    assert columns_hidpi == 8 and grid_hidpi == (8 * 114 - 2, 8 * 114 - 2, 4)  # ×2 per cell, 2 device px apart
    assert png_hidpi[1] <= 1201


def test_small_maps_are_crisp_blocks_twice_as_many_device_pixels_at_ratio_2():
    maps = torch.randn(1, 4, 7, 7, generator=torch.Generator().manual_seed(2))
    blocks = {}
    for ratio in (1.0, 2.0):
        fig, _, hover = _draw(lambda: feature_map_figure(maps), Frame(600, ratio))
        grid = fig.axes[0].get_images()[0].get_array()
        zoom = grid.shape[1] // (4 * 7)  # one row of 4 tiles, each 7 × a whole zoom (plus thin gutters)
        cell = grid[4 * zoom : 5 * zoom, 5 * zoom : 6 * zoom, :3]  # map pixel (4, 5) of channel 0
        assert (cell == cell[0, 0]).all()  # nearest: one colour per map pixel
        assert hover["pixelated"]
        blocks[ratio] = zoom
    assert blocks[1.0] == 12 and blocks[2.0] == 24


def test_channel_labels_are_drawn_at_the_higher_dpi_not_upscaled():
    box = {ratio: _box_height(ratio) for ratio in (1.0, 2.0)}
    assert box[1.0] >= 9 and box[2.0] >= 2 * box[1.0] - 1  # the box (and the text in it) sized in device pixels


def _box_height(ratio: float) -> int:
    """Device pixels of the dark label box down the first tile's left column (a constant map under it)."""
    with using_frame(Frame(600, ratio)):
        fig = feature_map_figure(torch.ones(1, 1, 7, 7))
    grid = fig.axes[0].get_images()[0].get_array()[..., :3].astype(int)
    dark = grid[:, 1].sum(axis=-1) < grid[-1, 1].sum()
    return int(np.argmin(dark))


def test_every_tile_is_described_by_its_channel_with_the_tensors_values():
    maps = torch.randn(1, 10, 7, 7, generator=torch.Generator().manual_seed(4))
    maps[0, 6] += 5.0  # the highest mean: drawn first
    _, _, hover = _draw(lambda: feature_map_figure(maps, order="mean", max_channels=4), Frame(600, 2.0))
    regions = hover["regions"]
    order = torch.argsort(-maps[0].mean(dim=(1, 2)))[:4].tolist()
    assert [r["label"] for r in regions] == [f"channel {c}" for c in order] and order[0] == 6
    for region, channel in zip(regions, order, strict=True):
        assert region["quantity"] == "activation" and region["aggregate"] == ""
        assert region["row"]["name"] == "row" and region["col"]["name"] == "column"
        np.testing.assert_array_equal(_values(region), maps[0, channel].numpy())
    (left, top, right, bottom) = regions[0]["box"]
    assert right - left == pytest.approx(7 * 24 / 2) and bottom - top == pytest.approx(7 * 24 / 2)  # CSS px
    _, _, grads = _draw(lambda: gradient_map_figure(maps), Frame(600, 1.0))
    assert {r["quantity"] for r in grads["regions"]} == {"gradient"}
    _, _, own = _draw(lambda: feature_map_figure(maps, scale="channel"), Frame(600, 1.0))
    assert all("own scale" in r["quantity"] for r in own["regions"])
    np.testing.assert_array_equal(_values(own["regions"][3]), maps[0, 3].numpy())  # the values, not the colours


def test_a_large_grid_describes_block_means_within_the_bound_and_says_so():
    maps = torch.rand(1, 64, 56, 56, generator=torch.Generator().manual_seed(5))
    fig, _, hover = _draw(lambda: feature_map_figure(maps, max_channels=64, title="c"), Frame(900, 1.0))
    assert sum(r["rows"] * r["cols"] for r in hover["regions"]) <= 65_536
    region = hover["regions"][17]
    assert region["label"] == "channel 17" and region["aggregate"] == "mean"
    assert region["row"]["stride"] == 2 and region["col"]["stride"] == 2 and region["row"]["count"] == 56
    means = maps[0, 17].reshape(28, 2, 28, 2).mean(dim=(1, 3)).numpy()
    np.testing.assert_allclose(_values(region), means, rtol=1e-6)
    assert "hover: means of 2×2" in fig.axes[0].get_title()


def test_big_maps_are_downsampled_to_the_frame_and_the_title_says_so():
    maps = torch.rand(1, 16, 112, 112, generator=torch.Generator().manual_seed(6))
    fig, png, _ = _draw(lambda: feature_map_figure(maps, max_channels=16), Frame(400, 1.0))
    assert png.shape[1] <= 401 and "maps downsampled to" in fig.axes[0].get_title()
    _texts_inside(fig)


def test_a_small_gradient_has_a_short_scale_with_its_factor_inside_the_figure():
    grads = torch.randn(1, 4, 7, 7, generator=torch.Generator().manual_seed(7)) * 2e-4
    for width in WIDTHS:
        fig, _, _ = _draw(lambda: gradient_map_figure(grads, title="layer4.1.conv2"), Frame(width, 2.0))
        bar = fig.axes[1]
        ticks = [t.get_text() for t in bar.get_yticklabels() if t.get_text()]
        assert ticks and all("0.000" not in t and len(t) <= 24 for t in ticks)
        offset = bar.yaxis.get_offset_text()
        assert offset.get_text() == "×10⁻⁴"  # plain text, not mathtext: no pyparsing on every redraw
        _texts_inside(fig)


def test_a_gradient_with_outliers_is_clipped_symmetrically_and_the_title_says_so():
    grads = torch.randn(1, 4, 16, 16, generator=torch.Generator().manual_seed(8))
    grads[0, 0, 0, 0] = 100.0
    fig, _, hover = _draw(lambda: gradient_map_figure(grads, title="g"), Frame(600, 1.0))
    low, high = fig.axes[0].get_images()[0].get_clim()
    assert low == -high and high < 100.0
    assert "colours clipped at ±" in fig.axes[0].get_title()
    assert _values(hover["regions"][0])[0, 0] == 100.0  # the hover tells the value the colour clips


@pytest.mark.parametrize("ratio", [1.0, 2.0])
@pytest.mark.parametrize("width", WIDTHS)
def test_a_patch_grid_fits_the_frame_with_crisp_patches(width, ratio):
    tokens = torch.randn(1, 197, 16, generator=torch.Generator().manual_seed(9))
    fig, png, hover = _draw(lambda: patch_grid_figure(tokens, title="vit.encoder.layer.0"), Frame(width, ratio))
    assert hover["width"] <= width and png.shape[1] <= ratio * width + 1
    assert abs(png.shape[1] - ratio * hover["width"]) <= 1  # natural = ratio × CSS: ≥ 1.9× at ratio 2
    _texts_inside(fig)
    patches = next(r for r in hover["regions"] if r["label"] == "patches")
    left, top, right, _ = patches["box"]
    cell = (right - left) / 14 * ratio  # device pixels per patch: a whole number, each patch one colour
    assert cell == pytest.approx(round(cell)) and cell >= 2 and hover["pixelated"]
    y, x = round(top * ratio + 3.5 * cell), round(left * ratio + 5.5 * cell)  # inside patch (3, 5)
    block = png[y - round(cell / 2) + 1 : y + round(cell / 2) - 1, x - round(cell / 2) + 1 : x + round(cell / 2) - 1]
    assert (block == block[0, 0]).all()


def test_a_patch_grid_describes_each_patch_and_the_class_token_with_their_values():
    tokens = torch.randn(1, 17, 8, generator=torch.Generator().manual_seed(10))
    _, _, hover = _draw(lambda: patch_grid_figure(tokens), Frame(600, 2.0))
    patches, cls = hover["regions"]
    norms = np.sqrt(np.square(tokens[0].double().numpy()).sum(axis=1)).astype(np.float32)
    assert patches["label"] == "patches" and patches["quantity"] == "norm over 8 features"
    assert (patches["row"]["name"], patches["col"]["name"]) == ("patch row", "patch column")
    np.testing.assert_array_equal(_values(patches), norms[1:].reshape(4, 4))
    assert cls["label"] == "class token" and cls["row"]["labels"] == ["class token"]
    np.testing.assert_array_equal(_values(cls), norms[:1].reshape(1, 1))
    _, _, one = _draw(lambda: patch_grid_figure(tokens, feature=3, class_token=2, grid=(3, 5)), Frame(600, 1.0))
    patches, leading = one["regions"]
    assert patches["quantity"] == "feature 3" and leading["row"]["labels"] == ["token 0", "token 1"]
    np.testing.assert_array_equal(_values(patches), tokens[0, 2:, 3].numpy().reshape(3, 5))


def test_a_patch_grids_feature_has_a_signed_clipped_scale_and_a_short_colour_bar():
    tokens = torch.randn(1, 257, 4, generator=torch.Generator().manual_seed(11)) * 2e-4
    tokens[0, 5, 1] = 1.0
    fig, _, _ = _draw(lambda: patch_grid_figure(tokens, feature=1, title="g"), Frame(400, 2.0))
    low, high = fig.axes[0].get_images()[0].get_clim()
    assert low == -high and high < 1e-3 and "colours clipped at ±" in fig.axes[0].get_title()
    bar = fig.axes[-1]
    assert bar.yaxis.get_offset_text().get_text() == "×10⁻⁴"
    assert all("0.000" not in t.get_text() for t in bar.get_yticklabels())
    _texts_inside(fig)


@pytest.mark.parametrize("ratio", [1.0, 2.0])
@pytest.mark.parametrize("width", WIDTHS)
def test_a_cam_overlay_and_its_input_fit_the_frame_at_one_size(width, ratio):
    image = torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(12))
    cam = torch.rand(1, 7, 7, generator=torch.Generator().manual_seed(13))
    sizes = []
    for draw in (lambda: cam_overlay_figure(image, cam, title="gradcam at layer4"), lambda: input_image_figure(image)):
        fig, png, hover = _draw(draw, Frame(width, ratio))
        assert hover["width"] <= width and png.shape[1] <= ratio * width + 1
        assert abs(png.shape[1] - ratio * hover["width"]) <= 1  # natural = ratio × CSS: ≥ 1.9× at ratio 2
        _texts_inside(fig)
        sizes.append((hover["width"], hover["regions"][0]["box"]))
    assert sizes[0] == sizes[1]  # side by side, the picture at one scale


def test_a_small_input_is_drawn_as_crisp_blocks_twice_as_fine_at_ratio_2():
    image = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(14))
    cells = {}
    for ratio in (1.0, 2.0):
        _, png, hover = _draw(lambda: input_image_figure(image, title="cifar"), Frame(600, ratio))
        left, top, right, _ = hover["regions"][0]["box"]
        cell = (right - left) / 32 * ratio
        assert cell == pytest.approx(round(cell)) and hover["pixelated"]
        y, x = round(top * ratio + 10 * cell), round(left * ratio + 20 * cell)  # pixel (10, 20)'s top-left
        block = png[y + 1 : y + round(cell) - 1, x + 1 : x + round(cell) - 1]
        assert (block == block[0, 0]).all()
        cells[ratio] = round(cell)
    assert cells[2.0] >= 2 * cells[1.0] >= 8  # at least twice the device pixels per image pixel


def test_the_cam_is_described_on_its_own_grid_over_the_image_with_its_values():
    image = torch.rand(2, 3, 224, 224, generator=torch.Generator().manual_seed(15))
    cam = torch.rand(2, 7, 7, generator=torch.Generator().manual_seed(16))
    cam.method = "gradcam++"  # as an ex.gradcam result says about itself
    fig, _, hover = _draw(lambda: cam_overlay_figure(image, cam, item=1), Frame(600, 2.0))
    (region,) = hover["regions"]
    assert (region["rows"], region["cols"]) == (7, 7) and region["quantity"] == "gradcam++"
    assert (region["row"]["name"], region["col"]["name"]) == ("row", "column") and region["aggregate"] == ""
    np.testing.assert_array_equal(_values(region), cam[1].numpy())
    picture = fig.axes[0].get_images()[0]
    left, top, right, bottom = region["box"]
    box = fig.axes[0].get_position()
    width, height = fig.get_size_inches() * 96
    assert (left, right) == pytest.approx((box.x0 * width, box.x1 * width))  # over the whole image, in CSS px
    assert (top, bottom) == pytest.approx(((1 - box.y1) * height, (1 - box.y0) * height))
    _, _, named = _draw(lambda: cam_overlay_figure(image, cam, quantity="Grad-CAM"), Frame(600, 1.0))
    assert named["regions"][0]["quantity"] == "Grad-CAM"
    assert picture.get_array().shape == (224, 224, 3)


def test_an_input_is_described_by_its_values_and_a_colour_one_as_its_channel_mean():
    image = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(17))
    _, _, hover = _draw(lambda: input_image_figure(image), Frame(600, 1.0))
    (region,) = hover["regions"]
    assert region["quantity"] == "input (mean over 3 channels)"
    np.testing.assert_allclose(_values(region), image[0].double().mean(dim=0).float().numpy(), rtol=1e-6)
    grey = torch.randn(1, 1, 16, 16, generator=torch.Generator().manual_seed(18))
    _, _, hover = _draw(lambda: input_image_figure(grey), Frame(600, 1.0))
    assert hover["regions"][0]["quantity"] == "input"
    np.testing.assert_array_equal(_values(hover["regions"][0]), grey[0, 0].numpy())


def test_a_faint_cam_has_a_short_colour_bar_with_its_factor_inside_the_figure():
    cam = torch.rand(1, 7, 7, generator=torch.Generator().manual_seed(19)) * 3e-4
    fig, _, _ = _draw(lambda: cam_overlay_figure(torch.rand(1, 3, 64, 64), cam, title="cam"), Frame(400, 2.0))
    bar = fig.axes[1]
    assert bar.yaxis.get_offset_text().get_text() == "×10⁻⁴"
    assert all("0.000" not in t.get_text() for t in bar.get_yticklabels())
    _texts_inside(fig)


LAYERS = [f"transformer.h.{i}.attn.c_proj" for i in range(12)]
TOKENS = ["When", " Mary", " and", " John", " went", " to", " the", " store", ",", " John", " gave", " a"]


@pytest.mark.parametrize("ratio", [1.0, 2.0])
@pytest.mark.parametrize("width", WIDTHS)
def test_a_patch_sweep_fits_the_frame(width, ratio):
    sweep = torch.randn(12, 12, generator=torch.Generator().manual_seed(20))
    draw = lambda: patch_sweep_figure(sweep, layers=LAYERS, tokens=TOKENS, title="IOI sweep")  # noqa: E731
    fig, png, hover = _draw(draw, Frame(width, ratio))
    assert hover["width"] <= width and png.shape[1] <= ratio * width + 1
    assert abs(png.shape[1] - ratio * hover["width"]) <= 1  # natural = ratio × CSS: ≥ 1.9× at ratio 2
    _texts_inside(fig)


def test_a_patch_sweep_is_described_by_layer_and_token_with_its_values():
    sweep = torch.randn(12, 12, generator=torch.Generator().manual_seed(21))
    sweep.layers, sweep.tokens = LAYERS, TOKENS
    _, _, hover = _draw(lambda: patch_sweep_figure(sweep, title="s"), Frame(600, 2.0))
    (region,) = hover["regions"]
    assert region["row"]["name"] == "layer" and region["row"]["labels"] == LAYERS
    assert region["col"]["name"] == "position" and region["col"]["labels"] == TOKENS
    assert region["aggregate"] == ""
    np.testing.assert_array_equal(_values(region), sweep.numpy())


def test_a_big_sweep_describes_block_means_within_the_bound_and_says_so():
    sweep = torch.randn(300, 400, generator=torch.Generator().manual_seed(22))
    fig, _, hover = _draw(lambda: patch_sweep_figure(sweep, title="big"), Frame(900, 1.0))
    (region,) = hover["regions"]
    assert region["rows"] * region["cols"] <= 65_536 and region["aggregate"] == "mean"
    rows, cols = region["row"]["stride"], region["col"]["stride"]
    assert rows * cols > 1 and f"hover: means of {rows}×{cols}" in fig.axes[0].get_title()
    assert region["row"]["count"] == 300 and region["col"]["count"] == 400
    assert _values(region)[0, 0] == pytest.approx(float(sweep[:rows, :cols].double().mean()), rel=1e-5)


def test_a_patch_sweep_is_signed_clipped_when_an_outlier_would_wash_it_out_and_its_scale_short():
    sweep = torch.randn(6, 8, generator=torch.Generator().manual_seed(23)) * 3e-4
    fig, _, _ = _draw(lambda: patch_sweep_figure(sweep, title="small"), Frame(400, 2.0))
    bar = fig.axes[1]
    assert bar.yaxis.get_offset_text().get_text() == "×10⁻⁴"
    assert all("0.000" not in t.get_text() for t in bar.get_yticklabels())
    _texts_inside(fig)
    sweep = torch.randn(20, 30, generator=torch.Generator().manual_seed(24))
    sweep[3, 4] = 500.0
    fig, _, _ = _draw(lambda: patch_sweep_figure(sweep, title="outlier"), Frame(600, 1.0))
    low, high = fig.axes[0].get_images()[0].get_clim()
    assert low == -high < 0 and high < 500 and "colours clipped at ±" in fig.axes[0].get_title()


def test_the_input_and_its_overlay_sit_side_by_side_where_both_keep_a_usable_size():
    image, cam = torch.rand(1, 3, 224, 224), torch.rand(1, 7, 7)
    widths = {}
    for pane in (400, 530):
        overlay = _draw(lambda: cam_overlay_figure(image, cam, title="cam"), Frame(pane, 1.0))[2]
        picture = _draw(lambda: input_image_figure(image, title="input"), Frame(pane, 1.0))[2]
        widths[pane] = (overlay["width"], picture["width"])
    assert sum(widths[530]) + 6 <= 530  # side by side in a 530 px pane
    assert widths[400][0] <= 400 and sum(widths[400]) > 400  # one above the other, each the pane's width


def test_a_huge_patch_grid_describes_block_means_within_the_bound_and_says_so():
    tokens = torch.randn(1, 300 * 300, 2, generator=torch.Generator().manual_seed(25))
    fig, _, hover = _draw(lambda: patch_grid_figure(tokens, class_token=False, feature=0), Frame(1400, 1.0))
    (region,) = hover["regions"]
    assert region["rows"] * region["cols"] <= 65_536 and region["aggregate"] == "mean"
    assert region["row"]["count"] == 300 and region["row"]["stride"] == 2
    assert "hover: means of 2×2 patches" in fig.axes[0].get_title()
    np.testing.assert_allclose(_values(region)[0, 0], tokens[0, [0, 1, 300, 301], 0].double().mean(), rtol=1e-5)


def test_a_grid_taller_than_a_pane_keeps_its_whole_colour_bar_level_with_its_top():
    maps = torch.randn(1, 64, 32, 32).relu()
    with using_frame({"width": 530, "ratio": 2}):
        fig = feature_map_figure(maps)
    grid, bar = fig.axes[0].get_position(), fig.axes[1].get_position()
    css_height = fig.get_size_inches()[1] * 96
    assert grid.height * css_height > 600  # taller than the pane it scrolls in
    assert bar.height * css_height <= 320 + 1 and bar.y1 == pytest.approx(grid.y1)
