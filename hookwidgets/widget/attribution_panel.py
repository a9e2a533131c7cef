"""The inspector's "attribution here": a method's map for the selected layer, over the example input."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from matplotlib.figure import Figure

from ..core.attribution import CAM_METHODS, METHODS
from ..core.display import display_name
from ..core.explorer import Explorer
from ..plots import cam_overlay_figure, figure_png, gradient_map_figure
from ..plots.overlay import _display_image
from .protocol import Attribution
from .state import score_choice

EMPTY: Attribution = {
    "layer": None,
    "method": None,
    "target": None,
    "png": None,
    "input_png": None,
    "error": "",
    "caption": "",
    "note": "",
}


def input_figure(inputs: torch.Tensor, item: int = 0) -> Figure:
    """The input image the attribution explains, drawn as the overlay draws it (min–max scaled), to sit beside it."""
    picture, cmap = _display_image(inputs, item)
    fig = Figure(figsize=(3.0, 3.3))
    ax = fig.add_subplot()
    ax.imshow(picture, cmap=cmap, interpolation="nearest")
    ax.set_axis_off()
    ax.set_title(f"input (item {item})", fontsize=9)
    fig.tight_layout()
    return fig


def attribution_payload(explorer: Explorer, layer: str, method: str, target: Any) -> Attribution:
    """The ``attribution`` traitlet: ``method``'s map of ``target`` at ``layer`` and the input to draw beside it.

    CAMs are drawn over the input image; pixel methods (saliency, guided backprop, …) as gradient maps.
    Errors (a layer without spatial output, a class out of range) come back as text; warnings of the run (a
    blank map, a hook detached after an in-place collision) as ``note``, shown beside the map.
    """
    if method not in METHODS:
        raise ValueError(f"unknown attribution method {method!r}; choose one of {', '.join(METHODS)}")
    if not isinstance(explorer.example_inputs, torch.Tensor):
        raise ValueError("attribution here needs example inputs that are one image tensor (N, C, H, W)")
    chosen = score_choice(target, "attribution target")
    inputs = explorer.example_copy()  # the model may change its input in place
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = explorer.attribute(inputs, chosen, method=method, layer=layer if method in CAM_METHODS else None)
    note = "\n\n".join(dict.fromkeys(str(w.message) for w in caught))  # each once, in order
    classes = [int(c) for c in getattr(result, "classes", []) or []]
    used = getattr(result, "layer", None) or layer
    what = f"class {classes[0]}" if classes else result.target  # the first item's, drawn; else the loss or callable
    caption = f"{method} of {what} at {display_name(used or '(input)')}"
    if result.dim() == 3:  # a CAM (N, H, W) in [0, 1]
        figure = cam_overlay_figure(inputs, result, title=caption)
    else:  # pixel attributions are input-shaped and signed
        figure = gradient_map_figure(result[0], title=caption)
    return {
        "layer": used,
        "method": method,
        "target": target,
        "png": figure_png(figure),
        "input_png": figure_png(input_figure(inputs)),
        "error": "",
        "caption": caption,
        "note": note,
    }
