"""Inputs made ready for attribution: floating tensors require grad (on aliases, never the user's tensors)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..model.inputs import Inputs, describe_inputs
from ..model.nested import rebuilt_mapping


def with_grad(inputs: Inputs) -> tuple[Inputs, list[torch.Tensor]]:
    """A copy of the input structure whose floating tensors come from detached aliases that require grad.

    Users pass images that do not require grad; without this, a frozen backbone gives a layer
    output with no gradient at all. The aliases share memory with the user's tensors, which keep their
    ``requires_grad`` and ``.grad``; the model gets a clone of each alias, so a forward that changes its
    input in place (``x.sub_(mean)``, a first ``ReLU(inplace=True)``) works on the clone, as it does on
    a tensor that needs no grad, and leaves the user's tensor alone.
    Returns the new inputs and the aliases (whose ``.grad`` is the input gradient) in the order found.
    """
    found: list[torch.Tensor] = []

    def convert(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
            alias = value.detach().requires_grad_(True)
            found.append(alias)
            return alias.clone()
        if isinstance(value, Mapping):  # keyword arguments; a tokenizer's BatchEncoding keeps its type
            return rebuilt_mapping(value, {k: convert(v) for k, v in value.items()})
        if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
            return type(value)(convert(v) for v in value)
        return value

    return convert(inputs), found


def image_of(aliases: list[torch.Tensor], inputs: Inputs, method: str) -> torch.Tensor:
    """The input an attribution is about: the first floating tensor of shape ``(N, C, H, W)``."""
    for tensor in aliases:
        if tensor.dim() == 4:
            return tensor
    raise ValueError(
        f"{method} needs an image input of shape (N, C, H, W) to attribute to, got {describe_inputs(inputs)}; "
        "pass the image as the first floating-point tensor of the inputs"
    )
