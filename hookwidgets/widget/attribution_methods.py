"""Which attribution methods fit a module: what the inspector's attribution panel offers for the selection."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..core.attribution import CAM_METHODS, METHOD_WORDS, PIXEL_METHODS, ROLLOUT_METHODS, TOKEN_METHODS
from ..core.attribution.grid import is_spatial
from ..core.attribution.tokens import holds_image
from ..core.explorer import Explorer
from ..core.model.attention import is_attention_module
from ..core.model.inputs import token_ids
from ..core.model.tree import tree_node
from .protocol import MethodWords

LAYER_METHODS = (*CAM_METHODS, "guided_gradcam")
"""The methods taken at the selected layer (the others at the input, or over the attention stack)."""
# Integrated gradients first: the default of the token methods, and the one whose scores add up to the output's change.
_TOKEN_ORDER = ("integrated_gradients", *(m for m in TOKEN_METHODS if m != "integrated_gradients"))


def offered_methods(explorer: Explorer, path: str) -> list[str]:
    """The attribution methods that fit module ``path`` of ``explorer`` and its example inputs, in menu order.

    Images: the CAMs where the module's output is a spatial grid (a conv map, a ViT's patch tokens), the pixel
    methods anywhere; token ids: the token methods (taken at the embedding, whatever module is selected). An
    attention module adds the rollouts. None without example inputs, or for inputs that are neither.
    """
    inputs = explorer.example_inputs
    if inputs is None:
        return []
    try:
        module = explorer.model.get_submodule(path)
    except AttributeError:
        return []
    rollouts = list(ROLLOUT_METHODS) if is_attention_module(module) else []
    if token_ids(inputs) is not None and not holds_image(inputs):
        return [*_TOKEN_ORDER, *rollouts]
    image = image_of(inputs)
    if image is None:
        return []
    node = tree_node(explorer.tree, path)
    sizes = node["shape"] if node is not None else None
    shape = tuple(s for s in sizes if isinstance(s, int)) if sizes else ()
    # an unknown shape, or one with a symbolic size (str), is no grid
    spatial = len(shape) == len(sizes or [None]) and is_spatial(
        shape, (image.shape[-2], image.shape[-1]), explorer.sequences.grid
    )
    return [*(LAYER_METHODS if spatial else ()), *PIXEL_METHODS[:3], *rollouts]


def method_words(methods: list[str]) -> dict[str, MethodWords]:
    """Each of ``methods`` → its name in words and what it computes (``METHOD_WORDS``): what the menu shows."""
    return {m: {"name": METHOD_WORDS[m][0], "tip": METHOD_WORDS[m][1]} for m in methods if m in METHOD_WORDS}


def methods_note(explorer: Explorer, path: str, offered: list[str]) -> str:
    """What the panel says beside the methods: why there are none, or none of a kind, here; "" when all fit."""
    inputs = explorer.example_inputs
    if inputs is None:
        return "Attribution needs example inputs: HookExplorer(model, example_inputs=x)"
    if not offered:
        return "Attribution needs example inputs holding an image (N, C, H, W) or token ids (N, T)"
    if token_ids(inputs) is not None and not holds_image(inputs):
        return "Token methods score each input token at the embedding, whichever module is selected"
    if not set(CAM_METHODS) & set(offered):
        return "Grad-CAM needs a layer whose output is a spatial grid (a conv feature map, a ViT's patch tokens)"
    return ""


def image_of(inputs: Any) -> torch.Tensor | None:
    """The first floating-point ``(N, C, H, W)`` tensor of the inputs (what the pixel methods and CAMs explain)."""
    if isinstance(inputs, torch.Tensor):
        return inputs if inputs.is_floating_point() and inputs.dim() == 4 else None
    values = inputs.values() if isinstance(inputs, Mapping) else inputs if isinstance(inputs, (tuple, list)) else ()
    return next((found for found in map(image_of, values) if found is not None), None)
