"""The module tree as plain data, with output shapes from a probe run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .inputs import Inputs, call_model
from .modelstate import preserved_state


@dataclass
class ProbeResult:
    """Output shape and dtype of each module's first output tensor, by path."""

    shapes: dict[str, list[int]]
    dtypes: dict[str, str]


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        items = value
    elif isinstance(value, dict):
        items = value.values()
    else:
        return None
    for item in items:
        found = _first_tensor(item)
        if found is not None:
            return found
    return None


def probe(model: nn.Module, inputs: Inputs) -> ProbeResult:
    """Run ``inputs`` once (eval mode, no grad) and note each module's first output's shape.

    The model is left as found (state restored, temporary hooks removed), also when it raises.
    """
    result = ProbeResult({}, {})
    handles = []

    def note_output(path: str):
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            tensor = _first_tensor(output)
            if tensor is not None and path not in result.shapes:  # first call wins for shared modules
                result.shapes[path] = list(tensor.shape)
                result.dtypes[path] = str(tensor.dtype).removeprefix("torch.")

        return hook

    try:
        for path, module in model.named_modules():
            handles.append(module.register_forward_hook(note_output(path)))
        with preserved_state(model), torch.no_grad():
            call_model(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    return result


def build_tree(model: nn.Module, probed: ProbeResult | None = None) -> dict[str, Any]:
    """Nested plain-data tree: path, name, class, parameter counts (subtree), output shape, children.

    Parameters shared between modules are counted once per subtree.
    """
    probed = probed or ProbeResult({}, {})

    def node(path: str, name: str, module: nn.Module) -> dict[str, Any]:
        trainable = frozen = 0
        for param in module.parameters():  # parameters() already removes duplicates
            if param.requires_grad:
                trainable += param.numel()
            else:
                frozen += param.numel()
        children = [
            node(f"{path}.{child_name}" if path else child_name, child_name, child)
            for child_name, child in module.named_children()
        ]
        return {
            "path": path,
            "name": name,
            "cls": type(module).__name__,
            "trainable": trainable,
            "frozen": frozen,
            "shape": probed.shapes.get(path),
            "dtype": probed.dtypes.get(path),
            "children": children,
        }

    return node("", type(model).__name__, model)
