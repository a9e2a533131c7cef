"""The layer a CAM is taken at: the user's choice checked, or the last layer on the image path with a spatial
output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..display import display_name, quoted
from ..model.inputs import Inputs
from ..model.paths import resolve_module
from .grid import as_grid
from .image_path import image_path

# Their map is a coarser copy of the layer before, so the default looks past them (a user may still pick one).
POOLING = (nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)
SHOWN = 12


def spatial_layers(model: nn.Module, inputs: Inputs, image_size: tuple[int, int]) -> list[str]:
    """Paths of layers whose output can carry a CAM, in the order their forwards finish (once each): outputs
    ``(N, C, h, w)`` or ViT tokens computed from the image input (the first ``(N, C, H, W)`` floating tensor),
    one per image; a text tower's outputs never are."""
    return list(image_path(model, inputs, image_size).layers)


def default_layer(model: nn.Module, inputs: Inputs, image_size: tuple[int, int]) -> str:
    """The last layer on the image path to finish with a spatial output, pooling layers aside (``layer4`` of a
    ResNet); for tokens, the input of the last attention over them (a ViT's last ``layernorm_before``).

    A vision transformer's head reads one token, which takes in the patch tokens only through attention: after the
    last attention their gradient is zero, so the map would be blank. A container that returns its last child's
    output finishes after it, so the container's shorter name is chosen for the same tensor.
    """
    found = image_path(model, inputs, image_size)
    candidates = [p for p in found.layers if not isinstance(model.get_submodule(p), POOLING)] or list(found.layers)
    if not candidates:
        raise ValueError(
            f"no layer of {display_name(type(model).__name__)} has a spatial output computed from the image for "
            "these inputs: CAM methods need a layer output of shape (N, C, H, W) or ViT tokens (N, k+H·W, C); "
            "use a pixel method such as method='saliency' instead"
        )
    last = candidates[-1]
    tokens = len(found.layers[last][1]) == 3
    return found.attention_inputs[-1] if tokens and found.attention_inputs else last


def resolve_layer(model: nn.Module, layer: str | nn.Module) -> tuple[str, nn.Module]:
    """``(path, module)`` for a path or a submodule of ``model``; errors name close paths."""
    if isinstance(layer, nn.Module):
        for path, module in model.named_modules():
            if module is layer:
                return path, module
        raise ValueError(
            f"the {display_name(type(layer).__name__)} given as layer is not a submodule of "
            f"{display_name(type(model).__name__)}"
        )
    return layer, resolve_module(model, layer)


def not_spatial_error(
    model: nn.Module, inputs: Inputs, path: str, shape: tuple[int, ...] | None, image_size: tuple[int, int]
) -> ValueError:
    """The error for a layer without a spatial output, naming the layers that have one."""
    suitable = spatial_layers(model, inputs, image_size)
    shown = ", ".join(quoted(p) for p in suitable[-SHOWN:])
    more = f" (the last {SHOWN} of {len(suitable)})" if len(suitable) > SHOWN else ""
    what = f"output of shape {shape}" if shape is not None else "no tensor output in the forward"
    hint = f"suitable layers{more}: {shown}" if suitable else "no layer of this model has one"
    return ValueError(
        f"layer {quoted(path)} has {what}, not a spatial map: CAM methods need an output (N, C, H, W) "
        f"or ViT tokens (N, k+H·W, C), k tokens before the patches; {hint}"
    )


def layers_reached(
    model: nn.Module,
    inputs: Inputs,
    score_of: Callable[[Any], torch.Tensor],
    image_size: tuple[int, int],
    items: list[int],
) -> list[tuple[str, tuple[int, ...]]]:
    """``(path, output shape)`` of the spatial layers on the image path, pooling aside, whose grid gets a non-zero
    gradient of ``score_of(output)`` for each of ``items``, in the order their forwards finish (one forward and
    backward)."""
    found = image_path(model, inputs, image_size)
    layers = {p: entry for p, entry in found.layers.items() if not isinstance(model.get_submodule(p), POOLING)}
    if not layers:
        return []
    grads = torch.autograd.grad(score_of(found.output), [edge for edge, _ in layers.values()], allow_unused=True)
    return [
        (path, shape)
        for (path, (_, shape)), grad in zip(layers.items(), grads, strict=True)
        if grad is not None and as_grid(grad, image_size, found.patches)[items].flatten(1).any(dim=1).all()
    ]


def blank_map_warning(path: str, method: str, items: list[int], batch: int, tokens: bool, others: list[str]) -> str:
    """Why ``method``'s map at ``path`` is blank for ``items`` (a zero gradient there), and which layers get one."""
    where = "patch token" if tokens else "position"
    which = "" if len(items) == batch else f" for items {items} of {batch}"
    why = (
        "at a vision transformer's final norm: the head reads only the class token" if tokens else "on an unused branch"
    )
    shown = ", ".join(quoted(p) for p in others[-3:])
    hint = f"pass a layer whose grid gets one, such as {shown}" if others else "no spatial layer gets one here"
    return (
        f"layer {quoted(path)} gets a zero gradient at every {where}{which}, so its {method} map is blank (all zeros): "
        f"the score does not depend on them (as {why}); {hint}"
    )
