"""The inspector's "attribution here": the methods that fit the selected module, and a method's result for it.

Images get maps over the input (CAMs at layers with a spatial grid, pixel methods anywhere); token ids get one
score per input token, drawn in the page as coloured tokens; an attention module also offers the rollouts.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

import torch

from ..core.attribution import ROLLOUT_METHODS, check_method, method_name
from ..core.display import display_name, quoted
from ..core.explorer import Explorer
from ..core.model.inputs import token_ids
from .attribution_methods import LAYER_METHODS, image_of, methods_note, offered_methods
from .message_values import position_choice, score_choice
from .protocol import Attribution, Hover, TokenScore

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EMPTY: Attribution = {
    "layer": None,
    "method": None,
    "target": None,
    "png": None,
    "hover": None,
    "input_png": None,
    "input_hover": None,
    "tokens": None,
    "error": "",
    "caption": "",
    "note": "",
    "edits": "",
    "of_layer": False,
}


class AttributionImages(TypedDict):
    """The images of an ``Attribution`` payload, drawn again in another theme without running the method again."""

    png: bytes
    hover: Hover
    input_png: bytes
    input_hover: Hover


def attribution_payload(explorer: Explorer, layer: str, method: str, target: Any, position: Any = None) -> Attribution:
    """The ``attribution`` traitlet: ``method``'s result for ``target`` at ``layer`` and what to draw it with."""
    return attribution_and_redraw(explorer, layer, method, target, position)[0]


def attribution_and_redraw(
    explorer: Explorer, layer: str, method: str, target: Any, position: Any = None
) -> tuple[Attribution, Callable[[], AttributionImages] | None]:
    """The ``attribution`` traitlet, and what draws its images again (in another theme) without running the
    method again: None for token scores, which the page colours itself.

    CAMs and a ViT's rollout are drawn over the input image, pixel methods as gradient maps, and token scores go
    to the page as ``tokens`` (text and score, the first item's) to colour. Errors (a method that does not fit, a
    class out of range) come back as text; warnings of the run (a blank map, a detached hook) as ``note``.
    """
    method = check_method(method)
    offered = offered_methods(explorer, layer)
    # A CAM at an image model's layer without a grid: the engine's own error names the layers that have one.
    engine_says = method in LAYER_METHODS and image_of(explorer.example_inputs) is not None
    if method not in offered and not engine_says:
        raise ValueError(_not_offered(explorer, layer, method, offered))
    chosen = score_choice(target, "attribution target")
    where = position_choice(position)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = explorer.attribute(
            None, chosen, method=method, layer=layer if method in LAYER_METHODS else None, position=where
        )
    note = "\n\n".join(dict.fromkeys(str(w.message) for w in caught))  # each once, in order
    used = display_name(getattr(result, "layer", None) or layer)
    explained = _explained(explorer, result)
    name = method_name(method)
    caption = f"{name} of {explained} " if explained else f"{name} "
    if method in ROLLOUT_METHODS:
        caption += f"over {used}"
    elif result.dim() == 4 and method not in LAYER_METHODS:  # a pixel map explains the input, whatever is selected
        caption += "over the input"
    else:
        caption += f"at {used}"
    payload: Attribution = {**EMPTY, "layer": layer, "method": method, "target": target, "caption": caption}
    payload["of_layer"] = method in LAYER_METHODS  # the others explain the input whatever module is selected
    payload["note"] = note
    payload["edits"] = getattr(result, "edits", "")  # with the user's edits, said above the result
    if result.dim() == 2:  # one score per token
        payload["tokens"] = token_scores(result[0], _labels(explorer, result))
        return payload, None
    image = image_of(explorer.example_inputs)
    if image is None:  # no method offered without an image gives a map (N, H, W) or an input-shaped one
        raise ValueError(
            f"{method} gave a map of shape {list(result.shape)}, but the example inputs hold no image to draw it over"
        )
    draw = functools.partial(_images, image, result, caption)
    payload = {**payload, **draw()}
    return payload, draw


def _images(image: torch.Tensor, result: torch.Tensor, caption: str) -> AttributionImages:
    """The attribution drawn over the input (or as a gradient map) and the input beside it, as PNG bytes and
    what each tells under the mouse."""
    from ..plots import cam_overlay_figure, gradient_map_figure  # matplotlib only when drawing
    from ..plots.hover import figure_image

    if result.dim() == 3:  # a CAM (N, H, W) in [0, 1], or a ViT rollout's patch grid (N, h, w), raw
        figure = cam_overlay_figure(image, result, title=caption)
    else:  # pixel attributions are input-shaped and signed
        figure = gradient_map_figure(result[0], title=caption)
    png, hover = figure_image(figure)
    input_png, input_hover = figure_image(input_figure(image))
    return {"png": png, "hover": hover, "input_png": input_png, "input_hover": input_hover}


def token_scores(scores: torch.Tensor, labels: list[str]) -> list[TokenScore]:
    """Each token's label and score, as the page colours them (NaN and Inf as text, so JSON can carry them)."""
    values = scores.detach().float().cpu().tolist()
    pairs = zip(labels, values, strict=True)
    return [{"text": label, "score": v if math.isfinite(v) else str(v)} for label, v in pairs]


def input_figure(inputs: torch.Tensor, item: int = 0) -> Figure:
    """The input image the attribution explains, drawn as the overlay draws it (min–max scaled), to sit beside it."""
    from ..plots.overlay import input_image_figure  # matplotlib only when drawing

    return input_image_figure(inputs, item=item, title=f"input (item {item})")


def _explained(explorer: Explorer, result: torch.Tensor) -> str:
    """What the first item's scores explain, in the model's words (class 3, token 17 "cat", label 2), else the
    score in words ("" for a rollout, which explains no score)."""
    classes = [int(c) for c in getattr(result, "classes", None) or []]
    if not classes:
        return getattr(result, "target", "") or ""
    words = explorer.probe_output.get("words")
    if words != "tokens":
        return f"{'label' if words == 'labels' else 'class'} {classes[0]}"
    names = explorer.sequences.id_names(classes[:1])
    return f"token {classes[0]}" + (f" {names[0]!r}" if names else "")


def _labels(explorer: Explorer, result: torch.Tensor) -> list[str]:
    """The first item's token labels: the result's own, else the ids as ``#id``."""
    labels = getattr(result, "tokens", None)
    if labels and len(labels[0]) == result.shape[1]:
        return [str(label) for label in labels[0]]
    inputs = explorer.example_inputs
    ids = token_ids(inputs) if inputs is not None else None
    if ids is not None and ids.shape[1] == result.shape[1]:
        return [f"#{i}" for i in ids[0].tolist()]
    return [str(t) for t in range(result.shape[1])]


def _not_offered(explorer: Explorer, layer: str, method: str, offered: list[str]) -> str:
    """Why ``method`` does not fit ``layer``, and what does."""
    if method in ROLLOUT_METHODS:
        why = "the rollouts are offered on an attention module: select one"
    elif method in LAYER_METHODS:
        why = "a CAM needs an image input and a layer whose output is a spatial grid (a conv map, a ViT's patch tokens)"
    elif method == "integrated_gradients":
        why = "integrated gradients attributes input tokens: it needs token ids (N, T) as example inputs"
    else:
        why = methods_note(explorer, layer, offered)
    here = f"the methods here are {', '.join(offered)}" if offered else "no attribution method fits here"
    return f"{method} does not fit {quoted(layer)}: {why}; {here}"
