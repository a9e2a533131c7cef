"""The figures of hookwidgets.plots: what each one draws, and NaN/Inf and half precision never crash them."""

from __future__ import annotations

import io
import itertools

import matplotlib.colors
import matplotlib.image
import matplotlib.text
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PatchCollection

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
    patch_grid_figure,
    stats_figure,
    summary_heatmap_figure,
)
from hookwidgets.plots.frame import using_frame
from tests.conftest import SmallCNN

PNG = b"\x89PNG\r\n\x1a\n"
MAGENTA = np.array(matplotlib.colors.to_rgb(NONFINITE_COLOR))


def _frames(ax) -> list[tuple[float, float]]:
    """(step column, layer row) of each magenta frame the heatmap drew (one collection of rectangles)."""
    paths = [path for c in ax.collections if isinstance(c, PatchCollection) for path in c.get_paths()]
    return [(round(p.vertices[:, 0].min() + 0.45, 6), round(p.vertices[:, 1].min() + 0.45, 6)) for p in paths]


def _has_magenta(fig) -> bool:
    png = figure_png(fig, dpi=60)
    assert png[:8] == PNG
    rgb = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    return bool(np.isclose(rgb, MAGENTA, atol=0.03).all(axis=-1).any())


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
    rows = [r for r in rows if not (r["path"] == "features" and r["step"] == 2)]  # one missing cell
    fig = summary_heatmap_figure(rows, "act_norm", layers=layers)
    ax = fig.axes[0]
    data = ax.get_images()[0].get_array()
    assert data.shape == (4, 4)
    assert [t.get_text() for t in ax.get_yticklabels()] == layers
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4"]
    assert data.mask[3, 1]  # the missing cell is grey
    # The NaN input at step 4 reached every layer downstream of the input: their cells are framed.
    assert ax.get_title() == "act_norm (log) [4 NaN/Inf, magenta]"
    framed = _frames(ax)
    assert sorted(framed) == [(3.0, 0.0), (3.0, 1.0), (3.0, 2.0), (3.0, 3.0)]
    assert _has_magenta(fig)
    with pytest.raises(ValueError, match="no field 'grad_nrm' in the summary; fields are act_calls, act_inf"):
        summary_heatmap_figure(rows, "grad_nrm")


@pytest.mark.parametrize("dpi", [72, 96, 144])
def test_a_long_history_writes_a_dozen_step_numbers_and_every_label_fits_the_figure(dpi):
    layers = ["encoder.layers.11.self_attention.out_projection_with_a_long_name", "head", ""]
    rows = [{"path": t, "step": s, "grad_norm": 1.0 + s % 7} for s in range(1, 401) for t in layers]
    fig = summary_heatmap_figure(rows, "grad_norm")
    fig.set_dpi(dpi)
    ax = fig.axes[0]
    steps = [int(t.get_text()) for t in ax.get_xticklabels()]
    assert len(steps) <= 12 and steps[0] == 1 and steps[-1] == 400
    gaps = np.diff(steps)
    assert gaps[:-1].min() == gaps[:-1].max() and gaps[-1] >= gaps[0] / 2  # even, and the last not crowded
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names[1:] == ["head", "(model)"]  # a name too long for the frame is cut from the left, its end kept
    assert names[0].startswith("…") and layers[0].endswith(names[0][1:]) and len(names[0]) > 20
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # as savefig draws it, at the figure's dpi
    width, height = canvas.get_width_height()
    renderer = canvas.get_renderer()
    for text in [*ax.get_yticklabels(), *ax.get_xticklabels(), ax.title, ax.xaxis.label]:
        box = text.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height, text.get_text()
    colorbar_labels = [*fig.axes[1].get_yticklabels(), *fig.axes[1].get_yminorticklabels()]
    assert max(t.get_window_extent(renderer).x1 for t in colorbar_labels if t.get_text()) <= width


def test_a_heatmap_of_thousands_of_layers_names_evenly_spaced_rows_and_frames_every_nonfinite_cell():
    rows = [
        {"step": step, "path": f"blocks.{i}", "grad_norm": 1.0 + i, "grad_nan": int(i % 500 == 7)}
        for step in (1, 2)
        for i in range(3000)
    ]
    fig = summary_heatmap_figure(rows, "grad_norm")
    ax = fig.axes[0]
    ticks = [int(t) for t in ax.get_yticks()]
    assert len(ticks) <= 200 and ticks[0] == 0 and ticks[-1] == 2999
    assert len({b - a for a, b in itertools.pairwise(ticks[:-1])}) == 1  # evenly spaced, then the last
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "blocks.0" and labels[-1] == "blocks.2999" and labels[1] == f"blocks.{ticks[1]}"
    assert sorted(_frames(ax)) == sorted((float(j), float(i)) for j in (0, 1) for i in range(7, 3000, 500))
    (frames,) = [c for c in ax.collections if isinstance(c, PatchCollection)]
    title = " ".join(ax.get_title().split())
    assert np.allclose(frames.get_edgecolor()[0][:3], MAGENTA)
    assert title.endswith(f"[12 NaN/Inf, magenta; 3,000 layers, one named every {ticks[1]}]")


@pytest.mark.parametrize("values", [[0.3], [0.3, 0.3, 0.3], [2.0, 2.0]])
def test_a_heatmap_of_equal_positive_values_draws_on_a_log_scale_around_them(values):
    rows = [{"path": f"layer{i}", "step": 1, "grad_norm": v} for i, v in enumerate(values)]
    fig = summary_heatmap_figure(rows, "grad_norm")  # raised "Invalid vmin or vmax" when the range reached 0
    image = fig.axes[0].get_images()[0]
    low, high = image.get_clim()
    assert isinstance(image.norm, matplotlib.colors.LogNorm) and 0 < low < values[0] < high
    assert fig.axes[0].get_title() == "grad_norm (log)"
    assert figure_png(fig)[:8] == PNG


def test_a_narrow_heatmap_shrinks_a_long_title_to_fit_the_figure():
    rows = [{"path": "fc", "step": 1, "grad_norm": float("nan"), "grad_nan": 1.0}]
    with using_frame({"width": 240, "ratio": 1}):  # the narrowest frame: one step's grid is narrow too
        fig = summary_heatmap_figure(rows, "grad_norm", title="gradient norm of every layer at every step")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    width = canvas.get_width_height()[0]
    title = fig.axes[0].title
    box = title.get_window_extent(canvas.get_renderer())
    assert " ".join(title.get_text().split()) == "gradient norm of every layer at every step [1 NaN/Inf, magenta]"
    assert box.x0 >= 0 and box.x1 <= width and box.y1 <= canvas.get_width_height()[1]
    assert 7 <= title.get_fontsize() <= 9 and "\n" in title.get_text()  # wrapped: 7 pt on one line is too wide


@pytest.mark.parametrize(("scale", "log"), [(1e-5, False), (3e7, False), (-2e-3, True), (1.0, False)])
def test_statistics_over_steps_keep_every_label_inside_the_figure_and_apart(scale, log):
    from types import SimpleNamespace

    records = [
        SimpleNamespace(step=s, call=0, stats={"mean": scale * s, "std": abs(scale), "nan": int(s == 7), "inf": 0})
        for s in range(1, 31)
    ]
    title = "encoder.layers.11.self_attention.out_projection · global_grad statistics"
    fig = stats_figure(records, stats=("mean", "std"), title=title, log=log)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    width, height = canvas.get_width_height()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    drawn = [label for label, y in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True) if low <= y <= high]
    left, right = ax.get_xlim()
    drawn += [label for label, x in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True) if left <= x <= right]
    texts = [ax.title, ax.xaxis.label, ax.yaxis.offsetText, *drawn]
    boxes = [t.get_window_extent(renderer) for t in texts if t.get_visible() and t.get_text()]
    for text, box in zip([t for t in texts if t.get_visible() and t.get_text()], boxes, strict=True):
        assert box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height, text.get_text()
    written = " ".join(ax.title.get_text().split())  # wrapped rather than drawn below 7 pt
    assert written.startswith(title) and "step 7" in written and ax.title.get_fontsize() >= 7
    offset = ax.yaxis.offsetText
    if offset.get_text():  # "1e-5" above the axes must not run into the title
        assert not offset.get_window_extent(renderer).overlaps(ax.title.get_window_extent(renderer))


def test_statistics_shading_is_drawn_behind_the_steps_that_held_nonfinite_values():
    ex, _ = _stats_explorer()
    with ex:
        fig = stats_figure(ex.captures["features.conv"]["forward"], stats=("mean",))
    rgb = _rendered(fig)
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    y = low + 0.03 * (high - low)  # below the line
    shaded, clear = _at(rgb, ax, 4.25, y).astype(int), _at(rgb, ax, 2.5, y).astype(int)
    assert np.abs(shaded - [255, 191, 255]).max() <= 3  # magenta at 25% over white
    assert (clear == 255).all()


def test_summary_cells_are_coloured_grey_when_missing_and_magenta_when_not_finite():
    rows = [
        {"path": "a", "step": 1, "grad_norm": 1.0},
        {"path": "a", "step": 2, "grad_norm": float("nan")},
        {"path": "b", "step": 1, "grad_norm": 2.0, "grad_nan": 3},  # finite statistic of a tensor with NaN
    ]
    fig = summary_heatmap_figure(rows, "grad_norm", title="norms")
    rgb = _rendered(fig)
    ax = fig.axes[0]
    assert ax.get_title() == "norms (log) [2 NaN/Inf, magenta]"
    viridis = matplotlib.colormaps["viridis"]
    assert np.abs(_at(rgb, ax, 0, 0).astype(int) - np.array(viridis(0.0, bytes=True)[:3])).max() <= 1
    assert np.abs(_at(rgb, ax, 0, 1).astype(int) - np.array(viridis(1.0, bytes=True)[:3])).max() <= 1
    assert _is_magenta(_at(rgb, ax, 1, 0))  # the NaN value
    assert np.array_equal(_at(rgb, ax, 1, 1), [217, 217, 217])  # no record: grey
    frame = _at(rgb, ax, -0.45, 1).astype(int)  # the magenta frame around the tainted cell
    assert np.abs(frame - [255, 0, 255]).max() <= 40


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
    grid = fig.axes[0]  # every head an image on one axes, titled in it
    assert [t.get_text() for t in grid.texts] == ["head 0", "head 1", "head 2"]
    assert [t.get_text() for t in grid.get_xticklabels()][:4] == tokens
    assert len({image.get_clim() for image in grid.get_images()}) == 1
    torch.testing.assert_close(torch.as_tensor(grid.get_images()[2].get_array().data), weights[1, 2])
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


def test_cam_overlay_blends_the_cam_colour_over_the_image():
    picture = torch.zeros(1, 1, 8, 8)  # constant: drawn black
    cam = torch.zeros(1, 8, 8)
    cam[0, 2, 5] = 1.0
    fig = cam_overlay_figure(picture, cam, alpha=0.5, title="one hot cell")
    rgb = _rendered(fig)
    ax = fig.axes[0]
    jet = matplotlib.colormaps["jet"]
    for (x, y), value in {(5, 2): 1.0, (1, 6): 0.0}.items():
        expected = 0.5 * np.array(jet(value)[:3]) * 255  # half the CAM colour over black
        assert np.abs(_at(rgb, ax, x, y).astype(float) - expected).max() <= 2


NAN_AT, INF_AT = 10, 15  # flat indices, away from the feature-map grid's label boxes


def _half_with_nonfinite(shape, dtype):
    t = torch.rand(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    t.view(-1)[NAN_AT] = float("nan")
    t.view(-1)[INF_AT] = float("inf")
    return t


def _rendered(fig) -> np.ndarray:
    """The PNG as uint8 RGB, at the figure's own dpi so that display coordinates are PNG pixels."""
    png = figure_png(fig, dpi=fig.dpi)
    assert png[:8] == PNG
    return (matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3] * 255).round().astype(np.uint8)


def _at(rgb: np.ndarray, ax, x: float, y: float) -> np.ndarray:
    """The rendered pixel under cell ``(x, y)`` of the first image on ``ax`` (its data point where ``ax`` has no
    image; call after rendering: layouts are final)."""
    if ax.get_images():  # a cell of the image, wherever its extent puts it (the heads' grid places each head)
        image = ax.get_images()[0]
        left, right, bottom, top = image.get_extent()
        rows, cols = image.get_array().shape[:2]
        x, y = left + (x + 0.5) * (right - left) / cols, top + (y + 0.5) * (bottom - top) / rows
    px, py = ax.transData.transform((x, y))
    return rgb[int(rgb.shape[0] - py), int(px)]


def _is_magenta(pixel: np.ndarray) -> bool:
    return bool(np.array_equal(pixel, [255, 0, 255]))


def _bar_middle(t: torch.Tensor) -> float:
    row = t.float().reshape(4, 16)[0]
    return float(row[row.isfinite()].max()) / 2


# Each case: the figure, then (data x, data y) of the NaN and of the Inf on axes 0, then a finite point.
CASES = {
    "feature_maps": (
        lambda t: feature_map_figure(t.reshape(1, 4, 4, 4), scale="channel"),  # 48-pixel tiles, 2 apart
        lambda t: [(30, 30), (42, 42)],
        lambda t: (80, 30),
    ),
    "bars": (
        lambda t: feature_map_figure(t.reshape(4, 16)),
        lambda t: [(10, _bar_middle(t)), (15, _bar_middle(t))],
        None,
    ),
    "matrix": (lambda t: matrix_figure(t.reshape(8, 8)), lambda t: [(2, 1), (7, 1)], lambda t: (0, 5)),
    "attention": (lambda t: attention_figure(t.reshape(4, 4, 4)), lambda t: [(2, 2), (3, 3)], lambda t: (0, 3)),
    "overlay": (
        lambda t: cam_overlay_figure(t.reshape(1, 1, 8, 8), t.reshape(1, 8, 8)),
        lambda t: [(2, 1), (7, 1)],
        lambda t: (0, 5),
    ),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", list(CASES))
def test_half_precision_and_nonfinite_values_are_drawn_magenta_where_they_are(case, dtype):
    draw, nonfinite, finite = CASES[case]
    t = _half_with_nonfinite(64, dtype)
    fig = draw(t)
    title = " ".join((fig.get_suptitle() or fig.axes[0].get_title()).split())  # a long title wraps to its axes
    assert "1 NaN, 1 Inf" in title
    rgb = _rendered(fig)
    ax = fig.axes[0]
    assert all(_is_magenta(_at(rgb, ax, x, y)) for x, y in nonfinite(t))
    if finite is not None:
        assert not _is_magenta(_at(rgb, ax, *finite(t)))
    else:  # bars: a finite bar keeps its colour
        assert not _is_magenta(_at(rgb, ax, 3, float(t.float().reshape(4, 16)[0, 3]) / 2))


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


NAME = r"$\frac{a$ & <b>x</b>"  # as mathtext this does not even parse


def _texts(fig) -> list[str]:
    cells = [cell.get_text() for ax in fig.axes for table in ax.tables for cell in table.get_celld().values()]
    return [t.get_text() for t in [*fig.findobj(matplotlib.text.Text), *cells]]


@pytest.mark.filterwarnings("error")  # long names must fit: no "tight layout not applied", no singular limits
def test_model_strings_are_drawn_as_they_are_never_as_mathtext():
    from hookwidgets.plots import update_ratio_figure
    from hookwidgets.plots.distributed import bucket_table_figure

    ratios = [{"param": NAME, "step": s, "ratio": 1e-3} for s in (1, 2)]
    bucket = {"rank": 0, "step": 1, "bucket": 0, "numel": 4, "bytes": 16, "params": [NAME], "grad_norm": 1.0,
              "reduced_norm": 1.0, "seconds": 0.001, "compression_error": None}  # fmt: skip
    x = torch.rand(1, 2, 4, 4)
    figures = [
        feature_map_figure(x, title=NAME),
        histogram_figure({NAME: x}, title=NAME),
        bars_figure(torch.rand(3), title=NAME),
        matrix_figure(torch.rand(2, 2), title=NAME, row_labels=[NAME, "b"], column_labels=["c", NAME]),
        attention_figure(torch.rand(1, 1, 2, 2), tokens=[NAME, "t"], title=NAME),
        summary_heatmap_figure([{"step": 1, "path": NAME, "act_norm": 1.0}], "act_norm", title=NAME),
        cam_overlay_figure(torch.rand(1, 3, 4, 4), torch.rand(1, 4, 4), title=NAME),
        update_ratio_figure(ratios),
        bucket_table_figure([bucket]),
    ]
    for k, fig in enumerate(figures):
        assert figure_png(fig, dpi=40)[:8] == PNG  # mathtext would raise here
        texts = _texts(fig)
        assert any(NAME.replace("$", r"\$") in t for t in texts), (k, texts)


@pytest.mark.parametrize("draw", ["bars", "histogram"])
def test_a_long_title_over_a_few_values_stays_inside_the_figure(draw):
    title = "classifier.fc/AddmmBackward0#0 · grad_output.0"
    values = torch.arange(10.0)
    fig = bars_figure(values, title=title) if draw == "bars" else histogram_figure(values, title=title * 2)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    width, height = canvas.get_width_height()
    box = fig.axes[0].title.get_window_extent(canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= width and box.y1 <= height
    assert " ".join(fig.axes[0].title.get_text().split()).startswith(title)  # all of it, maybe on more lines


def test_values_equal_up_to_float_rounding_are_drawn_as_one_colour_without_an_offset():
    """A LayerNorm's tokens all have norm √32 up to rounding: one colour and plain ticks, not noise spread over the
    colour map under a '1e-7 + 5.65663' offset."""
    torch.manual_seed(0)
    tokens = torch.nn.functional.layer_norm(torch.randn(1, 17, 32), (32,))
    fig = patch_grid_figure(tokens)
    FigureCanvasAgg(fig).draw()
    grid = fig.axes[0].images[0]
    colours = grid.to_rgba(grid.get_array()).reshape(-1, 4)
    assert np.ptp(colours, axis=0).max() < 0.01  # one colour (at most the colour map's neighbouring step)
    assert [ax.yaxis.get_offset_text().get_text() for ax in fig.axes] == [""] * len(fig.axes)
    low, high = grid.get_clim()
    assert low < float(tokens.norm(dim=-1).min()) <= float(tokens.norm(dim=-1).max()) < high


def test_the_overlays_colour_bar_labels_stay_inside_the_figure():
    image = torch.rand(1, 3, 32, 32)
    cam = torch.full((1, 4, 4), 0.0437) + 0.0007 * torch.rand(1, 4, 4)  # a rollout's values, bar ticks 0.00–0.04
    fig = cam_overlay_figure(image, cam)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    labels = [t for t in fig.axes[1].get_yticklabels() if t.get_text()]
    assert len(labels) >= 3
    assert all(t.get_window_extent(renderer).x1 <= fig.bbox.x1 for t in labels)
