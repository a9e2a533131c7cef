"""A CAM (or a pixel attribution) laid over the input image."""

from __future__ import annotations

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
from .theme import ThemeLike, themed


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


def _cam_map(cam: torch.Tensor, item: int, size: tuple[int, int]) -> np.ndarray:
    """One item's map ``(H, W)`` at the image's size: a pixel attribution ``(N, C, H, W)`` becomes max |value|."""
    values = cam.detach()
    values = (values.abs() if values.is_complex() else values).to("cpu", torch.float32)
    if values.dim() == 4:
        values = values[item].abs().amax(dim=0)
    elif values.dim() == 3:
        values = values[item]
    if values.dim() != 2:
        raise ValueError(f"a CAM must be (N, H, W), (H, W) or an input-shaped (N, C, H, W), got {tuple(cam.shape)}")
    if tuple(values.shape) != size:
        values = F.interpolate(values[None, None], size=size, mode="bilinear", align_corners=False)[0, 0]
    return values.numpy()


@themed
def cam_overlay_figure(
    image: torch.Tensor,
    cam: torch.Tensor,
    *,
    item: int = 0,
    alpha: float = 0.5,
    cmap: str = "jet",
    title: str | None = None,
    theme: ThemeLike = None,
) -> Figure:
    """The input image with the CAM on top (``alpha`` opaque) and the CAM's colour bar.

    The title defaults to what an ``ex.gradcam`` result says about itself (method, layer, class).
    """
    if title is None:
        title = _describe(cam, item)
    for tensor in (image, cam):
        if is_empty(tensor):
            return empty_figure(title, tensor.shape)
    picture, picture_cmap = _display_image(image, item)
    heat = _cam_map(cam, item, picture.shape[:2])
    fig, ax, bar_ax = _overlay_layout()
    ax.imshow(picture, cmap=picture_cmap, interpolation="nearest")
    finite = heat[np.isfinite(heat)]
    high = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    layer = show_image(ax, heat, cmap, float(min(finite.min(), 0.0)) if finite.size else 0.0, high, alpha=alpha)
    ax.set_axis_off()
    fit_title(fig, ax, f"{literal(title)}{magnitude_note(cam)}{nonfinite_note(heat)}")
    fig.colorbar(layer, cax=bar_ax).ax.tick_params(labelsize=7)
    return fig


@themed
def input_image_figure(image: torch.Tensor, *, item: int = 0, title: str = "", theme: ThemeLike = None) -> Figure:
    """The input image as :func:`cam_overlay_figure` draws it under the CAM, same figure and image size (the
    colour bar's place left empty), so the two side by side show the picture at one scale."""
    picture, picture_cmap = _display_image(image, item)
    fig, ax, _ = _overlay_layout(bar=False)
    ax.imshow(picture, cmap=picture_cmap, interpolation="nearest")
    ax.set_axis_off()
    fit_title(fig, ax, literal(title))
    return fig


def _overlay_layout(bar: bool = True) -> tuple[Figure, Axes, Axes | None]:
    """A 2.7 × 2.5 inch figure (259 × 240 px: the input and its overlay side by side fit a 540 px pane): the
    image's axes at one fixed place, the colour bar's beside it (when ``bar``).

    Placed by hand, not by ``tight_layout``, which fits each figure to its own title and bar: the input and its
    overlay would come out at different sizes.
    """
    fig = Figure(figsize=(2.7, 2.5))
    ax = fig.add_axes((0.03, 0.03, 0.74, 0.82))
    # The bar's tick labels (up to "0.000", ~0.3 in at 7 pt) need the room right of it.
    return fig, ax, fig.add_axes((0.8, 0.13, 0.035, 0.62)) if bar else None


def _describe(cam: torch.Tensor, item: int) -> str:
    parts = [getattr(cam, "method", None) or "attribution"]
    layer = getattr(cam, "layer", None)  # set by the attribution methods on the tensor they return
    if layer:
        parts.append(f"at {layer}")
    classes = getattr(cam, "classes", None)
    if classes:
        parts.append(f"class {classes[item]}")
    return " ".join(parts)
