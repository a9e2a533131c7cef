"""Packed weights: tensors a module keeps inside a TorchBind object (a ``torch.ScriptObject``), as the Linear of
``torch.ao.quantization.quantize_dynamic`` keeps its int8 weight and bias (``_packed_params``). They are neither
parameters nor buffers: ``parameters()`` misses them and autograd passes no gradient through the kernels using them."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .nested import tensors_in


def packed_objects(module: nn.Module) -> list[Any]:
    """The TorchBind objects among ``module``'s own attributes (directly, or in a list or tuple), not its children's."""
    if isinstance(module, torch.jit.ScriptModule):
        return []  # its compiled self is a ScriptObject too, and its weights are its parameters
    found: list[Any] = []
    for value in vars(module).values():
        items = value if isinstance(value, (list, tuple)) else (value,)
        found.extend(item for item in items if isinstance(item, torch.ScriptObject))
    return found


def packed_tensors(module: nn.Module) -> list[torch.Tensor]:
    """The tensors ``module``'s own packed objects hold, read from their pickled state (what ``state_dict`` saves);
    an object that cannot say holds none here."""
    found: list[torch.Tensor] = []
    for packed in packed_objects(module):
        try:
            state = packed.__getstate__()
        except Exception:  # a TorchBind class without pickling: its size is not known
            continue
        found.extend(tensors_in(state))
    return found


def packed_numel(module: nn.Module) -> int:
    """How many elements ``module``'s own packed objects hold (weights and biases)."""
    return sum(t.numel() for t in packed_tensors(module))


def holds_packed(model: nn.Module) -> bool:
    """Whether any module of ``model`` keeps packed weights."""
    return any(packed_objects(module) for module in model.modules())
