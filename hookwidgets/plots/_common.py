"""What every figure shares: float32 arrays from any tensor (complex ones as their magnitude), NaN/Inf marking,
a figure for an empty tensor, margins for labels, PNG bytes."""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Sequence

import matplotlib
import matplotlib.colors
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.image import AxesImage
from matplotlib.textpath import text_to_path

from ..core.display import shortened, visible
from .frame import current_frame

NONFINITE_COLOR = "#ff00ff"
"""Magenta: NaN and Inf values, drawn and counted in the title, never a crash."""
MISSING_COLOR = "#d9d9d9"
"""Grey: cells with no value (no record)."""
MAGNITUDE = " (magnitude)"
"""After the title of a figure of complex values: they are drawn as their magnitude."""
EMPTY = "empty (0 elements)"
NO_VALUES = "on the meta device, no values"
"""Why a tensor on the meta device (a model built empty) is drawn as its shape only."""
MIN_FONT = 7.0
"""Points: the smallest text a figure draws, 9.3 px at the widget's 96 dpi (below 9 px is hard to read)."""


def as_float_array(tensor: torch.Tensor | np.ndarray) -> np.ndarray:
    """A float32 NumPy copy on the CPU: float16, bfloat16, integer and bool tensors are cast first, complex
    ones become their magnitude (casting would keep only the real part)."""
    if isinstance(tensor, np.ndarray):
        return (np.abs(tensor) if np.iscomplexobj(tensor) else tensor).astype(np.float32, copy=True)
    tensor = tensor.detach()
    if tensor.is_complex():
        tensor = tensor.abs()
    return tensor.to("cpu", torch.float32).numpy()


def magnitude_note(*tensors: torch.Tensor | np.ndarray) -> str:
    """``MAGNITUDE`` when any of ``tensors`` is complex (drawn as its magnitude), else ``""``."""
    complex_ = any(t.is_complex() if isinstance(t, torch.Tensor) else np.iscomplexobj(t) for t in tensors)
    return MAGNITUDE if complex_ else ""


def is_empty(tensor: torch.Tensor | np.ndarray) -> bool:
    """Whether ``tensor`` holds no element (a zero-size dimension)."""
    return (tensor.numel() if isinstance(tensor, torch.Tensor) else tensor.size) == 0


def empty_figure(title: str, shape: Sequence[int], why: str = EMPTY) -> Figure:
    """A small figure that says there is nothing to draw: its title is ``title [empty (0 elements): shape (…)]``
    (``why``: another reason, such as ``NO_VALUES``)."""
    fig = Figure(figsize=(3.6, 0.5))
    ax = fig.add_axes((0.02, 0.02, 0.96, 0.02))
    ax.set_axis_off()
    fit_title(fig, ax, f"{literal(title)} [{why}: shape {tuple(shape)}]".lstrip())
    return fig


def literal(text: str) -> str:
    """``text`` as matplotlib must draw a model's string: as it is, never as mathtext (``$…$``), with the
    characters that do not print (line breaks, bidi controls, zero-width spaces) escaped as ``\\u202e``."""
    return visible(text).replace("$", r"\$")


def name_label(name: str) -> str:
    """A model's name (a module path, a parameter, a label) as a figure draws it: ``literal``, and cut to 200
    characters with "…" (matplotlib takes seconds to lay out 100,000)."""
    return literal(shortened(str(name)))


def nonfinite_note(values: np.ndarray) -> str:
    """`` [2 NaN, 1 Inf, drawn magenta]`` for a title, or ``""`` when every value is finite."""
    nan, inf = int(np.isnan(values).sum()), int(np.isinf(values).sum())
    text = ", ".join(p for p in (f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else "") if p)
    return f" [{text}, drawn magenta]" if text else ""


CONSTANT_SPREAD = 1e-5
"""Values whose spread is under this fraction of their magnitude (float32 roundings, a norm layer's eps) are drawn
as one value: a map of such differences shows nothing but noise."""


def finite_range(values: np.ndarray, diverging: bool = False) -> tuple[float, float]:
    """``(vmin, vmax)`` of the finite values (symmetric around zero when ``diverging``); never empty."""
    finite = values[np.isfinite(values)]
    if diverging:
        bound = float(np.abs(finite).max()) if finite.size else 0.0
        return -(bound or 1.0), bound or 1.0
    if not finite.size:
        return 0.0, 1.0
    low, high = float(finite.min()), float(finite.max())
    scale = max(abs(low), abs(high))
    if high - low <= CONSTANT_SPREAD * scale:
        # One value up to rounding (a LayerNorm output's per-token norms): one colour, not noise spread over
        # the whole colour map under a "1e-7 + 5.65663" offset.
        half = 0.05 * scale or 0.5
        return low - half, high + half
    return low, high


def show_image(
    ax: Axes, values: np.ndarray, cmap: str, vmin: float, vmax: float, nonfinite: np.ndarray | None = None, **kwargs
) -> AxesImage:
    """``imshow`` with NaN/Inf painted magenta over the data, so they never pass for a value on the scale.

    ``nonfinite`` (default: where ``values`` is not finite) says which pixels to paint, so that
    NaN used as a transparent gutter between tiles is not painted.
    """
    colormap = matplotlib.colormaps[cmap].with_extremes(bad=(0, 0, 0, 0))
    image = ax.imshow(np.ma.masked_invalid(values), cmap=colormap, vmin=vmin, vmax=vmax, **kwargs)
    marked = ~np.isfinite(values) if nonfinite is None else nonfinite
    if marked.any():
        marker = matplotlib.colors.ListedColormap([NONFINITE_COLOR]).with_extremes(bad=(0, 0, 0, 0))
        kwargs["alpha"] = 1.0  # opaque even on a translucent overlay: a blended magenta could pass for data
        ax.imshow(np.ma.masked_where(~marked, np.ones(values.shape, np.float32)), cmap=marker, **kwargs)
    return image


def label_width(labels: Sequence[str], size: float) -> float:
    """Inches the widest of ``labels`` takes at ``size`` points, from the longest few (mathtext measured as such)."""
    font = FontProperties(size=size)
    longest = sorted((t for t in labels if t), key=len)[-8:]  # by characters: the widest in ink is among them
    # Text drawn at screen resolutions comes out up to ~5% wider than its outline (hinting): 10% more.
    widths = [text_to_path.get_text_width_height_descent(t, font, ismath=_is_math(t))[0] for t in longest]
    return 1.1 * max(widths, default=0.0) / 72


def _is_math(text: str) -> bool:
    """Whether matplotlib draws ``text`` as mathtext: an even, non-zero number of unescaped dollars."""
    dollars = text.count("$") - text.count(r"\$")
    return dollars > 0 and dollars % 2 == 0


def set_margins(fig: Figure, *, left: float, right: float, bottom: float, top: float) -> None:
    """Place the subplots ``left``/``right``/``bottom``/``top`` inches from the figure's edges (left at most 60%)."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=min(left / width, 0.6), right=1 - right / width, bottom=bottom / height, top=1 - top / height
    )


def fit_title(fig: Figure, ax: Axes, text: str, size: float = 9, above: float = 0) -> None:
    """Title ``ax`` with ``text``, in a smaller font (down to ``MIN_FONT``) and then on more lines (up to 3) where it
    would leave the figure; ``above``: points kept free between the axes and the title (marks drawn over the axes).

    Call it once the axes are placed: the title is centred over the axes, not over the figure.
    """
    if not text:
        ax.set_title("")
        return
    width = fig.get_size_inches()[0]
    box = ax.get_position()
    centre = (box.x0 + box.x1) / 2 * width
    wrapped, fontsize = wrap_title(text, 2 * min(centre, width - centre) - 0.1, size)
    ax.set_title("\n".join(wrapped), fontsize=fontsize, pad=matplotlib.rcParams["axes.titlepad"] + above)
    height = fig.get_size_inches()[1]
    needed_top = len(wrapped) * fontsize * 1.25 / 72 + 0.12 + above / 72  # the lines, and the title's padding
    extra = needed_top - (1 - box.y1) * height
    if extra > 0:  # a taller figure, everything kept where it was from the bottom: the title gets the room
        # The boxes as placed, read before resizing: an image's axes (equal aspect) read after would shrink to fit.
        boxes = [axes.get_position(original=True).bounds for axes in fig.axes]
        fig.set_size_inches(width, height + extra)
        scale = height / (height + extra)
        for axes, (x0, y0, w, h) in zip(fig.axes, boxes, strict=True):
            axes.set_position((x0, y0 * scale, w, h * scale))


def wrap_title(text: str, room: float, size: float = 9) -> tuple[list[str], float]:
    """``text`` as up to 3 lines and the font size (``size`` down to ``MIN_FONT``) that fit ``room`` inches."""
    for lines in (1, 2, 3):
        wrapped = textwrap.wrap(text, math.ceil(len(text) / lines), break_long_words=False) or [text]
        needed = label_width(wrapped, size)
        fitting = size * room / needed if needed else size
        if fitting >= MIN_FONT or lines == 3:
            break
    return wrapped, max(MIN_FONT, min(size, fitting))


def figure_png(fig: Figure, dpi: float | None = None) -> bytes:
    """The figure rendered as PNG bytes at ``dpi`` (default: the current frame's, 96 × its pixel ratio), with a fast
    zlib level: the bytes go to a browser, not to an archive."""
    buffer = io.BytesIO()
    # Level 1 encodes a 64-channel grid about 3× faster than the default 6, for files ~10% larger.
    fig.savefig(buffer, format="png", dpi=dpi or current_frame().dpi, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()
