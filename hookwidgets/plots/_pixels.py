"""An image of pre-coloured pixels that is copied onto the canvas, not resampled, when it lands there 1:1."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.image import AxesImage
from matplotlib.transforms import IdentityTransform

EXACT = 1e-6


class PixelImage(AxesImage):
    """An ``AxesImage`` of uint8 RGBA pixels that skips resampling when each pixel is one canvas pixel.

    Resampling a 455×455 image at scale 1 still converts it to float, premultiplies, resamples and
    converts back: a quarter of the time of a 64-channel grid. At any other size (another dpi, a
    zoomed axes, a clip, alpha) it draws exactly as ``AxesImage`` does.
    """

    def make_image(self, renderer, magnification=1.0, unsampled=False):
        corner = None if unsampled else self._one_to_one(magnification)
        if corner is None:
            return super().make_image(renderer, magnification, unsampled)
        return self._A[::-1], corner[0], corner[1], IdentityTransform()

    def _one_to_one(self, magnification: float) -> tuple[int, int] | None:
        """The integer lower-left canvas pixel of the image when it can be copied as is, else None."""
        pixels = self._A
        if (
            magnification != 1.0
            or not isinstance(pixels, np.ndarray)
            or pixels.dtype != np.uint8
            or pixels.ndim != 3
            or pixels.shape[2] != 4
            or self.origin != "upper"
            or self.get_alpha() is not None
            or self.get_clip_path() is not None
        ):
            return None
        left, right, bottom, top = self.get_extent()  # row 0 of the array is at ``top`` (origin "upper")
        (x0, y_top), (x1, y0) = self.get_transform().transform([[left, top], [right, bottom]])
        placed = (
            abs(x1 - x0 - pixels.shape[1]) < EXACT  # as wide as the array, and not mirrored
            and abs(y_top - y0 - pixels.shape[0]) < EXACT  # as tall, row 0 on top
            and abs(x0 - round(x0)) < EXACT
            and abs(y0 - round(y0)) < EXACT
        )
        clip = self.get_clip_box() if self.get_clip_on() else None
        inside = clip is None or (
            clip.xmin - EXACT <= x0
            and x1 <= clip.xmax + EXACT
            and clip.ymin - EXACT <= y0
            and y_top <= clip.ymax + EXACT
        )
        return (round(x0), round(y0)) if placed and inside else None


def show_pixels(ax: Axes, rgba: np.ndarray) -> PixelImage:
    """``ax.imshow(rgba, interpolation="none")`` as a :class:`PixelImage`."""
    image = PixelImage(ax, interpolation="none", origin="upper")
    image.set_data(rgba)
    ax.add_image(image)
    image.set_extent(image.get_extent())  # data limits and view, as imshow sets them
    ax.set_aspect("equal")
    return image
