"""The feature-map grid composed in NumPy: tiles coloured, laid out with separators, label boxes shaded.

Matplotlib then shows one pre-coloured RGBA image at 1:1, with the channel numbers as text on the boxes.
Colouring the tiles here rather than painting a float image and a second NaN layer keeps it array work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.colors
import numpy as np

MAX_PX = 820  # CSS pixels: the tallest grid drawn; its width is the pane's
MAX_ZOOM = 12  # device pixels per map pixel per CSS pixel: a 7×7 map becomes 84 CSS px, not the whole pane
WHITE = (255, 255, 255, 255)
BOX_SHADE = 0.35  # label boxes are black at 65% opacity over the tile: white text reads on any colour


@dataclass(frozen=True)
class Layout:
    """Where tiles go: ``rows`` × ``columns`` tiles of ``tile`` (h, w) display pixels, ``gutter`` pixels apart."""

    rows: int
    columns: int
    tile: tuple[int, int]
    gutter: int

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)`` of the whole grid in pixels."""
        (h, w), g = self.tile, self.gutter
        return self.rows * (h + g) - g, self.columns * (w + g) - g

    def origin(self, position: int) -> tuple[int, int]:
        """Top-left pixel ``(y, x)`` of the tile at ``position`` (row-major)."""
        r, k = divmod(position, self.columns)
        return r * (self.tile[0] + self.gutter), k * (self.tile[1] + self.gutter)


def plan(
    channels: int, height: int, width: int, room: tuple[int, int] = (MAX_PX, MAX_PX), ratio: float = 1.0
) -> Layout:
    """The layout of ``channels`` maps of ``height`` × ``width`` in ``room`` (h, w) device pixels: the column count
    whose tiles come out biggest (a whole zoom up to ``MAX_ZOOM × ratio``, else shrunk), the fewest rows on ties:
    the pane's width filled."""
    room_h, room_w = room
    thin, wide = max(1, round(ratio)), max(2, round(2 * ratio))  # separators: thinner than a zoomed data pixel
    best: tuple[tuple[float, int, int], Layout] | None = None
    for columns in range(1, channels + 1):
        rows = math.ceil(channels / columns)
        for gutter in (wide, thin):
            fit = min(((room_h + gutter) / rows - gutter) / height, ((room_w + gutter) / columns - gutter) / width)
            zoom = min(int(MAX_ZOOM * ratio), math.floor(fit)) if fit >= 1 else fit
            if gutter == thin or zoom >= 3 * ratio:
                break
        if zoom >= 1:
            tile = (height * int(zoom), width * int(zoom))
        else:
            tile = (max(1, int(height * zoom)), max(1, int(width * zoom)))
        key = (float(zoom), -rows, -(rows * columns - channels))  # biggest; then shortest, fewest empty tiles
        if best is None or key > best[0]:
            best = (key, Layout(rows, columns, tile, gutter))
    assert best is not None, "plan needs a channel at least"
    return best[1]


def choose(values: np.ndarray, order: str, max_channels: int) -> np.ndarray:
    """Indices of the channels to draw: the first ``max_channels``, or the top ones by mean activation."""
    if order == "channel":
        return np.arange(min(max_channels, len(values)))
    if order != "mean":
        raise ValueError(f"order must be 'channel' or 'mean', not {order!r}")
    finite = np.isfinite(values)
    counts = finite.sum(axis=(1, 2))
    sums = np.where(finite, values, 0.0).sum(axis=(1, 2), dtype=np.float64)
    # A channel without a finite value has no mean: it goes last rather than first.
    means = np.where(counts > 0, sums / np.maximum(counts, 1), -np.inf)
    return np.argsort(-means, kind="stable")[:max_channels]


def per_channel(maps: np.ndarray, diverging: bool) -> np.ndarray:
    """Each channel scaled on its own: to [0, 1] by min and max, or to [-1, 1] by |max| when ``diverging``."""
    finite = np.isfinite(maps)
    has = finite.any(axis=(1, 2))[:, None, None]
    if diverging:
        bound = np.where(finite, np.abs(maps), 0.0).max(axis=(1, 2), keepdims=True)
        bound = np.where(has & (bound > 0), bound, 1.0)
        return maps / bound
    low = np.where(finite, maps, np.inf).min(axis=(1, 2), keepdims=True)
    high = np.where(finite, maps, -np.inf).max(axis=(1, 2), keepdims=True)
    flat = ~has | (high <= low)  # as finite_range: a constant channel sits mid-scale
    low = np.where(has, low, 0.0) - np.where(flat & has, 0.5, 0.0)
    high = np.where(has, high, 1.0) + np.where(flat & has, 0.5, 0.0)
    return (maps - low) / (high - low)


def _sample(size: int, shown: int) -> np.ndarray:
    """For each of ``shown`` display pixels the source pixel it starts at (nearest; block starts when shrinking)."""
    return (np.arange(shown) * size) // shown


def _resize_mask(mask: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The NaN/Inf mask at display size: a display pixel is marked if any source pixel it stands for is.

    ``reduceat`` over the block starts covers both directions: a repeated start (zooming in) takes that
    one pixel, a gap (shrinking) ORs the whole block, so shrinking never hides a NaN.
    """
    return np.logical_or.reduceat(np.logical_or.reduceat(mask, rows, axis=1), cols, axis=2)


def compose(
    maps: np.ndarray,
    layout: Layout,
    colormap: matplotlib.colors.Colormap,
    limits: tuple[float, float],
    marker: tuple[int, int, int, int],
    boxes: list[tuple[int, int]],
    fill: tuple[int, int, int, int] = WHITE,
) -> np.ndarray:
    """The grid as a ``(H, W, 4)`` uint8 RGBA image.

    ``maps`` ``(C, h, w)`` are coloured on ``limits``; NaN/Inf pixels get ``marker``; tile ``i`` gets a dark
    box of ``boxes[i]`` ``(h, w)`` pixels at its top-left corner for its label; gutters and empty tiles are ``fill``
    (the figure's background: white, or the dark theme's).
    """
    channels, height, width = maps.shape
    tile_h, tile_w = layout.tile
    rows, cols = _sample(height, tile_h), _sample(width, tile_w)
    nonfinite = ~np.isfinite(maps)
    resized = (tile_h, tile_w) != (height, width)
    shown = maps[:, rows][:, :, cols] if resized else maps
    low, high = limits
    with np.errstate(invalid="ignore", over="ignore"):
        rgba = colormap((shown - low) / (high - low), bytes=True)
    marked = None
    if nonfinite.any():
        marked = _resize_mask(nonfinite, rows, cols) if resized else nonfinite
    if marked is not None:
        rgba[marked] = marker
    gutter = layout.gutter
    cells = np.full((layout.rows * layout.columns, tile_h, tile_w, 4), fill, dtype=np.uint8)
    cells[:channels] = rgba
    grid = np.full((layout.rows, tile_h + gutter, layout.columns, tile_w + gutter, 4), fill, dtype=np.uint8)
    grid[:, :tile_h, :, :tile_w] = cells.reshape(layout.rows, layout.columns, tile_h, tile_w, 4).transpose(
        0, 2, 1, 3, 4
    )
    height_px, width_px = layout.size
    image = np.ascontiguousarray(
        grid.reshape(layout.rows * (tile_h + gutter), layout.columns * (tile_w + gutter), 4)[:height_px, :width_px]
    )
    for position, size in enumerate(boxes):
        _shade_box(image, layout.origin(position), size, marked[position] if marked is not None else None)
    return image


def _shade_box(image: np.ndarray, origin: tuple[int, int], size: tuple[int, int], marked: np.ndarray | None) -> None:
    """Darken a label's box at a tile's top-left ``origin``; NaN/Inf pixels under it stay marker-coloured."""
    (y, x), (box_h, box_w) = origin, size
    box = image[y : y + box_h, x : x + box_w, :3]
    shaded = (box * BOX_SHADE).astype(np.uint8)
    if marked is not None:
        shaded = np.where(marked[:box_h, :box_w, None], box, shaded)
    box[...] = shaded
