"""A CAM (or a pixel attribution) laid over the input image."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._common import (
    as_float_array,
    empty_figure,
    fit_title,
    is_empty,
    literal,
    magnitude_note,
    nonfinite_note,
    show_image,
)
from ._grid_fit import MAX_HOVER_VALUES
from .frame import CSS_DPI, current_frame
from .hover import axis, block_mean, describe_cells
from .patches import whole_device_pixels
from .scales import scaled_colorbar
from .theme import ThemeLike, themed

LEFT, RIGHT, BOTTOM, TOP = 6, 70, 6, 42  # CSS px: the colour bar, its ticks and its ×10ⁿ right; two title lines
# above (the input and its overlay, side by side, keep their pictures level unless a title takes three)
MAX_SIDE, MIN_SIDE, PAIR_GAP = 320, 160, 6
"""CSS px: the image's longer side at most and, side by side with its pair, at least; the gap between the two."""


def _display_image(image: torch.Tensor, item: int) -> tuple[np.ndarray, str | None]:
    """One image as ``(H, W)`` grey or ``(H, W, 3)`` RGB in [0, 1] (min–max scaled: inputs are often normalised)."""
    values = as_float_array(image)
    if values.ndim == 4:
        values = values[item]
    if values.ndim == 3:
        values = values[0] if values.shape[0] == 1 else np.moveaxis(values[:3], 0, -1)
    if values.ndim not in (2, 3):
        raise ValueError(f"an image must be (N, C, H, W), (C, H, W) or (H, W), got {tuple(image.shape)}")
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    # NaN/Inf pixels of the picture are drawn at the low end; the CAM layer is where non-finite values matter.
    clean = np.nan_to_num(values, nan=low, posinf=high, neginf=low)
    scaled = np.clip((clean - low) / (high - low or 1.0), 0.0, 1.0)
    return scaled, "gray" if scaled.ndim == 2 else None


def _cam_grid(cam: torch.Tensor, item: int) -> np.ndarray:
    """One item's CAM on its own grid ``(h, w)``: a pixel attribution ``(N, C, H, W)`` becomes max |value|."""
    values = cam.detach()
    values = (values.abs() if values.is_complex() else values).to("cpu", torch.float32)
    if values.dim() == 4:
        values = values[item].abs().amax(dim=0)
    elif values.dim() == 3:
        values = values[item]
    if values.dim() != 2:
        raise ValueError(f"a CAM must be (N, H, W), (H, W) or an input-shaped (N, C, H, W), got {tuple(cam.shape)}")
    return values.numpy()


def _upsampled(grid: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The CAM at the image's ``size`` (bilinear, as Grad-CAM is shown)."""
    if grid.shape == size:
        return grid
    values = torch.from_numpy(np.ascontiguousarray(grid))[None, None]
    return F.interpolate(values, size=size, mode="bilinear", align_corners=False)[0, 0].numpy()


@themed
def cam_overlay_figure(
    image: torch.Tensor,
    cam: torch.Tensor,
    *,
    item: int = 0,
    alpha: float = 0.5,
    cmap: str = "jet",
    title: str | None = None,
    quantity: str | None = None,
    theme: ThemeLike = None,
) -> Figure:
    """The input image with the CAM on top (``alpha`` opaque) and the CAM's colour bar, within the current frame's
    width; a small input is drawn as crisp blocks (a whole zoom in device pixels).

    The title defaults to what an ``ex.gradcam`` result says about itself (method, layer, class). The CAM's own
    grid (a 7×7 Grad-CAM, not its upsampling) is described for the hover over the image, its values named
    ``quantity`` (default: the result's method, else "attribution").
    """
    if title is None:
        title = _describe(cam, item)
    for tensor in (image, cam):
        if is_empty(tensor):
            return empty_figure(title, tensor.shape)
    picture, picture_cmap = _display_image(image, item)
    own = _cam_grid(cam, item)
    heat = _upsampled(own, picture.shape[:2])
    fig, ax, bar_ax = _overlay_layout(picture.shape[:2])
    ax.imshow(picture, cmap=picture_cmap, interpolation=_interpolation(ax, picture.shape[:2]))
    finite = heat[np.isfinite(heat)]
    high = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    layer = show_image(ax, heat, cmap, float(min(finite.min(), 0.0)) if finite.size else 0.0, high, alpha=alpha)
    ax.set_axis_off()
    what = quantity or getattr(cam, "method", None) or "attribution"
    aggregated = _describe_grid(fig, ax, own, picture.shape[:2], what, literal(title))
    note = f" [hover: means of {aggregated}]" if aggregated else ""
    fit_title(fig, ax, f"{literal(title)}{magnitude_note(cam)}{nonfinite_note(heat)}{note}")
    assert bar_ax is not None
    scaled_colorbar(fig.colorbar(layer, cax=bar_ax))
    whole_device_pixels(fig, current_frame().ratio)
    return fig


@themed
def input_image_figure(image: torch.Tensor, *, item: int = 0, title: str = "", theme: ThemeLike = None) -> Figure:
    """The input image as :func:`cam_overlay_figure` draws it under the CAM, same figure and image size (the
    colour bar's place left empty), so the two side by side show the picture at one scale. Its pixels are
    described for the hover (a colour image's as the mean over its channels, said)."""
    picture, picture_cmap = _display_image(image, item)
    fig, ax, _ = _overlay_layout(picture.shape[:2], bar=False)
    ax.imshow(picture, cmap=picture_cmap, interpolation=_interpolation(ax, picture.shape[:2]))
    ax.set_axis_off()
    values = as_float_array(image)
    values = values[item] if values.ndim == 4 else values
    channels = values.shape[0] if values.ndim == 3 else 1
    grey = values.reshape(-1, *values.shape[-2:]).mean(axis=0, dtype=np.float64).astype(np.float32)
    what = "input" if channels == 1 else f"input (mean over {channels} channels)"
    aggregated = _describe_grid(fig, ax, grey, picture.shape[:2], what, literal(title))
    note = f" [hover: means of {aggregated}]" if aggregated else ""
    fit_title(fig, ax, f"{literal(title)}{note}")
    whole_device_pixels(fig, current_frame().ratio)
    return fig


def _describe_grid(fig: Figure, ax: Axes, grid: np.ndarray, size: tuple[int, int], quantity: str, label: str) -> str:
    """Describe ``grid`` (a CAM's own cells, or an image's pixels) over the whole ``size`` (h, w) image on ``ax``,
    block means past the image's CSS pixels or ``MAX_HOVER_VALUES``; returns "r×c" when they are means, else ""."""
    height, width = size
    bbox = ax.get_position()
    fig_w, fig_h = fig.get_size_inches() * CSS_DPI
    room_h, room_w = max(1, int(bbox.height * fig_h)), max(1, int(bbox.width * fig_w))
    rows, cols = grid.shape
    scale = min(1.0, math.sqrt(MAX_HOVER_VALUES / (rows * cols)))
    cells, row_stride, col_stride = block_mean(
        grid, min(room_h, max(1, int(rows * scale))), min(room_w, max(1, int(cols * scale)))
    )
    # A cell of the grid covers height / rows image pixels; blocks of strides cover that many cells.
    cell_h, cell_w = height / rows, width / cols
    extent = (-0.5, -0.5 + cells.shape[1] * col_stride * cell_w, -0.5 + cells.shape[0] * row_stride * cell_h, -0.5)
    describe_cells(
        ax,
        cells,
        row=axis("row", stride=row_stride, count=rows),
        col=axis("column", stride=col_stride, count=cols),
        extent=extent,
        label=label,
        quantity=quantity,
        aggregate="mean" if row_stride * col_stride > 1 else "",
    )
    return f"{row_stride}×{col_stride}" if row_stride * col_stride > 1 else ""


def _interpolation(ax: Axes, size: tuple[int, int]) -> str:
    """Nearest for a whole zoom (each pixel a crisp block), antialiased for a photo shown at any other scale."""
    box = ax.get_position()
    fig_w = ax.get_figure().get_size_inches()[0] * CSS_DPI * current_frame().ratio  # type: ignore[union-attr]
    zoom = box.width * fig_w / size[1]
    return "nearest" if abs(zoom - round(zoom)) < 1e-6 else "antialiased"


def _overlay_layout(size: tuple[int, int], bar: bool = True) -> tuple[Figure, Axes, Axes | None]:
    """A figure within the current frame: the image's axes (a whole zoom of its ``size`` (h, w) in device pixels
    when it fits ``MAX_SIDE``, else shrunk) at one fixed place, the colour bar's beside it (when ``bar``).

    Placed by hand, not by ``tight_layout``, which fits each figure to its own title and bar: the input and its
    overlay would come out at different sizes.
    """
    frame = current_frame()
    ratio = frame.ratio
    height, width = size
    # Two side by side (the input and its overlay) where each keeps MIN_SIDE, else one the pane's width.
    pair = (frame.width - PAIR_GAP) / 2 - LEFT - RIGHT
    side = min(MAX_SIDE, pair if pair >= MIN_SIDE else frame.width - LEFT - RIGHT) * ratio  # device pixels
    zoom = math.floor(side / max(height, width))
    # A whole zoom (crisp blocks) unless it would leave a quarter of the room empty: a 224 px photo in 372 px.
    scale = zoom if zoom >= 1 and zoom * max(height, width) >= 0.75 * side else side / max(height, width)
    img_w, img_h = max(1, round(width * scale)), max(1, round(height * scale))  # device pixels
    left, right, bottom = math.ceil(LEFT * ratio), math.ceil(RIGHT * ratio), math.ceil(BOTTOM * ratio)
    top = math.ceil(TOP * ratio)
    fig_w, fig_h = left + img_w + right, bottom + img_h + top
    fig = Figure(figsize=(fig_w / ratio / CSS_DPI, fig_h / ratio / CSS_DPI), dpi=CSS_DPI)
    ax = fig.add_axes((left / fig_w, bottom / fig_h, img_w / fig_w, img_h / fig_h))
    # The bar's tick labels and its ×10ⁿ need the room right of it.
    bar_box = ((left + img_w + math.ceil(10 * ratio)) / fig_w, bottom / fig_h, math.ceil(10 * ratio) / fig_w)
    return fig, ax, fig.add_axes((*bar_box, img_h / fig_h)) if bar else None


def _describe(cam: torch.Tensor, item: int) -> str:
    parts = [getattr(cam, "method", None) or "attribution"]
    layer = getattr(cam, "layer", None)  # set by the attribution methods on the tensor they return
    if layer:
        parts.append(f"at {layer}")
    classes = getattr(cam, "classes", None)
    if classes:
        parts.append(f"class {classes[item]}")
    return " ".join(parts)
