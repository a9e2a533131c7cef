"""Complex captures are drawn as their magnitude, said in the title; a capture of 0 elements is a figure saying so."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.hooks.actions import Firing, describe_firing
from hookwidgets.plots import (
    attention_figure,
    bars_figure,
    cam_overlay_figure,
    feature_map_figure,
    figure_png,
    gradient_map_figure,
    histogram_figure,
    matrix_figure,
    stats_figure,
    summary_heatmap_figure,
)


def _imaginary(*shape: int) -> torch.Tensor:
    """A complex tensor whose real part is zero: drawn as its real part, it would be all zeros."""
    torch.manual_seed(0)
    return torch.complex(torch.zeros(shape), torch.rand(shape) + 0.5)


def _titles(fig) -> str:
    texts = [ax.get_title() for ax in fig.axes] + ([fig.get_suptitle()] if fig.get_suptitle() else [])
    return " ".join(texts).replace("\n", " ")


@pytest.fixture(autouse=True)
def no_warnings():
    """Neither torch's "casting complex values to real discards the imaginary part" nor numpy's empty-slice ones."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def test_feature_and_gradient_maps_of_a_complex_capture_draw_its_magnitude():
    z = _imaginary(1, 3, 4, 4)
    magnitude = z.abs()
    for draw in (feature_map_figure, gradient_map_figure):
        fig = draw(z, title="fft")
        assert fig.axes[0].get_title() == "fft (magnitude)"
        low, high = fig.axes[0].get_images()[0].get_clim()
        if draw is feature_map_figure:
            assert (low, high) == pytest.approx((magnitude.min().item(), magnitude.max().item()))
        else:
            assert high == pytest.approx(magnitude.max().item())


def test_bars_matrices_and_attention_of_complex_values_draw_their_magnitude():
    z = _imaginary(3, 5)
    bars = bars_figure(z[0], title="logits")
    assert bars.axes[0].get_title() == "logits (magnitude)"
    heights = [p.get_height() for p in bars.axes[0].patches]
    assert heights == pytest.approx(z[0].abs().tolist())
    assert feature_map_figure(z, title="fc").axes[0].get_title() == "fc (magnitude)"  # (N, F): bars of item 0

    matrix = matrix_figure(z, title="fc")
    assert matrix.axes[0].get_title() == "fc (magnitude)"
    np.testing.assert_allclose(matrix.axes[0].get_images()[0].get_array(), z.abs().numpy(), rtol=1e-6)

    weights = _imaginary(2, 3, 3)
    attention = attention_figure(weights, title="attn")
    assert attention.axes[0].get_title() == "attn (magnitude)"
    np.testing.assert_allclose(attention.axes[0].get_images()[1].get_array(), weights[1].abs().numpy(), rtol=1e-6)


def test_histograms_bin_the_magnitude_of_complex_values():
    z = _imaginary(1000)
    fig = histogram_figure({"spectrum": z, "real": torch.randn(10)}, title="h")
    ax = fig.axes[0]
    assert ax.get_title() == "h (magnitude)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["spectrum (magnitude) (n=1,000)", "real (n=10)"]
    only = histogram_figure(z).axes[0]
    assert only.get_xlabel() == "magnitude"
    assert only.get_xlim()[0] >= 0.5 - 0.05  # every |z| is at least 0.5: no bin at the real part's 0


def test_a_cam_overlay_of_a_complex_map_draws_its_magnitude():
    cam = _imaginary(1, 4, 4)
    fig = cam_overlay_figure(torch.rand(1, 3, 4, 4), cam, title="cam")
    assert fig.axes[0].get_title() == "cam (magnitude)"
    np.testing.assert_allclose(fig.axes[0].get_images()[1].get_array(), cam[0].abs().numpy(), rtol=1e-6)


class Spectrum(nn.Module):
    """A complex output whose real part is zero."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.complex(torch.zeros_like(x), x)


def test_statistics_of_a_complex_capture_say_they_are_of_its_magnitude(capsys):
    model = nn.Sequential(Spectrum())
    with Explorer(model) as ex:
        ex.attach("0", "forward", "stats")
        model(-torch.ones(2, 3))
        model(-2 * torch.ones(2, 3))
        records = ex.captures["0"]["forward"]
        ex.attach("0", "forward", "print")
        model(-torch.ones(1, 2))
    assert records[0].stats["magnitude"] is True and records[0].stats["mean"] == 1.0  # |−1j|, not the real 0
    assert _titles(stats_figure(records, title="0 · forward statistics")) == "0 · forward statistics (magnitude)"
    assert "output (1, 2) complex64 magnitude mean=1 std=0 min=1 max=1" in capsys.readouterr().out


def _empty_cases():
    empty4 = torch.zeros(0, 3, 4, 4)
    return {
        "feature maps, no item": (lambda: feature_map_figure(empty4, title="t"), (0, 3, 4, 4)),
        "feature maps, no channel": (lambda: gradient_map_figure(torch.zeros(2, 0, 4, 4), title="t"), (2, 0, 4, 4)),
        "feature maps, no feature": (lambda: feature_map_figure(torch.zeros(3, 0), title="t"), (3, 0)),
        "feature maps, rank 5": (lambda: feature_map_figure(torch.zeros(0, 1, 2, 3, 4), title="t"), (0, 1, 2, 3, 4)),
        "bars": (lambda: bars_figure(torch.zeros(0), title="t"), (0,)),
        "matrix": (lambda: matrix_figure(torch.zeros(0, 3), title="t"), (0, 3)),
        "attention": (lambda: attention_figure(torch.zeros(2, 0, 0), title="t"), (2, 0, 0)),
        "histogram": (lambda: histogram_figure({"a": torch.zeros(0, 2), "b": torch.zeros(0)}, title="t"), (0, 2)),
        "cam overlay": (lambda: cam_overlay_figure(empty4, torch.zeros(0, 4, 4), title="t"), (0, 3, 4, 4)),
    }


@pytest.mark.parametrize("case", list(_empty_cases()))
def test_a_tensor_of_0_elements_is_a_figure_that_says_so_with_its_shape(case):
    draw, shape = _empty_cases()[case]
    fig = draw()
    assert _titles(fig) == f"t [empty (0 elements): shape {shape}]"
    assert figure_png(fig)[:4] == b"\x89PNG"


def test_statistics_of_an_empty_capture_are_counts_of_0_and_no_nan_in_the_summary(capsys):
    class Nothing(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :0]

    model = nn.Sequential(nn.Linear(3, 3), Nothing())
    with Explorer(model) as ex:
        ex.attach("", "global_forward", "stats")
        model(torch.randn(2, 3))
        rows = {row["path"]: row for row in ex.summary()}
        (record,) = ex.captures["1"]["global_forward"]
    assert (record.stats["numel"], record.stats["nan"], record.stats["inf"], record.stats["norm"]) == (0, 0, 0, 0.0)
    empty = rows["1"]
    assert "act_mean" not in empty and "act_std" not in empty  # a tensor of 0 elements has no mean
    assert (empty["act_norm"], empty["act_nan"], empty["act_inf"]) == (0.0, 0, 0)
    fig = summary_heatmap_figure(list(rows.values()), "act_mean", layers=["0", "1"])
    assert fig.axes[0].get_images()[0].get_array().mask[1, 0]  # grey, as a cell without a value
    assert "NaN/Inf" not in fig.axes[0].get_title()
    print_line = describe_firing(Firing("1", "forward", 1, 0), {"output": torch.zeros(2, 0)})
    assert print_line == "[step 1] 1 forward call 0: output (2, 0) float32 empty (0 elements)"
