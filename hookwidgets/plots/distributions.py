"""Histograms of activations and gradients, several tensors on shared bins."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from matplotlib.figure import Figure

from ._common import as_float_array, empty_figure, fit_title, is_empty, literal, magnitude_note
from .theme import ThemeLike, themed


@themed
def histogram_figure(
    tensors: torch.Tensor | Mapping[str, torch.Tensor],
    *,
    title: str = "",
    bins: int = 60,
    log: bool = False,
    theme: ThemeLike = None,
) -> Figure:
    """One histogram per tensor (e.g. ``{"activation": a, "gradient": g}``) on shared bins; ``log`` counts.

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
    fig = Figure(figsize=(5.2, 3.0))
    ax = fig.add_subplot()
    for (name, values), kept in zip(arrays.items(), finite, strict=True):
        counts, _ = np.histogram(kept, bins=edges)
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
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    fit_title(fig, ax, f"{literal(title)}{magnitude}")
    return fig
