"""Statistics over steps, the summary heatmap, update ratios and the DDP figures drawn for the frame: as wide as the
pane at its pixel ratio, legends and colour bars inside, and what the page reads under the mouse equal to the
records."""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib.colors
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from hookwidgets.plots import stats_figure, summary_heatmap_figure, update_ratio_figure
from hookwidgets.plots.distributed import bucket_table_figure, rank_chart_figure
from hookwidgets.plots.frame import using_frame
from hookwidgets.plots.hover import figure_image

WIDTHS = (400, 600, 900, 1400)
LONG = "encoder.layers.11.self_attention.out_projection · forward statistics"


def _xs(region: dict) -> list[float]:
    """A lines region's x values (float64 bytes) as numbers."""
    return np.frombuffer(region["x"], "<f8").tolist()


def _records(steps: int = 30) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(
            step=s, call=0, stats={"mean": 0.01 * s, "std": 0.2 + s / 7, "min": -1.0 - s, "max": 2.0 + s, "nan": 0}
        )
        for s in range(1, steps + 1)
    ]


PARAMS = [f"model.layers.{i}.self_attn.q_proj.weight" for i in range(12)]


def _ratios() -> list[dict]:
    return [
        {"step": s, "param": name, "ratio": 1e-3 * (1 + i) * (1 + 0.1 * s)}
        for s in range(20)
        for i, name in enumerate(PARAMS)
    ]


def _bucket(rank: int, step: int, bucket: int) -> dict:
    return {
        "kind": "bucket", "rank": rank, "step": step, "bucket": bucket, "numel": 1_000_000 * (bucket + 1),
        "bytes": 4_000_000 * (bucket + 1), "params": ["model.layers.0.mlp.fc.weight", "fc.bias", "a", "b", "c"],
        "grad_norm": 1.0 + rank + step, "reduced_norm": 1.0, "seconds": 0.001 * (1 + rank) * (1 + bucket),
        "compression_error": 1e-4,
    }  # fmt: skip


BUCKETS = [_bucket(r, s, b) for r in range(8) for s in range(10) for b in range(3)]


def _gpt2_layers() -> list[str]:
    """A 24-block GPT-2's module paths in model order (~320), as ``ex.summary()`` names them."""
    names = ["", "transformer", "transformer.wte", "transformer.wpe", "transformer.drop"]
    for i in range(24):
        block = f"transformer.h.{i}"
        parts = ["", ".ln_1", ".attn", ".attn.c_attn", ".attn.c_proj", ".attn.attn_dropout", ".attn.resid_dropout"]
        parts += [".ln_2", ".mlp", ".mlp.c_fc", ".mlp.c_proj", ".mlp.act", ".mlp.dropout"]
        names += [block + part for part in parts]
    return [*names, "transformer.ln_f", "lm_head"]


def _summary_rows(layers: list[str], steps: int) -> list[dict]:
    generator = np.random.default_rng(1)
    norms = np.exp(generator.normal(size=(len(layers), 1)) + 0.1 * generator.normal(size=(len(layers), steps)))
    return [
        {"path": t, "step": s + 1, "grad_norm": float(norms[i, s])} for s in range(steps) for i, t in enumerate(layers)
    ]


FIGURES = {
    "stats": lambda: stats_figure(_records(), title=LONG),
    "summary": lambda: summary_heatmap_figure(_summary_rows(_gpt2_layers()[:40], 40), "grad_norm", title=LONG),
    "ratios": lambda: update_ratio_figure(_ratios()),
    "buckets": lambda: bucket_table_figure(BUCKETS),
    "ranks": lambda: rank_chart_figure(BUCKETS),
}


def _size(png: bytes) -> tuple[int, int]:
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _drawn(fig) -> tuple[FigureCanvasAgg, float, float]:
    """The figure drawn at 96 dpi, so that display units are CSS pixels; its width and height."""
    fig.set_dpi(96)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    width, height = canvas.get_width_height()
    return canvas, width, height


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", FIGURES)
def test_each_figure_is_as_wide_as_the_frame_at_its_pixel_ratio_with_every_text_inside(name, width, ratio):
    with using_frame({"width": width, "ratio": ratio}):
        fig = FIGURES[name]()
        png, hover = figure_image(fig)
    natural, _ = _size(png)
    assert natural <= ratio * width + 1 and natural >= 0.95 * ratio * width
    assert hover["ratio"] == ratio and hover["width"] <= width
    canvas, right, top = _drawn(fig)
    # What is drawn (ticks in view, legends, colour bar labels and offsets, cut names, titles): none past an edge.
    drawn = fig.get_tightbbox(canvas.get_renderer())  # inches
    assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01, drawn
    assert drawn.x1 * 96 <= right + 1 and drawn.y1 * 96 <= top + 1, (drawn, right, top)


def test_the_statistics_legend_is_beside_the_axes_when_wide_and_below_them_when_narrow():
    boxes = {}
    for width in (400, 900):
        with using_frame({"width": width, "ratio": 1}):
            fig = stats_figure(_records(), title="s")
        canvas, right, _ = _drawn(fig)
        renderer = canvas.get_renderer()
        ax = fig.axes[0]
        legend = ax.get_legend()
        assert [t.get_text() for t in legend.get_texts()] == ["mean", "std", "min", "max"]
        boxes[width] = (legend.get_window_extent(renderer), ax.get_window_extent(renderer), right)
        assert ax.xaxis.label.get_window_extent(renderer).y0 >= boxes[width][0].y1 or width == 900
    legend, axes, right = boxes[900]
    assert legend.x0 >= axes.x1 and legend.x1 <= right  # beside, inside the figure
    legend, axes, right = boxes[400]
    assert legend.y1 <= axes.y0 and legend.x1 <= right and legend.x0 >= 0  # below the step label


def test_the_ratio_legend_names_every_parameter_in_columns_or_the_first_ones_and_how_many_more():
    with using_frame({"width": 1400, "ratio": 1}):
        wide = [t.get_text() for t in update_ratio_figure(_ratios()).axes[0].get_legend().get_texts()]
    assert wide == ["1e-3 guide", *PARAMS]  # beside: whole names
    with using_frame({"width": 600, "ratio": 1}):
        fig = update_ratio_figure(_ratios())
    canvas, _, _ = _drawn(fig)
    texts = fig.axes[0].get_legend().get_texts()
    middle = [t.get_text() for t in texts]
    columns = {round(t.get_window_extent(canvas.get_renderer()).x0) for t in texts}
    assert len(middle) == 13 and len(columns) > 1  # every parameter named, in columns
    for i, (text, name) in enumerate(zip(middle[1:], PARAMS, strict=True)):  # cut from the left: the ends differ
        assert text.startswith("…") and name.endswith(text[1:]) and f"{i}.self_attn" in text
    with using_frame({"width": 400, "ratio": 1}):
        narrow = [t.get_text() for t in update_ratio_figure(_ratios()).axes[0].get_legend().get_texts()]
    named = narrow[:-1]
    assert narrow[-1] == f"+{13 - len(named)} more" and 4 <= len(named) < 13 and named[0] == "1e-3 guide"


def _lines(hover, label: str | None = None) -> dict:
    regions = [r for r in hover["regions"] if r["type"] == "lines" and (label is None or r["label"] == label)]
    assert len(regions) == 1
    return regions[0]


def _floats(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4")


def test_statistics_over_steps_tell_the_step_and_each_statistic_under_the_mouse():
    records = _records(12)
    records.append(SimpleNamespace(step=12, call=1, stats=dict(records[-1].stats, mean=0.7)))  # a second call
    with using_frame({"width": 600, "ratio": 2}):
        _, hover = figure_image(stats_figure(records, title="s"))
    region = _lines(hover)
    assert region["x_name"] == "step" and _xs(region) == [*range(1, 12), 12.0, 12.5]
    assert [s["name"] for s in region["series"]] == ["mean", "std", "min", "max"]
    for series in region["series"]:
        expected = np.array([r.stats[series["name"]] for r in records], dtype=np.float32)
        np.testing.assert_array_equal(_floats(series["values"]), expected)
    left, top, right, bottom = region["box"]
    assert 0 <= left < right <= 600 and 0 <= top < bottom <= hover["height"]
    low, high = region["x_limits"]
    assert low < 1 and high > 12.5


def test_update_ratios_tell_each_parameters_recorded_ratio_at_each_step():
    records = [
        {"step": 1, "param": "w", "ratio": 1e-3},
        {"step": 2, "param": "w", "ratio": 0.0},  # a frozen step: not on the log scale, still read
        {"step": 2, "param": "b", "ratio": 2e-2},
        {"step": 3, "param": "b", "ratio": math.nan},
    ]
    with using_frame({"width": 600, "ratio": 1}):
        _, hover = figure_image(update_ratio_figure(records))
    region = _lines(hover)
    assert _xs(region) == [1.0, 2.0, 3.0] and [s["name"] for s in region["series"]] == ["w", "b"]
    w, b = (_floats(s["values"]) for s in region["series"])
    np.testing.assert_array_equal(w, np.array([1e-3, 0.0, np.nan], np.float32))
    np.testing.assert_array_equal(b, np.array([np.nan, 2e-2, np.nan], np.float32))


def test_the_rank_charts_tell_each_ranks_time_and_norm_and_stack_when_narrow():
    for width, side_by_side in ((400, False), (900, True)):
        with using_frame({"width": width, "ratio": 1}):
            fig = rank_chart_figure(BUCKETS)
            _, hover = figure_image(fig)
        time_ax, norm_ax = fig.axes
        placed = time_ax.get_position().x1 <= norm_ax.get_position().x0
        assert placed == side_by_side and (side_by_side or time_ax.get_position().y0 > norm_ax.get_position().y1)
        times = _lines(hover, "communication ms")
        assert _xs(times) == [float(s) for s in range(10)]
        assert [s["name"] for s in times["series"]] == [f"rank {r}" for r in range(8)]
        ms = [1e3 * sum(b["seconds"] for b in BUCKETS if b["rank"] == 3 and b["step"] == s) for s in range(10)]
        np.testing.assert_allclose(_floats(times["series"][3]["values"]), ms, rtol=1e-6)
        norms = _lines(hover, "local gradient norm")
        expected = [math.sqrt(3 * (1.0 + 5 + s) ** 2) for s in range(10)]
        np.testing.assert_allclose(_floats(norms["series"][5]["values"]), expected, rtol=1e-6)


def _cells(hover) -> dict:
    (region,) = [r for r in hover["regions"] if r["type"] == "cells"]
    return region


def test_a_gpt2_summary_has_readable_rows_named_whole_on_hover_and_its_colour_bar_inside():
    layers = _gpt2_layers()
    rows = _summary_rows(layers, 40)
    rows = [r for r in rows if not (r["path"] == "transformer.h.3.mlp" and r["step"] == 7)]  # one missing cell
    with using_frame({"width": 600, "ratio": 2}):
        fig = summary_heatmap_figure(rows, "grad_norm", layers=layers, title="grad_norm per layer and step")
        png, hover = figure_image(fig)
    assert len(layers) > 300 and _size(png)[0] <= 1201
    region = _cells(hover)
    assert (region["rows"], region["cols"], region["quantity"], region["aggregate"]) == (
        len(layers),
        40,
        "grad_norm",
        "",
    )
    assert region["row"]["name"] == "layer" and region["row"]["labels"] == ["(model)", *layers[1:]]  # every path whole
    assert region["col"]["name"] == "step" and region["col"]["labels"] == [str(s) for s in range(1, 41)]
    x0, y0, x1, y1 = region["box"]
    assert (y1 - y0) / len(layers) >= 10 and 0 <= x0 < x1 <= 600  # rows of 10 CSS px or more; the pane scrolls
    values = _floats(region["values"]).reshape(len(layers), 40)
    expected = np.full((len(layers), 40), np.nan, np.float32)
    for r in rows:
        expected[layers.index(r["path"]), r["step"] - 1] = r["grad_norm"]
    np.testing.assert_array_equal(values, expected)  # the missing cell NaN
    canvas, right, _ = _drawn(fig)
    renderer = canvas.get_renderer()
    ax, bar = fig.axes
    names = [t for t in ax.get_yticklabels() if t.get_text()]
    assert len(names) >= len(layers) // 2  # every second row named at least
    assert all(t.get_window_extent(renderer).x0 >= 0 for t in names)
    assert bar.get_window_extent(renderer).x1 <= right
    assert bar.get_window_extent(renderer).y1 >= ax.get_window_extent(renderer).y1 - 1  # beside the grid's top


def test_names_too_long_for_a_narrow_frame_are_cut_from_the_left_and_read_whole_under_the_mouse():
    layers = [f"model.encoder.block_stack.layers.{i}.attn.out_proj" for i in range(6)] + ["fc"]
    with using_frame({"width": 400, "ratio": 1}):
        fig = summary_heatmap_figure(_summary_rows(layers, 3), "grad_norm")
        _, hover = figure_image(fig)
    names = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert names[-1] == "fc" and len(names) == 7
    for i, name in enumerate(names[:-1]):
        assert name.startswith("…") and layers[i].endswith(name[1:]) and f"{i}.attn" in name
    assert _cells(hover)["row"]["labels"] == layers
    canvas, _, _ = _drawn(fig)
    assert fig.get_tightbbox(canvas.get_renderer()).x0 >= -0.01


def test_a_long_history_is_read_as_means_of_steps_and_the_title_says_so():
    layers = [f"blocks.{i}" for i in range(50)]
    rows = _summary_rows(layers, 2000)
    with using_frame({"width": 400, "ratio": 1}):
        fig = summary_heatmap_figure(rows, "grad_norm")
        _, hover = figure_image(fig)
    region = _cells(hover)
    stride = region["col"]["stride"]
    assert stride > 1 and region["aggregate"] == "mean" and region["rows"] == 50
    assert region["cols"] == -(-2000 // stride) and region["cols"] <= region["box"][2] - region["box"][0]
    assert region["col"]["labels"][0] == f"1–{stride}" and region["col"]["count"] == 2000
    grid = np.array([[r["grad_norm"] for r in rows[i::50]] for i in range(50)])
    np.testing.assert_allclose(_floats(region["values"]).reshape(50, -1)[:, 0], grid[:, :stride].mean(1), rtol=1e-5)
    assert f"the page reads means of {stride} steps" in " ".join(fig.axes[0].get_title().split())


def test_a_signed_field_has_a_symmetric_scale_and_its_colour_bar_says_its_exponent_inside_the_figure():
    rows = [{"path": f"layer{i}", "step": s, "act_mean": 1e-4 * (i - 2) * s} for i in range(5) for s in (1, 2)]
    with using_frame({"width": 400, "ratio": 1}):
        fig = summary_heatmap_figure(rows, "act_mean")
    image = fig.axes[0].get_images()[0]
    low, high = image.get_clim()
    assert low == -high and high == pytest.approx(4e-4) and image.get_cmap().name.startswith("RdBu_r")
    canvas, right, top = _drawn(fig)
    offset = fig.axes[1].yaxis.get_offset_text()
    assert offset.get_text() == "×10⁻⁴", offset.get_text()  # the factor as plain text (scales.scaled_colorbar)
    box = offset.get_window_extent(canvas.get_renderer())
    assert box.x1 <= right and box.y1 <= top
    assert matplotlib.colors.to_hex(image.cmap(0.5)) != matplotlib.colors.to_hex(image.cmap(0.0))


def test_an_empty_list_of_layers_is_named_as_the_mistake():
    with pytest.raises(ValueError, match=r"no layers to draw: layers=\[\] names none; pass layers=None"):
        summary_heatmap_figure([{"path": "a", "step": 1, "grad_norm": 1.0}], "grad_norm", layers=[])


def test_a_small_models_summary_names_every_layer():
    layers = [""] + [f"features.layer{i}" for i in range(14)]  # a CNN's 15 modules
    rows = [{"path": p, "step": 1, "grad_norm": i + 1.0} for i, p in enumerate(layers)]
    with using_frame({"width": 600, "ratio": 1}):
        fig = summary_heatmap_figure(rows, "grad_norm")
        fig.canvas.draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["(model)", *layers[1:]]
    assert "named every" not in ax.get_title()
