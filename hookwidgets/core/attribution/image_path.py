"""The layers on a model's image path: spatial outputs computed from the image input, one map per image.

A multimodal model (CLIP) also runs a text tower whose ``(texts, T, D)`` outputs can look like ViT tokens;
only the autograd graph tells which outputs were computed from the pixels, so one forward with gradients
records each candidate's gradient edge and the graph is walked back to the image.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import GradientEdge, get_gradient_edge

from ..graph.reach import Reaches
from ..model.attention import is_attention_module
from ..model.inputs import Inputs, call_model
from ..model.tokens import patch_grid
from .grid import is_spatial
from .inputs import image_of, with_grad
from .tap import first_tensor


@dataclass
class ImagePath:
    """What one forward showed: the model's output, the spatial layers computed from the image and the layers
    whose output an attention over the image's tokens took as input."""

    output: Any
    layers: dict[str, tuple[GradientEdge, tuple[int, ...]]]
    """path -> (gradient edge of its output, output shape), in the order their forwards finish (a module called
    again moves to its last call, as the CAM's tap keeps it)."""
    attention_inputs: list[str]
    """Paths of the layers whose output fed an attention module, in the order the attentions ran."""
    patches: tuple[int, int] | None = None
    """The model's patch grid (``patch_grid``): its token outputs are these patches after the tokens before them."""


def image_path(model: nn.Module, inputs: Inputs, image_size: tuple[int, int]) -> ImagePath:
    """One forward (gradients on) of ``model``: its spatial layers computed from the image input, at its batch."""
    prepared, aliases = with_grad(inputs)
    image = image_of(aliases, inputs, "a CAM")
    batch = image.shape[0]
    patches = patch_grid(model, prepared)
    found: dict[str, tuple[GradientEdge, tuple[int, ...]]] = {}
    producers: dict[int, str] = {}  # id of a candidate output -> the last module that returned it
    kept: list[torch.Tensor] = []  # keeps those ids unique until the forward is over
    fed: list[str] = []

    def note(path: str) -> Callable[[nn.Module, Any, Any], None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            tensor = first_tensor(output)
            if tensor is None or not tensor.requires_grad or not is_spatial(tuple(tensor.shape), image_size, patches):
                return
            if tensor.shape[0] != batch:
                return
            found.pop(path, None)
            found[path] = (get_gradient_edge(tensor), tuple(tensor.shape))
            producers[id(tensor)] = path
            kept.append(tensor)

        return hook

    def attention_input(module: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        tensor = first_tensor(args)
        tensor = first_tensor(kwargs) if tensor is None else tensor  # transformers passes hidden_states= by name
        if tensor is not None and id(tensor) in producers:
            fed.append(producers[id(tensor)])

    handles = []
    try:
        for path, module in model.named_modules():
            if path:
                handles.append(module.register_forward_hook(note(path)))
                if is_attention_module(module):
                    handles.append(module.register_forward_pre_hook(attention_input, with_kwargs=True))
        with torch.enable_grad():
            output = call_model(model, prepared)
    finally:
        for handle in handles:
            handle.remove()
    reaches = Reaches(get_gradient_edge(image).node)
    layers = {path: entry for path, entry in found.items() if reaches(entry[0].node)}
    return ImagePath(output, layers, [path for path in fed if path in layers], patches)
