import io

import matplotlib.image
import numpy as np
import pytest
import torch

from hookwidgets.plots import NONFINITE_COLOR, feature_map_figure, figure_png, gradient_map_figure


def _pixels(png: bytes) -> np.ndarray:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return matplotlib.image.imread(io.BytesIO(png), format="png")


def test_feature_maps_are_one_tiled_image_with_a_label_per_channel():
    fig = feature_map_figure(torch.randn(2, 6, 5, 5), title="conv out")
    ax = fig.axes[0]
    (image,) = ax.get_images()
    assert image.get_array().shape == (2 * 6 - 1, 3 * 6 - 1)  # 3 columns × 2 rows with gutters
    assert [t.get_text() for t in ax.texts] == [str(c) for c in range(6)]
    assert ax.get_title() == "conv out"
    assert len(fig.axes) == 2  # the colour bar
    assert _pixels(figure_png(fig)).shape[2] in (3, 4)


def test_many_channels_are_capped_and_the_title_says_so():
    fig = feature_map_figure(torch.randn(1, 40, 3, 3), title="wide")
    assert len(fig.axes[0].texts) == 32
    assert "first 32 of 40 channels" in fig.axes[0].get_title()


def test_gradient_scale_is_symmetric_around_zero():
    fig = gradient_map_figure(torch.tensor([[[[0.5, -2.0], [1.0, 0.0]]]]))
    assert fig.axes[0].get_images()[0].get_clim() == (-2.0, 2.0)


def test_non_finite_values_and_half_precision_are_drawn_and_counted():
    t = torch.ones(1, 2, 4, 4, dtype=torch.bfloat16)
    t[0, 0, 0, 0] = float("nan")
    t[0, 1, 0, 0] = float("inf")
    fig = feature_map_figure(t, title="x")
    assert "1 NaN, 1 Inf" in fig.axes[0].get_title()
    assert len(fig.axes[0].get_images()) == 2  # the data and the magenta overlay
    rgb = _pixels(figure_png(fig, dpi=50))[..., :3]
    magenta = np.array(matplotlib.colors.to_rgb(NONFINITE_COLOR))
    assert np.isclose(rgb, magenta, atol=0.02).all(axis=-1).any()


@pytest.mark.parametrize("shape", [(3, 10), (10,)])
def test_vectors_are_drawn_as_bars(shape):
    fig = feature_map_figure(torch.arange(30.0)[: np.prod(shape)].reshape(shape), title="logits")
    assert len(fig.axes[0].patches) == 10


def test_unsupported_rank_names_the_shape():
    with pytest.raises(ValueError, match=r"cannot draw a tensor of shape \(1, 2, 3, 4, 5\)"):
        feature_map_figure(torch.zeros(1, 2, 3, 4, 5))
