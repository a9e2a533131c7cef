"""Histograms of activations and gradients, several tensors on shared bins."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from matplotlib.figure import Figure

from ._common import as_float_array, empty_figure, fit_title, is_empty, literal, magnitude_note
from .frame import CSS_DPI, current_frame
from .hover import describe_lines
from .theme import ThemeLike, themed

WIDTH = 6.0
"""Inches: a histogram is as wide as the frame up to this (wider spreads a few bins thin)."""


@themed
def histogram_figure(
    tensors: torch.Tensor | Mapping[str, torch.Tensor],
    *,
    title: str = "",
    bins: int = 60,
    log: bool = False,
    theme: ThemeLike = None,
) -> Figure:
    """One histogram per tensor (e.g. ``{"activation": a, "gradient": g}``) on shared bins, within the frame's
    width; ``log`` counts. Hover reads each bin's count at its centre.

    NaN and Inf are left out of the bins and counted in the legend. Complex values are binned by magnitude.
    """
    series = {"values": tensors} if isinstance(tensors, torch.Tensor) else dict(tensors)
    if series and all(is_empty(t) for t in series.values()):
        return empty_figure(title, next(iter(series.values())).shape)
    arrays = {name: as_float_array(t).reshape(-1) for name, t in series.items()}
    finite = [a[np.isfinite(a)] for a in arrays.values()]
    pooled = np.concatenate(finite) if finite else np.zeros(0, np.float32)
    low, high = (float(pooled.min()), float(pooled.max())) if pooled.size else (0.0, 1.0)
    edges = np.linspace(low, high if high > low else low + 1.0, bins + 1)
    width = min(current_frame().inches, WIDTH)
    below = 0.15 * len(arrays) + 0.1  # the legend, a line a tensor, under the axis: it never hides a bin
    height = 3.0 + below
    fig = Figure(figsize=(width, height), dpi=CSS_DPI)
    ax = fig.add_axes((0.6 / width, (0.45 + below) / height, (width - 0.75) / width, 2.1 / height))
    counted: dict[str, np.ndarray] = {}
    for (name, values), kept in zip(arrays.items(), finite, strict=True):
        counts, _ = np.histogram(kept, bins=edges)
        counted[name] = counts
        nonfinite = values.size - kept.size
        label = f"{literal(name)}{magnitude_note(series[name])} (n={values.size:,}"
        label += f", {nonfinite} NaN/Inf not shown)" if nonfinite else ")"
        ax.stairs(counts, edges, fill=len(arrays) == 1, alpha=0.55 if len(arrays) == 1 else 1.0, label=label)
    if log:
        ax.set_yscale("log")
    magnitude = magnitude_note(*series.values())
    ax.set_xlabel("magnitude" if all(magnitude_note(t) for t in series.values()) else "value", fontsize=8)
    ax.set_ylabel("count" + (" (log)" if log else ""), fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(-0.1, -0.4 / 2.1), borderaxespad=0)
    describe_lines(ax, (edges[:-1] + edges[1:]) / 2, counted, x_name="bin centre")
    fit_title(fig, ax, f"{literal(title)}{magnitude}")
    return fig
