"""Bars, matrices and histograms drawn for the pane: within the frame's width at its pixel ratio, a colour bar
that writes its exponent, and the values under the mouse equal to the tensor's."""

from __future__ import annotations

import io

import matplotlib.image
import numpy as np
import pytest
import torch

from hookwidgets.plots import bars_figure, histogram_figure, matrix_figure
from hookwidgets.plots.frame import CSS_DPI, using_frame
from hookwidgets.plots.hover import figure_image

WIDTHS = (400, 600, 900, 1400)


def _xs(region: dict) -> list[float]:
    """A lines region's x values (float64 bytes) as numbers."""
    return np.frombuffer(region["x"], "<f8").tolist()


def _natural_width(png: bytes) -> int:
    return matplotlib.image.imread(io.BytesIO(png)).shape[1]


def _fits(fig, width: int, ratio: float) -> dict:
    """The figure's hover, once checked to be at most ``width`` CSS px, every axes inside, the PNG ``ratio`` ×."""
    fig.canvas.draw()
    for ax in fig.axes:
        tight = ax.get_tightbbox()
        assert tight.x0 >= -1 and tight.x1 <= fig.bbox.x1 + 1, ax
    png, hover = figure_image(fig)
    css = fig.get_size_inches()[0] * CSS_DPI
    assert css <= width and _natural_width(png) <= ratio * width
    assert _natural_width(png) >= (1.9 if ratio == 2 else 1.0) * css - 1  # whole pixels
    return hover


def _cells(region) -> np.ndarray:
    return np.frombuffer(region["values"], "<f4").reshape(region["rows"], region["cols"])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("ratio", [1, 2])
def test_bars_matrices_and_histograms_fit_the_frame_at_its_pixel_ratio(width, ratio):
    with using_frame({"width": width, "ratio": ratio}):
        _fits(bars_figure(torch.randn(200), title="logits"), width, ratio)
        _fits(matrix_figure(torch.randn(40, 300), title="fc", diverging=True), width, ratio)
        _fits(histogram_figure({"activation": torch.randn(500), "gradient": torch.randn(500)}), width, ratio)


def test_a_matrix_hover_reads_each_cell_with_its_labels_and_says_averaged_blocks():
    values = torch.randn(3, 5)
    with using_frame({"width": 600, "ratio": 1}):
        hover = _fits(matrix_figure(values, row_labels=["a", "b", "c"], column_labels=list("vwxyz")), 600, 1)
    (region,) = hover["regions"]
    assert region["row"]["labels"] == ["a", "b", "c"] and region["col"]["labels"] == list("vwxyz")
    assert _cells(region)[2, 4] == values[2, 4].item()
    wide = torch.randn(4, 3000)
    with using_frame({"width": 600, "ratio": 1}):
        fig = matrix_figure(wide, title="wide")
        hover = _fits(fig, 600, 1)
    (region,) = hover["regions"]
    stride = region["col"]["stride"]
    assert stride > 1 and region["col"]["count"] == 3000 and region["aggregate"] == "mean"
    assert f"columns averaged in blocks of {stride}" in fig.axes[0].get_title()
    assert _cells(region)[1, 2] == pytest.approx(wide[1, 2 * stride : 3 * stride].mean().item(), rel=1e-4)


def test_a_signed_matrix_colour_bar_writes_its_exponent():
    with using_frame({"width": 600, "ratio": 1}):
        fig = matrix_figure(torch.randn(6, 8) * 2e-4, diverging=True)
        figure_image(fig)
    bar = fig.axes[1]
    assert "×10⁻⁴" in bar.yaxis.get_offset_text().get_text().replace("−", "-")
    assert not any("0.0002" in t.get_text() for t in bar.get_yticklabels())


def test_bars_hover_reads_each_value_and_more_bars_than_pixels_draw_each_blocks_range():
    values = torch.randn(30)
    with using_frame({"width": 600, "ratio": 1}):
        (region,) = figure_image(bars_figure(values))[1]["regions"]
    assert region["type"] == "lines" and _xs(region) == list(range(30)) and region["x_name"] == "feature"
    (series,) = region["series"]
    assert np.frombuffer(series["values"], "<f4")[7] == values[7].item()
    logits = torch.randn(50_000)
    with using_frame({"width": 600, "ratio": 1}):
        fig = bars_figure(logits, title="logits")
        (region,) = _fits(fig, 600, 1)["regions"]
    assert "features in blocks of" in fig.axes[0].get_title() and not fig.axes[0].patches
    assert len(_xs(region)) <= 600
    highest = dict((s["name"], np.frombuffer(s["values"], "<f4")) for s in region["series"])["highest"]
    stride = round(_xs(region)[1] - _xs(region)[0])
    assert highest[3] == logits[3 * stride : 4 * stride].max().item()


def test_a_histograms_hover_reads_each_bins_count_at_its_centre():
    values = torch.randn(1000)
    with using_frame({"width": 600, "ratio": 1}):
        (region,) = figure_image(histogram_figure({"act": values}, bins=20))[1]["regions"]
    counts, edges = np.histogram(values.numpy(), bins=np.linspace(values.min().item(), values.max().item(), 21))
    assert _xs(region) == pytest.approx(((edges[:-1] + edges[1:]) / 2).tolist(), rel=1e-5)
    (series,) = region["series"]
    assert series["name"] == "act" and np.frombuffer(series["values"], "<f4").tolist() == counts.tolist()


def test_a_histograms_legend_is_under_its_axes_inside_the_figure_never_over_the_bins():
    names = {"transformer.h.11.mlp.c_fc · output.0": torch.randn(3000), "transformer.h.11 · grad": torch.randn(3000)}
    with using_frame({"width": 400, "ratio": 1}):
        fig = histogram_figure(names, title="h")
        fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert legend.y1 <= ax.get_window_extent().y0 and legend.y0 >= 0  # below the bins, above the figure's edge
    assert legend.x0 >= 0 and legend.x1 <= fig.bbox.x1
