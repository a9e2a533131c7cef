"""Activation patching: a sweep's layers × positions as a diverging heatmap, positions labelled with tokens."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from ._common import (
    as_float_array,
    empty_figure,
    finite_range,
    fit_title,
    label_width,
    literal,
    name_label,
    nonfinite_note,
    show_image,
)
from .sequences import _check_labels, _room, _step_note, label_tokens
from .theme import ThemeLike, themed


@themed
def patch_sweep_figure(
    result: torch.Tensor | np.ndarray,
    *,
    tokens: Sequence[str] | None = None,
    layers: Sequence[str] | None = None,
    title: str = "",
    theme: ThemeLike = None,
) -> Figure:
    """A patch sweep ``(L, T)`` (``ex.patch_sweep()``) as layers (rows) × positions (columns), diverging around 0.

    ``tokens`` and ``layers`` label the axes; by default the result's own ``.tokens`` and ``.layers``. NaN/Inf cells
    are magenta and counted in the title.
    """
    tokens = getattr(result, "tokens", None) if tokens is None else tokens
    layers = getattr(result, "layers", None) if layers is None else layers
    if result.ndim != 2:
        raise ValueError(f"a patch sweep is (layers, positions), got shape {tuple(result.shape)}")
    if 0 in result.shape:
        return empty_figure(title, result.shape)
    values = as_float_array(result)
    rows, count = values.shape
    _check_labels(tokens, count, "positions (columns)")
    if layers is not None and len(layers) != rows:
        raise ValueError(f"{len(layers)} layer names for {rows} rows: give one name per layer")
    names = [name_label(name) for name in layers] if layers is not None else [str(i) for i in range(rows)]
    heat_w, heat_h = min(9.0, max(2.0, 0.22 * count)), min(9.0, max(1.2, 0.2 * rows))
    left, bottom, top, gap, cbar_w = label_width(names, 7) + 0.25, _room(tokens, count) + 0.25, 0.45, 0.15, 0.12
    fig = Figure(figsize=(left + heat_w + gap + cbar_w + 0.55, bottom + heat_h + top))
    fw, fh = fig.get_size_inches()
    ax = fig.add_axes((left / fw, bottom / fh, heat_w / fw, heat_h / fh))
    cbar_ax = fig.add_axes(((left + heat_w + gap) / fw, bottom / fh, cbar_w / fw, heat_h / fh))
    vmin, vmax = finite_range(values, diverging=True)
    image = show_image(ax, values, "RdBu_r", vmin, vmax, aspect="auto", interpolation="none")
    step = label_tokens(ax, "x", tokens, count, heat_w)
    # As many layer names as the axis holds 7-point text apart: a deep model's every name would overlap.
    every = label_tokens(ax, "y", list(layers) if layers is not None else None, rows, heat_h)
    layer_note = f" [every {every}th layer labelled]" if every > 1 else ""
    ax.set_xlabel("position", fontsize=7)
    ax.set_ylabel("layer", fontsize=7)
    colorbar = fig.colorbar(image, cax=cbar_ax)
    colorbar.ax.tick_params(labelsize=7)
    fit_title(fig, ax, f"{literal(title)}{nonfinite_note(values)}{_step_note(step)}{layer_note}".lstrip())
    return fig
