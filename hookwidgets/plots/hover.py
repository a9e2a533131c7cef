"""What a figure tells under the mouse: its cell grids and line charts, described in the PNG's CSS pixels.

A figure function calls :func:`describe_cells` for each heatmap it draws (a tile of a grid, a head, the summary)
and :func:`describe_lines` for each chart; :func:`figure_image` renders the PNG and turns those into a
:class:`Hover` once the figure is drawn (the axes are where they end up). The page reads the value under the
mouse from it without asking the kernel. Values travel as float32 bytes, downsampled by the figure
(:func:`block_mean`) when it draws fewer cells than the tensor has.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .frame import CSS_DPI, current_frame

if TYPE_CHECKING:  # the shapes the page reads are declared once, with the widget's protocol
    from ..widget.protocol import Hover, HoverAxis, Region


@dataclass
class _Cells:
    ax: Axes
    values: np.ndarray
    extent: tuple[float, float, float, float]
    row: HoverAxis
    col: HoverAxis
    label: str
    quantity: str
    aggregate: str


@dataclass
class _Lines:
    ax: Axes
    x: np.ndarray
    series: dict[str, np.ndarray]
    x_name: str
    label: str


_described: weakref.WeakKeyDictionary[Figure, list[_Cells | _Lines]] = weakref.WeakKeyDictionary()


def axis(
    name: str, labels: Sequence[str] | None = None, *, start: int = 0, stride: int = 1, count: int | None = None
) -> HoverAxis:
    """A :class:`HoverAxis`; ``count`` defaults to what ``labels`` (or nothing else) says."""
    shown = list(labels) if labels is not None else None
    return {
        "name": name,
        "labels": shown,
        "start": int(start),
        "stride": max(1, int(stride)),
        "count": int(count if count is not None else (len(shown) * max(1, stride) if shown is not None else 0)),
    }


def describe_cells(
    ax: Axes,
    values: np.ndarray,
    *,
    row: HoverAxis,
    col: HoverAxis,
    extent: tuple[float, float, float, float] | None = None,
    label: str = "",
    quantity: str = "value",
    aggregate: str = "",
) -> None:
    """Say that ``ax`` shows ``values`` (rows × cols) as cells within ``extent`` = (left, right, bottom, top) in data
    coordinates, as ``imshow``'s (default: an ``imshow`` of ``values`` alone, whose extent is its pixel centres ± ½).
    """
    grid = np.asarray(values, dtype=np.float32)
    if grid.ndim != 2:
        raise ValueError(f"cells are (rows, cols), got shape {grid.shape}")
    rows, cols = grid.shape
    box = extent if extent is not None else (-0.5, cols - 0.5, rows - 0.5, -0.5)
    for part in (row, col):  # a count left at 0 means as many as drawn
        if not part["count"]:
            part["count"] = (rows if part is row else cols) * part["stride"]
    _described.setdefault(ax.figure, []).append(_Cells(ax, grid, box, row, col, label, quantity, aggregate))  # type: ignore[arg-type]


def describe_lines(
    ax: Axes,
    x: Sequence[float] | np.ndarray,
    series: Mapping[str, Sequence[float] | np.ndarray],
    *,
    x_name: str = "step",
    label: str = "",
) -> None:
    """Say that ``ax`` draws each of ``series`` (name → one value per ``x``) against ``x`` on a linear x axis."""
    xs = np.asarray(x, dtype=np.float64)
    drawn = {name: np.asarray(v, dtype=np.float32) for name, v in series.items()}
    for name, v in drawn.items():
        if v.shape != xs.shape:
            raise ValueError(f"series {name!r} has {v.shape} values for {xs.shape} x values")
    _described.setdefault(ax.figure, []).append(_Lines(ax, xs, drawn, x_name, label))  # type: ignore[arg-type]


def block_mean(values: np.ndarray, max_rows: int, max_cols: int) -> tuple[np.ndarray, int, int]:
    """``values`` (rows × cols) averaged over blocks so that at most ``max_rows`` × ``max_cols`` remain; returns
    (the blocks, row stride, column stride). A block holding NaN is NaN, else one holding ±Inf is that Inf: an
    average would hide what the figure marks."""
    rows, cols = values.shape
    row_stride, col_stride = -(-rows // max(1, max_rows)), -(-cols // max(1, max_cols))
    if row_stride == 1 and col_stride == 1:
        return values.astype(np.float32, copy=False), 1, 1
    out_rows, out_cols = -(-rows // row_stride), -(-cols // col_stride)
    padded = np.zeros((out_rows * row_stride, out_cols * col_stride), np.float64)
    present = np.zeros(padded.shape, bool)
    padded[:rows, :cols], present[:rows, :cols] = values, True
    blocks = padded.reshape(out_rows, row_stride, out_cols, col_stride)
    inside = present.reshape(blocks.shape)
    finite = np.isfinite(blocks) & inside
    means = np.where(finite, blocks, 0.0).sum(axis=(1, 3)) / np.maximum(finite.sum(axis=(1, 3)), 1)
    means = np.where((np.isposinf(blocks) & inside).any(axis=(1, 3)), np.inf, means)
    means = np.where((np.isneginf(blocks) & inside).any(axis=(1, 3)), -np.inf, means)
    means = np.where((np.isnan(blocks) & inside).any(axis=(1, 3)), np.nan, means)
    return means.astype(np.float32), row_stride, col_stride


def figure_image(fig: Figure) -> tuple[bytes, Hover]:
    """The figure as PNG bytes at the current frame's ratio, and its :class:`Hover` (the cells and lines described)."""
    from ._common import figure_png

    frame = current_frame()
    png = figure_png(fig)  # draws: the axes and their aspect are final now
    width_in, height_in = fig.get_size_inches()
    width, height = float(width_in * CSS_DPI), float(height_in * CSS_DPI)
    regions: list[Region] = []
    pixelated = False
    for part in _described.pop(fig, []):
        if isinstance(part, _Cells):
            left, right, bottom, top = part.extent
            (x0, y0), (x1, y1) = _css(fig, part.ax, [(left, top), (right, bottom)], width, height)
            rows, cols = part.values.shape
            pixelated = pixelated or (abs(x1 - x0) / max(cols, 1) * frame.ratio >= 2)
            regions.append(
                {
                    "type": "cells",
                    "box": [x0, y0, x1, y1],
                    "rows": rows,
                    "cols": cols,
                    "values": part.values.astype("<f4").tobytes(),
                    "row": part.row,
                    "col": part.col,
                    "label": part.label,
                    "quantity": part.quantity,
                    "aggregate": part.aggregate,
                }
            )
        else:
            box = part.ax.get_position()  # figure fractions, origin bottom-left
            lo, hi = part.ax.get_xlim()
            regions.append(
                {
                    "type": "lines",
                    "box": [
                        float(v) for v in (box.x0 * width, (1 - box.y1) * height, box.x1 * width, (1 - box.y0) * height)
                    ],
                    "x": part.x.astype("<f8").tobytes(),  # bytes, as the values: a long history is no list of floats
                    "x_name": part.x_name,
                    "x_limits": [float(lo), float(hi)],
                    "series": [{"name": n, "values": v.astype("<f4").tobytes()} for n, v in part.series.items()],
                    "label": part.label,
                }
            )
    return png, {"ratio": frame.ratio, "width": width, "height": height, "pixelated": pixelated, "regions": regions}


def _css(
    fig: Figure, ax: Axes, points: list[tuple[float, float]], width: float, height: float
) -> list[tuple[float, float]]:
    """Data points of ``ax`` as CSS pixels of the image, origin top-left."""
    display = ax.transData.transform(np.asarray(points, dtype=np.float64))
    bbox = fig.bbox
    return [(float(x / bbox.width * width), float((1 - y / bbox.height) * height)) for x, y in display]
