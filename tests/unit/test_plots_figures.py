"""The figures of hookwidgets.plots: what each one draws, and NaN/Inf and half precision never crash them."""

from __future__ import annotations

import io

import matplotlib.colors
import matplotlib.image
import numpy as np
import pytest
import torch

from hookwidgets.core import Explorer
from hookwidgets.plots import (
    NONFINITE_COLOR,
    attention_figure,
    bars_figure,
    cam_overlay_figure,
    feature_map_figure,
    figure_png,
    histogram_figure,
    matrix_figure,
    stats_figure,
    summary_heatmap_figure,
)
from tests.conftest import SmallCNN

PNG = b"\x89PNG\r\n\x1a\n"
MAGENTA = np.array(matplotlib.colors.to_rgb(NONFINITE_COLOR))


def _has_magenta(fig) -> bool:
    png = figure_png(fig, dpi=60)
    assert png[:8] == PNG
    rgb = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    return bool(np.isclose(rgb, MAGENTA, atol=0.03).all(axis=-1).any())


def test_channels_ordered_by_mean_activation_keep_their_numbers_and_only_the_top_k_are_drawn():
    maps = torch.zeros(1, 6, 4, 4)
    for channel, mean in enumerate([0.1, 5.0, -1.0, 3.0, 2.0, 0.0]):
        maps[0, channel] = mean
    fig = feature_map_figure(maps, title="conv", order="mean", max_channels=3)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["1", "3", "4"]
    assert "top 3 of 6 channels" in ax.get_title()
    assert ax.get_images()[0].get_array()[0, 0] == 5.0  # the first tile is channel 1


def test_per_channel_scale_stretches_every_tile_and_says_so_on_the_colour_bar():
    maps = torch.stack([torch.linspace(0, 1, 16), torch.linspace(0, 100, 16)]).reshape(1, 2, 4, 4)
    fig = feature_map_figure(maps, scale="channel")
    tiles = fig.axes[0].get_images()[0].get_array()
    assert tiles[:4, :4].max() == pytest.approx(1.0) and tiles[:4, 5:9].max() == pytest.approx(1.0)
    assert fig.axes[1].get_ylabel() == "per-channel scale"
    assert feature_map_figure(maps).axes[0].get_images()[0].get_clim() == (0.0, 100.0)


def test_a_64_channel_grid_is_one_image_with_64_labels_and_separators():
    fig = feature_map_figure(torch.rand(1, 64, 56, 56), max_channels=64)
    ax = fig.axes[0]
    (image,) = ax.get_images()
    tiled = image.get_array()
    assert tiled.shape == (8 * 57 - 1, 8 * 57 - 1)
    assert tiled.mask[56, :].all() and tiled.mask[:, 56].all()  # one-pixel gutters between tiles
    assert len(ax.texts) == 64


def test_bad_grid_options_are_named():
    with pytest.raises(ValueError, match="order must be 'channel' or 'mean', not 'size'"):
        feature_map_figure(torch.rand(1, 2, 3, 3), order="size")
    with pytest.raises(ValueError, match="scale must be 'shared' or 'channel', not 'each'"):
        feature_map_figure(torch.rand(1, 2, 3, 3), scale="each")


def test_histograms_share_bins_count_nonfinite_values_and_can_be_logarithmic():
    gradient = torch.randn(1000)
    gradient[:3] = float("nan")
    fig = histogram_figure({"activation": torch.rand(1000), "gradient": gradient}, title="conv", log=True)
    ax = fig.axes[0]
    first, second = ax.patches
    assert np.array_equal(first.get_data().edges, second.get_data().edges)
    assert ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["activation (n=1,000)", "gradient (n=1,000, 3 NaN/Inf not shown)"]
    assert first.get_data().values.sum() == 1000 and second.get_data().values.sum() == 997


def _stats_explorer() -> tuple[Explorer, torch.Tensor]:
    torch.manual_seed(0)
    model = SmallCNN()
    ex = Explorer(model)
    ex.attach("features.conv", "forward", action="stats")
    ex.attach("", ["global_forward", "global_backward"], action="stats")
    x = torch.randn(2, 3, 8, 8)
    for _ in range(3):
        ex.run(x, target=0)
    bad = x.clone()
    bad[0, 0, 0, 0] = float("nan")
    ex.run(bad, target=0)
    return ex, x


def test_statistics_over_steps_draw_a_line_per_statistic_and_shade_nonfinite_steps():
    ex, _ = _stats_explorer()
    with ex:
        records = ex.captures["features.conv"]["forward"]
        fig = stats_figure(records, stats=("mean", "std", "max"), title="features.conv")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["mean", "std", "max"]
    assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 3, 4]
    assert "NaN/Inf at step 4, shaded magenta" in ax.get_title()
    with pytest.raises(ValueError, match="no statistic 'median'; records have mean, std"):
        stats_figure(records, stats=("median",))
    with pytest.raises(ValueError, match="attach the hook with action='stats'"):
        stats_figure([])


def test_the_summary_is_a_layers_by_steps_heatmap_with_missing_and_nonfinite_cells_marked():
    ex, _ = _stats_explorer()
    with ex:
        rows = ex.summary()
    layers = ["features.conv", "features.act", "head.fc", "features"]
    rows = [r for r in rows if not (r["target"] == "features" and r["step"] == 2)]  # one missing cell
    fig = summary_heatmap_figure(rows, "act_norm", layers=layers)
    ax = fig.axes[0]
    data = ax.get_images()[0].get_array()
    assert data.shape == (4, 4)
    assert [t.get_text() for t in ax.get_yticklabels()] == layers
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4"]
    assert data.mask[3, 1]  # the missing cell is grey
    # The NaN input at step 4 reached every layer downstream of the input: their cells are framed.
    assert ax.get_title() == "act_norm (log) [4 NaN/Inf, magenta]"
    framed = [(p.get_x() + 0.45, p.get_y() + 0.45) for p in ax.patches]
    assert sorted(framed) == [(3.0, 0.0), (3.0, 1.0), (3.0, 2.0), (3.0, 3.0)]
    assert _has_magenta(fig)
    with pytest.raises(ValueError, match="no field 'grad_nrm' in the summary; fields are act_inf"):
        summary_heatmap_figure(rows, "grad_nrm")


def test_a_matrix_is_a_heatmap_with_labels_and_a_vector_is_bars():
    fig = matrix_figure(torch.randn(3, 5), row_labels=["a", "b", "c"], column_labels=list("vwxyz"), diverging=True)
    ax = fig.axes[0]
    assert ax.get_images()[0].get_array().shape == (3, 5)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    low, high = ax.get_images()[0].get_clim()
    assert low == -high
    with pytest.raises(ValueError, match="2 y labels for 3 rows"):
        matrix_figure(torch.randn(3, 5), row_labels=["a", "b"])
    with pytest.raises(ValueError, match=r"a heatmap needs a 2-D tensor \(or 3-D with item=\), got shape \(5,\)"):
        matrix_figure(torch.randn(5))
    assert len(bars_figure(torch.randn(7)).axes[0].patches) == 7


def test_attention_heads_are_heatmaps_with_token_labels_on_one_scale():
    weights = torch.softmax(torch.randn(2, 3, 4, 4), dim=-1)
    tokens = ["[CLS]", "the", "cat", "sat"]
    fig = attention_figure(weights, tokens, item=1, title="layer 0")
    heads = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in heads] == ["head 0", "head 1", "head 2"]
    assert [t.get_text() for t in heads[0].get_xticklabels()] == tokens
    assert len({ax.get_images()[0].get_clim() for ax in heads}) == 1
    torch.testing.assert_close(torch.as_tensor(heads[2].get_images()[0].get_array().data), weights[1, 2])
    with pytest.raises(ValueError, match=r"attention weights must be \(L, L\).*got \(3, 4\)"):
        attention_figure(torch.rand(3, 4))


def test_cam_overlay_draws_image_cam_and_colour_bar_and_names_the_result():
    torch.manual_seed(0)
    model = SmallCNN()
    x = torch.randn(2, 3, 8, 8)
    with Explorer(model) as ex:
        cam = ex.gradcam("features", x, target=[1, 4], method="gradcam++")
        pixels = ex.attribute(x, target=1, method="guided_backprop")
    fig = cam_overlay_figure(x, cam, item=1)
    ax = fig.axes[0]
    picture, heat = ax.get_images()
    assert picture.get_array().shape == (8, 8, 3) and heat.get_array().shape == (8, 8)
    assert ax.get_title() == "gradcam++ at features class 4"
    assert len(fig.axes) == 2
    small = cam_overlay_figure(x[:1, :1], torch.rand(1, 2, 2), title="coarse")  # upsampled to the image
    assert small.axes[0].get_images()[1].get_array().shape == (8, 8)
    assert small.axes[0].get_images()[0].get_cmap().name == "gray"
    assert cam_overlay_figure(x, pixels).axes[0].get_images()[1].get_array().shape == (8, 8)


def _half_with_nonfinite(shape, dtype):
    t = torch.rand(shape).to(dtype)
    t.view(-1)[0] = float("nan")
    t.view(-1)[1] = float("inf")
    return t


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "draw",
    [
        lambda t: feature_map_figure(t.reshape(1, 4, 4, 4), scale="channel", order="mean"),
        lambda t: feature_map_figure(t.reshape(4, 16)),
        lambda t: matrix_figure(t.reshape(8, 8)),
        lambda t: attention_figure(t.reshape(4, 4, 4)),
        lambda t: cam_overlay_figure(t.reshape(1, 1, 8, 8), t.reshape(1, 8, 8)),
    ],
    ids=["feature_maps", "bars", "matrix", "attention", "overlay"],
)
def test_half_precision_and_nonfinite_values_are_drawn_and_marked(draw, dtype):
    fig = draw(_half_with_nonfinite(64, dtype))
    title = fig._suptitle.get_text() if fig._suptitle is not None else fig.axes[0].get_title()
    assert "1 NaN, 1 Inf" in title
    assert _has_magenta(fig)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_histograms_of_half_precision_values_with_nonfinite_values(dtype):
    fig = histogram_figure(_half_with_nonfinite(64, dtype))
    assert "2 NaN/Inf not shown" in fig.axes[0].get_legend().get_texts()[0].get_text()
    assert figure_png(fig)[:8] == PNG


def test_all_nonfinite_tensors_still_draw():
    nan = torch.full((1, 2, 3, 3), float("nan"))
    assert _has_magenta(feature_map_figure(nan))
    assert figure_png(histogram_figure(nan))[:8] == PNG
    assert _has_magenta(bars_figure(torch.tensor([float("nan"), 1.0])))
