"""The feature-map grid: one pre-coloured image checked pixel by pixel, and the channel numbers as its texts."""

import io

import matplotlib
import matplotlib.colors
import matplotlib.image
import numpy as np
import pytest
import torch

from hookwidgets.plots import NONFINITE_COLOR, feature_map_figure, figure_png, gradient_map_figure
from hookwidgets.plots._labels import PAD, box_size
from hookwidgets.plots.feature_maps import DPI

MAGENTA = np.array([255, 0, 255], dtype=np.uint8)
WHITE = np.array([255, 255, 255], dtype=np.uint8)
SHADE = 0.35  # a label box darkens the tile under it to 35% (black at 65% opacity): white text reads on any colour


def _png(fig, dpi: int = DPI) -> np.ndarray:
    png = figure_png(fig, dpi=dpi)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return (matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3] * 255).round().astype(np.uint8)


def _grid(fig) -> np.ndarray:
    (image,) = fig.axes[0].get_images()
    grid = image.get_array()
    assert grid.dtype == np.uint8 and grid.ndim == 3 and grid.shape[2] == 4
    return grid


def _offset(fig) -> tuple[int, int]:
    """The grid's top-left corner in the PNG at 96 dpi: below the title and the colour bar's factor, a small margin
    on the left (whole pixels: the grid is drawn 1:1)."""
    box = fig.axes[0].get_position()
    width, height = fig.get_size_inches() * DPI
    top, left = (1 - box.y1) * height, box.x0 * width
    assert abs(top - round(top)) < 1e-6 and abs(left - round(left)) < 1e-6
    return round(top), round(left)


def _colour(cmap: str, fraction: float) -> np.ndarray:
    return np.array(matplotlib.colormaps[cmap](fraction, bytes=True)[:3], dtype=np.uint8)


def _labels(fig, pitch: int) -> dict[tuple[int, int], str]:
    """The axes' texts by the top-left grid pixel ``(y, x)`` of the tile they are written in (tiles ``pitch`` apart)."""
    found = {}
    for text in fig.axes[0].texts:
        x, y = text.get_position()  # the grid's pixel coordinates
        origin = (int(y // pitch) * pitch, int(x // pitch) * pitch)
        assert origin not in found, f"two labels in the tile at {origin}"
        found[origin] = text.get_text()
    return found


def _boxes(fig, pitch: int, shape: tuple[int, ...], scale: int = 1) -> np.ndarray:
    """Where the label boxes are on the grid (drawn ``scale`` times as big): each text's box at its tile's corner."""
    inside = np.zeros((shape[0] * scale, shape[1] * scale), dtype=bool)
    for (y, x), label in _labels(fig, pitch).items():
        (text,) = [t for t in fig.axes[0].texts if t.get_text() == label]
        height, width = box_size(label, text.get_fontsize(), DPI)
        inside[y * scale : (y + height) * scale, x * scale : (x + width) * scale] = True
    return inside


def _assert_labels_drawn_in_their_boxes(fig, pitch: int, dpi: int = DPI) -> None:
    """The PNG is the grid wherever no label box is; inside each box the label's white ink is drawn."""
    scale = dpi // DPI
    top, left = _offset(fig)
    grid = _grid(fig)[..., :3].repeat(scale, axis=0).repeat(scale, axis=1)
    png = _png(fig, dpi)[scale * top : scale * top + grid.shape[0], scale * left : scale * left + grid.shape[1]]
    boxes = _boxes(fig, pitch, _grid(fig).shape, scale)
    assert np.array_equal(png[~boxes], grid[~boxes])
    for (y, x), label in _labels(fig, pitch).items():
        (text,) = [t for t in fig.axes[0].texts if t.get_text() == label]
        height, width = box_size(label, text.get_fontsize(), DPI)
        box = png[y * scale : (y + height) * scale, x * scale : (x + width) * scale]
        assert (box.min(axis=-1) >= 230).sum() >= 4 * scale * scale * len(label), f"no ink for label {label!r}"


def test_feature_maps_are_one_tiled_image_with_a_label_per_channel_shown_one_to_one():
    maps = torch.randn(2, 6, 5, 5, generator=torch.Generator().manual_seed(0))
    fig = feature_map_figure(maps, title="conv out")
    grid = _grid(fig)
    # One row of 6 maps of 5×5 (the default 720 px frame holds them), zoomed ×12 to 60-pixel tiles with
    # 2-pixel white separators.
    assert grid.shape == (60, 6 * 62 - 2, 4)
    assert (grid[:, 60:62, :3] == 255).all()
    assert _labels(fig, 62) == {(0, k * 62): str(k) for k in range(6)}
    # Each data pixel is a 12×12 block of its colour on the shared scale (away from the label box).
    low, high = float(maps[0].min()), float(maps[0].max())
    for channel, (i, j) in [(0, (4, 4)), (4, (2, 3)), (5, (3, 0))]:
        r, k = divmod(channel, 6)
        block = grid[r * 62 + 12 * i : r * 62 + 12 * i + 12, k * 62 + 12 * j : k * 62 + 12 * j + 12, :3]
        expected = _colour("viridis", (float(maps[0, channel, i, j]) - low) / (high - low))
        assert (block == expected).all()
    assert fig.axes[0].get_title() == "conv out"
    assert fig.axes[0].get_images()[0].get_clim() == (low, high)
    assert len(fig.axes) == 2  # the colour bar
    _assert_labels_drawn_in_their_boxes(fig, 62)


def test_the_grid_is_drawn_one_to_one_and_scaled_whole_at_any_other_dpi():
    fig = feature_map_figure(torch.randn(1, 6, 5, 5, generator=torch.Generator().manual_seed(1)))
    grid = _grid(fig)
    _assert_labels_drawn_in_their_boxes(fig, 62)  # 96 dpi: each grid pixel is one PNG pixel
    _assert_labels_drawn_in_their_boxes(fig, 62, dpi=192)  # every pixel becomes 2×2, the labels twice as big
    fig.axes[0].get_images()[0].set_alpha(0.5)  # restyled: drawn as any image is, half over white
    top, left = _offset(fig)
    faded = _png(fig)[top + 30, left + 30].astype(int)
    assert np.abs(faded - (grid[30, 30, :3].astype(int) + 255) / 2).max() <= 1


def test_a_64_channel_grid_is_one_image_with_64_labels_and_separators():
    fig = feature_map_figure(torch.rand(1, 64, 56, 56), max_channels=64)
    grid = _grid(fig)
    assert grid.shape == (6 * 57 - 1, 11 * 57 - 1, 4)  # 1:1, one-pixel gutters, 11 columns fill the 720 px frame
    for gutter in range(56, grid.shape[0], 57):
        assert (grid[gutter, :, :3] == 255).all()
    for gutter in range(56, grid.shape[1], 57):
        assert (grid[:, gutter, :3] == 255).all()
    assert _labels(fig, 57) == {(c // 11 * 57, c % 11 * 57): str(c) for c in range(64)}
    assert [t.get_text() for t in fig.axes[0].texts] == [str(c) for c in range(64)]  # in channel order
    boxes = _boxes(fig, 57, grid.shape)
    assert not (grid[boxes][:, :3] == 255).all(axis=-1).any()  # the image holds the boxes, not the digits
    _assert_labels_drawn_in_their_boxes(fig, 57)


def test_many_channels_are_capped_and_the_title_says_so():
    fig = feature_map_figure(torch.randn(1, 40, 3, 3), title="wide")
    grid = _grid(fig)
    assert grid.shape == (2 * 38 - 2, 16 * 38 - 2, 4)  # 32 tiles of 36 pixels in 2 rows of 16: no empty tile
    assert _labels(fig, 38)[(1 * 38, 15 * 38)] == "31" and len(fig.axes[0].texts) == 32
    assert "first 32 of 40 channels" in fig.axes[0].get_title()


def test_channels_ordered_by_mean_activation_keep_their_numbers_and_only_the_top_k_are_drawn():
    maps = torch.zeros(1, 6, 4, 4)
    for channel, mean in enumerate([0.1, 5.0, -1.0, 3.0, 2.0, 0.0]):
        maps[0, channel] = mean
    fig = feature_map_figure(maps, title="conv", order="mean", max_channels=3)
    grid = _grid(fig)  # 1 × 3 tiles of 4×4 zoomed ×12: 48 pixels, 2 apart
    assert _labels(fig, 50) == {(0, 0): "1", (0, 50): "3", (0, 100): "4"}
    assert "top 3 of 6 channels" in fig.axes[0].get_title()
    # Shared scale over the drawn channels, 2 to 5: channel 1 at the top, 3 at a third, 4 at the bottom.
    for (y, x), fraction in {(30, 30): 1.0, (30, 80): 1 / 3, (30, 130): 0.0}.items():
        assert (grid[y, x, :3] == _colour("viridis", fraction)).all()


def test_per_channel_scale_stretches_every_tile_and_says_so_on_the_colour_bar():
    maps = torch.stack([torch.linspace(0, 1, 16), torch.linspace(0, 100, 16)]).reshape(1, 2, 4, 4)
    fig = feature_map_figure(maps, scale="channel")
    grid = _grid(fig)  # 2 tiles of 48 pixels; the last data pixel (3, 3) is each channel's maximum
    top = _colour("viridis", 1.0)
    assert (grid[42, 42, :3] == top).all() and (grid[42, 50 + 42, :3] == top).all()
    assert (grid[20, 2, :3] == _colour("viridis", 4 / 15)).all() and (
        grid[20, 52, :3] == _colour("viridis", 4 / 15)
    ).all()
    assert fig.axes[1].get_ylabel() == "per-channel scale"
    shared = feature_map_figure(maps)
    assert shared.axes[0].get_images()[0].get_clim() == (0.0, 100.0)
    assert (_grid(shared)[42, 42, :3] == _colour("viridis", 0.01)).all()


def test_gradient_scale_is_symmetric_around_zero_and_zero_is_the_middle_colour():
    fig = gradient_map_figure(torch.tensor([[[[0.5, -2.0], [1.0, 0.0]]]]))
    assert fig.axes[0].get_images()[0].get_clim() == (-2.0, 2.0)
    grid = _grid(fig)  # one 2×2 map zoomed ×12: 24-pixel tile
    for (i, j), value in {(0, 1): -2.0, (1, 0): 1.0, (1, 1): 0.0}.items():
        assert (grid[12 * i + 6, 12 * j + 6, :3] == _colour("RdBu_r", (value + 2.0) / 4.0)).all()
    assert (grid[18, 18, :3] == _colour("RdBu_r", 0.5)).all()


def test_nonfinite_pixels_are_drawn_magenta_where_they_are_and_half_precision_is_cast():
    t = torch.ones(1, 2, 4, 4, dtype=torch.bfloat16)
    t[0, 0, 2, 3] = float("nan")
    t[0, 1, 3, 1] = float("inf")
    fig = feature_map_figure(t, title="x")
    assert "1 NaN, 1 Inf" in fig.axes[0].get_title()
    assert matplotlib.colors.to_hex(MAGENTA / 255) == NONFINITE_COLOR
    grid = _grid(fig)  # 2 tiles of 4×4 zoomed ×12: 48 pixels, 2-pixel gutter
    magenta = (grid[..., :3] == MAGENTA).all(axis=-1)
    assert magenta[24:36, 36:48].all() and magenta[36:48, 50 + 12 : 50 + 24].all()
    assert magenta.sum() == 2 * 144  # nothing else is magenta
    finite_colour = _colour("viridis", 0.5)  # ones on a constant scale sit in the middle
    assert (grid[40, 10, :3] == finite_colour).all()
    png, (top, left) = _png(fig), _offset(fig)
    assert (png[top + 30, left + 40] == MAGENTA).all() and (png[top + 42, left + 67] == MAGENTA).all()


def test_a_shrunk_grid_never_hides_a_nan():
    maps = torch.rand(1, 64, 112, 112)
    maps[0, 9, 51, 77] = float("nan")
    fig = feature_map_figure(maps, max_channels=64)
    grid = _grid(fig)
    assert grid.shape[0] <= 820 and grid.shape[1] <= 720  # shrunk to the tallest size drawn, the frame's width
    pitch = round(fig.axes[0].texts[1].get_position()[0] + 0.5 - PAD)  # label 1 is at the second tile's corner
    tile = pitch - 1
    assert tile < 112 and "maps downsampled to" in fig.axes[0].get_title()
    magenta = (grid[..., :3] == MAGENTA).all(axis=-1)
    columns = (grid.shape[1] + 1) // pitch
    y, x = divmod(9, columns)
    inside = magenta[y * pitch : y * pitch + tile, x * pitch : x * pitch + tile]  # channel 9
    assert 1 <= inside.sum() <= 4 and magenta.sum() == inside.sum()


def test_labels_sit_on_a_dark_box_and_leave_nan_pixels_magenta():
    maps = torch.full((1, 1, 3, 3), 1.0)
    maps[0, 0, 0, 0] = float("nan")  # under the label
    fig = feature_map_figure(maps)  # one 36-pixel tile, "0" in the box at its corner
    assert _labels(fig, 36) == {(0, 0): "0"}
    height, width = box_size("0", fig.axes[0].texts[0].get_fontsize(), DPI)
    assert height <= 12 and width <= 12  # the box lies on the NaN pixel's 12×12 block
    assert (_grid(fig)[:12, :12, :3] == MAGENTA).all()  # a NaN under the label box stays magenta
    _assert_labels_drawn_in_their_boxes(fig, 36)
    fig = feature_map_figure(torch.full((1, 1, 3, 3), 1.0))
    grid = _grid(fig)
    shaded, tile = grid[1, 1, :3].astype(int), grid[20, 20, :3].astype(int)
    assert (np.abs(shaded - (tile * SHADE).astype(int)) <= 1).all() and (shaded < tile).all()
    assert (grid[height - 1, width - 1, :3] == shaded).all() and (grid[height, width, :3] == tile).all()


def test_tiles_too_small_for_a_label_say_so_instead_of_drawing_unreadable_digits():
    maps = torch.rand(1, 1000, 1, 1)
    fig = feature_map_figure(maps, max_channels=1000)
    assert "tiles too small for channel numbers" in fig.axes[0].get_title() and not fig.axes[0].texts
    grid = _grid(fig)  # 22 rows × 46 columns of 12-pixel tiles (1×1 maps zoomed ×12), 2 apart
    low, high = float(maps.min()), float(maps.max())
    for channel in (0, 999):
        r, k = divmod(channel, 46)
        tile = grid[r * 14 : r * 14 + 12, k * 14 : k * 14 + 12, :3]
        assert (tile == _colour("viridis", (float(maps[0, channel, 0, 0]) - low) / (high - low))).all()


def test_cmap_recolours_the_tiles_and_the_colour_bar():
    fig = feature_map_figure(torch.tensor([[[[0.0, 1.0]]]]), cmap="gray")
    grid = _grid(fig)
    assert grid.shape == (12, 24, 4)  # a 1×2 map zoomed ×12
    assert (grid[10, 18, :3] == 255).all() and (grid[10, 8, :3] == _colour("gray", 0.0)).all()
    assert fig.axes[0].get_images()[0].get_cmap().name == "gray"


def test_an_empty_tensor_is_a_figure_that_says_so():
    fig = feature_map_figure(torch.zeros(2, 0, 4, 4), title="conv")
    assert fig.axes[0].get_title() == "conv [empty (0 elements): shape (2, 0, 4, 4)]"
    assert _png(fig).shape[2] == 3


def test_an_item_out_of_range_names_the_batch_size():
    with pytest.raises(IndexError, match="item 2 is out of range: the tensor holds 2 items"):
        feature_map_figure(torch.zeros(2, 3, 4, 4), item=2)


@pytest.mark.parametrize("shape", [(3, 10), (10,)])
def test_vectors_are_drawn_as_bars(shape):
    fig = feature_map_figure(torch.arange(30.0)[: np.prod(shape)].reshape(shape), title="logits")
    assert len(fig.axes[0].patches) == 10


def test_unsupported_rank_names_the_shape():
    with pytest.raises(ValueError, match=r"cannot draw a tensor of shape \(1, 2, 3, 4, 5\)"):
        feature_map_figure(torch.zeros(1, 2, 3, 4, 5))
