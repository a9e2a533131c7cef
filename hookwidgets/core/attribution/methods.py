"""``attribute``: one run of any attribution method on a model, leaving the model as found."""

from __future__ import annotations

import contextlib
import difflib
import logging
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import torch
from torch import nn
from torch.autograd.graph import get_gradient_edge

from ..._warnings import BlankMapWarning
from ..display import display_name, quoted
from ..graph.stops import Stops, check_path
from ..model.inputs import Inputs, Target, call_model, token_ids
from ..model.preserved_state import preserved_state
from ..model.scores import Score, resolve_score
from ..model.tokens import patch_grid
from .cams import CAM_FUNCTIONS, gradcam
from .grid import as_grid, is_spatial
from .guided import GuidedReLUs
from .inputs import image_of, with_grad
from .layers import blank_map_warning, default_layer, layers_reached, not_spatial_error, resolve_layer
from .maps import normalize, upsample
from .rollout import ROLLOUT_METHODS, rollout
from .tap import LayerTap
from .tokens import check_token_call, holds_image, token_attribution

log = logging.getLogger(__name__)

CAM_METHODS = tuple(CAM_FUNCTIONS)
"""The Grad-CAM family: a map ``(N, H, W)`` in [0, 1] at a layer."""
PIXEL_METHODS = ("saliency", "input_x_grad", "guided_backprop", "guided_gradcam")
"""The methods that give an input-shaped map ``(N, C, H, W)``."""
METHODS = (*CAM_METHODS, *PIXEL_METHODS, "integrated_gradients", *ROLLOUT_METHODS)
"""Every method ``attribute`` takes: the CAMs, the pixel methods, integrated gradients (token ids only; saliency and
input×gradient also attribute tokens when the inputs are token ids), then the attention rollouts."""
METHOD_WORDS: dict[str, tuple[str, str]] = {
    "gradcam": ("Grad-CAM", "the layer's activations weighted by the score's gradient, averaged per channel"),
    "gradcam++": ("Grad-CAM++", "Grad-CAM with each position's gradient weighted by its higher-order terms"),
    "hirescam": ("HiResCAM", "the layer's activations times the score's gradient, position by position"),
    "xgradcam": ("XGrad-CAM", "Grad-CAM with channel weights normalised by the activations"),
    "layercam": ("LayerCAM", "the layer's activations times the positive part of the gradient, position by position"),
    "saliency": ("saliency", "the absolute gradient of the score"),
    "input_x_grad": ("input × gradient", "the input times the score's gradient"),
    "guided_backprop": ("guided backprop", "the gradient with ReLUs passing positive gradients only"),
    "guided_gradcam": ("guided Grad-CAM", "guided backprop times this layer's Grad-CAM"),
    "integrated_gradients": (
        "integrated gradients",
        "the path integral of the gradient from a zero embedding (50 steps)",
    ),
    "attention_rollout": (
        "attention rollout",
        "the attention of every layer multiplied through, heads averaged",
    ),
    "grad_attention_rollout": (
        "gradient-weighted attention rollout",
        "each layer's attention weighted by the score's gradient, multiplied through",
    ),
}
"""Each method of ``METHODS`` → its name in words and what it computes, in one line: what the page and captions
show (the API takes the ids)."""


def method_name(method: str) -> str:
    """``method``'s name in words (``input_x_grad`` → "input × gradient"); the id itself for one not in METHODS."""
    return METHOD_WORDS[method][0] if method in METHOD_WORDS else method


_LAYER_METHODS = (*CAM_METHODS, "guided_gradcam")
_GUIDED_METHODS = ("guided_backprop", "guided_gradcam")


@dataclass
class Attribution:
    """One attribution: ``map`` is ``(N, H, W)`` in [0, 1] for CAMs, input-shaped ``(N, C, H, W)`` for pixel
    methods, ``(N, T)`` (one score per token) on token ids.

    ``layer`` is the layer the CAM was taken at (chosen when none was given) or the embedding of the token ids,
    ``classes`` the class explained for each item (None for a callable target), ``target`` the score, in words.
    """

    map: torch.Tensor
    """The map: ``(N, H, W)`` in [0, 1] for CAMs, input-shaped ``(N, C, H, W)`` for pixel methods, ``(N, T)`` per
    token for the token methods; raw ``(N, T)`` per token, or ``(N, h, w)`` per patch, for the attention rollouts."""
    method: str
    """The method, as ``METHODS`` spells it."""
    layer: str | None
    """The layer used (chosen when none was given; the embedding for tokens); for a rollout its stack
    (``a.layers.*.attn``); None for a method that takes no layer."""
    classes: list[int] | None
    """The class (or token id, at the position read) explained for each item (None for the loss or a callable)."""
    target: str = ""
    """The score explained, in words, e.g. ``output.logits · class 3`` (``Score.description``)."""
    edits: str = ""
    """Whether the run had the user's edits, in one sentence (``edits_note``; "" when none is attached)."""

    def annotated(self) -> torch.Tensor:
        """``map`` with ``method``, ``layer``, ``classes``, ``target`` and ``edits`` set as attributes: a plain tensor
        that says what it is."""
        result = self.map
        # a Tensor takes attributes at run time; torch's stubs declare none
        result.method, result.layer, result.classes, result.target = self.method, self.layer, self.classes, self.target  # type: ignore[attr-defined]
        result.edits = self.edits  # type: ignore[attr-defined]
        return result


# Spellings of pytorch-grad-cam's and Captum's class names, compared without case, "-", "_" or spaces.
_ALIASES = {
    "gradcampp": "gradcam++",
    "gradcamplusplus": "gradcam++",
    "inputxgradient": "input_x_grad",
    "inputxgrad": "input_x_grad",
    "guidedbackprop": "guided_backprop",
    "guidedgradcam": "guided_gradcam",
    "ig": "integrated_gradients",
}


def check_method(method: str) -> str:
    """The method's name as METHODS spells it (``GradCAMPlusPlus`` → ``gradcam++``); else a ValueError listing them."""
    if method in METHODS:
        return method
    key = "".join(c for c in str(method).lower() if c not in "-_ ")
    for name in METHODS:
        if key == "".join(c for c in name if c != "_"):
            return name
    if key in _ALIASES:
        return _ALIASES[key]
    close = difflib.get_close_matches(str(method), METHODS, n=1, cutoff=0.5)
    hint = f" — did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown attribution method {method!r}{hint}; methods are {', '.join(METHODS)}")


def attribute(
    model: nn.Module,
    inputs: Inputs,
    target: Target = None,
    method: str | None = None,
    layer: str | nn.Module | None = None,
    *,
    position: int | None = None,
    n_steps: int | None = None,
    baseline: int | None = None,
    internal_batch_size: int | None = None,
) -> Attribution:
    """Attribute ``target`` by ``method``: a class index, one per item, ``"top"`` (None: each item's top class),
    ``"loss"`` or a callable on the output; ``position`` picks the position of a sequence output (default: the last).

    On token ids (no image in the inputs) ``saliency``, ``input_x_grad`` and ``integrated_gradients`` (the default
    there; ``gradcam`` for images) give ``(N, T)``, taken at the output of the ``nn.Embedding`` called on the ids and
    summed over its hidden dimension; ``n_steps`` (50), ``baseline`` (a token id; None: zeros) and
    ``internal_batch_size`` are integrated gradients'.
    The attention rollouts (``ROLLOUT_METHODS``) give the row ``position`` of the rolled-out self-attention of one
    stack (the encoder's in an encoder-decoder; default: row 0, the last row under causal attention): ``(N, T)``,
    or a vision transformer's patches ``(N, h, w)``; ``.layer`` names the stack, ``a.layers.*.attn``.

    Runs in eval mode with gradients enabled; parameters' ``.grad``, buffers, RNG state and
    train/eval mode are left as found, and every temporary hook is removed, also on an exception.
    """
    ids = None if holds_image(inputs) else token_ids(inputs)
    method = check_method(method if method is not None else "gradcam" if ids is None else "integrated_gradients")
    options = {"n_steps": n_steps, "baseline": baseline, "internal_batch_size": internal_batch_size}
    if method in ROLLOUT_METHODS:
        given = ", ".join(f"{name}=" for name, value in options.items() if value is not None)
        if given:
            raise ValueError(f"{given} apply to method='integrated_gradients'; {method} takes none, leave them out")
        return _rollout(model, inputs, target, method, layer, position)
    check_token_call(method, ids, layer, options, inputs)
    chosen = ("top" if target is None else target, position)
    if ids is not None:
        steps = 50 if n_steps is None else n_steps
        scores, path, classes, described = token_attribution(
            model,
            inputs,
            chosen[0],
            position,
            method,
            n_steps=steps,
            baseline=baseline,
            internal_batch_size=internal_batch_size,
        )
        return Attribution(scores, method, path, classes, described)
    if layer is not None and method not in _LAYER_METHODS:
        raise ValueError(f"{method} attributes input pixels and takes no layer; leave layer=None")
    result, blank = _attribute(model, inputs, chosen, method, layer)
    if blank is None:
        return result

    def score_of(output: Any) -> torch.Tensor:
        return _score(model, output, chosen)[0]

    # The layer's grid got no gradient, so the map is blank: find the layers whose grid does (one more pass).
    with preserved_state(model), torch.enable_grad():
        reached = layers_reached(model, inputs, score_of, blank.size, blank.items)
    alike = [path for path, shape in reached if shape == blank.shape]  # e.g. the last block's norm1 for a ViT's norm
    if layer is None and len(blank.items) == len(result.map) and alike:
        log.info(
            "%s: the default layer %s gets no gradient from the score, so its map would be blank; drawn at %s instead",
            method,
            quoted(blank.layer),
            quoted(alike[-1]),
        )
        return _attribute(model, inputs, chosen, method, alike[-1])[0]
    others = alike or [path for path, _ in reached]
    tokens = len(blank.shape) == 3
    text = blank_map_warning(blank.layer, method, blank.items, len(result.map), tokens, others)
    warnings.warn(text, BlankMapWarning, stacklevel=2)
    return result


def _rollout(
    model: nn.Module, inputs: Inputs, target: Target, method: str, layer: Any, position: int | None
) -> Attribution:
    """An attention rollout: its layers are the self-attention stack it finds, so it takes none."""
    if layer is not None:
        raise ValueError(f"{method} rolls out every self-attention layer of the model's stack and takes no layer")
    found = rollout(model, inputs, target, position, method)
    return Attribution(found.relevance, method, found.stack, found.classes, found.target)


class _Blank(NamedTuple):
    """Items whose CAM is blank because the layer's grid got a zero gradient, with what finding others needs."""

    items: list[int]
    size: tuple[int, int]
    shape: tuple[int, ...]
    layer: str


def _score(model: nn.Module, output: Any, chosen: tuple[Any, int | None]) -> tuple[torch.Tensor, Score]:
    """The scalar an attribution differentiates (the items' scores summed: items do not interact in eval mode)."""
    return resolve_score(output, chosen[0], chosen[1], model=model, per_item=True)


def _attribute(
    model: nn.Module, inputs: Inputs, chosen: tuple[Any, int | None], method: str, layer: str | nn.Module | None
) -> tuple[Attribution, _Blank | None]:
    """One attribution run, and the items whose CAM came out blank for lack of a gradient at the layer."""
    with preserved_state(model), torch.enable_grad(), warnings.catch_warnings():
        # A user's full backward hook on a first layer makes torch warn on every backward; Explorer.run hides it too.
        warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed")
        prepared, aliases = with_grad(inputs)
        image = image_of(aliases, inputs, method)
        size = (image.shape[-2], image.shape[-1])
        path: str | None = None
        tap: LayerTap | contextlib.nullcontext[None] = contextlib.nullcontext()
        if method in _LAYER_METHODS:
            path, module = resolve_layer(model, layer) if layer is not None else _default(model, prepared, size)
            tap = LayerTap(module, path)
        guided = GuidedReLUs() if method in _GUIDED_METHODS else contextlib.nullcontext()
        if method == "guided_gradcam" and isinstance(guided, GuidedReLUs):
            guided.enabled = False  # its Grad-CAM needs the true gradients; the guided rule is for the pixel pass
        with tap, guided, Stops(model) as stops:
            output = call_model(model, prepared)
        score, chosen_score = _score(model, output, chosen)
        classes, described = chosen_score.classes, chosen_score.description
        _check_gradients(method, score, image, tap, stops)
        cam, blank = None, None
        if isinstance(tap, LayerTap):
            cam, items = _cam(model, prepared, tap, score, method, size, retain=method == "guided_gradcam")
            shape = tuple(cast(torch.Tensor, tap.activations).shape)  # _cam raised if the layer gave none
            blank = _Blank(items, size, shape, tap.path) if items else None
            if method in CAM_METHODS:
                return Attribution(cam, method, path, classes, described), blank
        if isinstance(guided, GuidedReLUs):
            _check_relus(model, guided)
            guided.enabled = True
        (grad,) = torch.autograd.grad(score, [image], allow_unused=True)
        grad = torch.zeros_like(image) if grad is None else grad
        pixels = _pixel_map(method, image.detach(), grad, cam)
        return Attribution(pixels, method, path, classes, described), blank


def _check_gradients(method: str, score: torch.Tensor, image: torch.Tensor, tap: Any, stops: Stops) -> None:
    """A ValueError when the gradient the method needs (at the CAM's layer, at the image for the pixel methods) stops
    at a module that passes none."""
    if isinstance(tap, LayerTap) and tap.edge is not None:
        check_path(method, f"layer {quoted(tap.path)}", score, [tap.edge.node], stops)
    if method not in CAM_METHODS and image.requires_grad:
        check_path(method, "the input image", score, [get_gradient_edge(image).node], stops)


def _default(model: nn.Module, inputs: Inputs, size: tuple[int, int]) -> tuple[str, nn.Module]:
    path = default_layer(model, inputs, size)
    return path, model.get_submodule(path)


def _cam(
    model: nn.Module,
    inputs: Inputs,
    tap: LayerTap,
    score: torch.Tensor,
    method: str,
    size: tuple[int, int],
    retain: bool,
) -> tuple[torch.Tensor, list[int]]:
    """The CAM of ``method`` (Grad-CAM for guided Grad-CAM) at the tapped layer, at input size, in [0, 1],
    and the items whose gradient is zero all over the layer's grid (their map is blank whatever the method)."""
    acts = tap.activations
    patches = patch_grid(model, inputs)
    if acts is None or not is_spatial(tuple(acts.shape), size, patches):
        shape = None if acts is None else tuple(acts.shape)
        raise not_spatial_error(model, inputs, tap.path, shape, size)
    grads = tap.gradient(score, retain_graph=retain)
    # float32 arithmetic: sums over hundreds of channels lose too much in float16/bfloat16.
    acts, grads = as_grid(acts.float(), size, patches), as_grid(grads.float(), size, patches)
    cam = CAM_FUNCTIONS.get(method, gradcam)(acts, grads)
    blank = (~grads.flatten(1).any(dim=1)).nonzero().flatten().tolist()
    return normalize(upsample(cam, size)).detach(), blank


def _check_relus(model: nn.Module, guided: GuidedReLUs) -> None:
    if guided.relus == 0:
        raise ValueError(
            f"guided backprop found no ReLU in the forward of {display_name(type(model).__name__)}: its rule changes "
            "ReLU gradients only, so it would equal plain gradients here; use method='saliency'"
        )


def _pixel_map(method: str, image: torch.Tensor, grad: torch.Tensor, cam: torch.Tensor | None) -> torch.Tensor:
    """The input-shaped map of a pixel method from the input, its gradient and (guided Grad-CAM) the CAM."""
    if method == "saliency":
        return grad.abs()
    if method == "input_x_grad":
        return image * grad
    if method == "guided_gradcam":
        return grad * cast(torch.Tensor, cam)[:, None].to(grad.dtype)  # its CAM was drawn first
    return grad
