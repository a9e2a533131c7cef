"""Attention probabilities of a transformers model of the older kind, which declares nothing for transformers to
record and returns them only when called with ``output_attentions=True``: each returned tensor is keyed by the
innermost attention module whose output held that very tensor."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from .attention import is_attention_module
from .attn_impl import eager_attention, reachable_configs
from .inputs import Inputs, call_model

FIELDS = ("attentions", "encoder_attentions", "decoder_attentions", "cross_attentions")
"""The fields of a transformers output that hold attention probabilities."""


def returns_attentions(model: nn.Module) -> bool:
    """Whether ``model`` is a transformers model (a config says how it attends) whose forward takes
    ``output_attentions``."""
    return bool(reachable_configs(model)) and "output_attentions" in _parameters(model)


def record_returned_attention(model: nn.Module, inputs: Inputs) -> dict[str, torch.Tensor]:
    """``{path: probabilities}`` of one forward with ``output_attentions=True`` under eager attention, in the order
    the attention modules ran (``path#2`` for a second call); empty when the output holds none."""
    return returned_attention_and_output(model, inputs)[0]


def returned_attention_and_output(
    model: nn.Module, inputs: Inputs, *, grad: bool = False
) -> tuple[dict[str, torch.Tensor], Any]:
    """``record_returned_attention`` and the model's output, the forward run with autograd on when ``grad``."""
    held: list[tuple[str, torch.Tensor]] = []  # (path, tensor) of each tensor an attention module returned
    handles = []

    def hook(path: str) -> Any:
        def read(_module: nn.Module, _args: Any, output: Any) -> None:
            values = output if isinstance(output, (tuple, list)) else (output,)
            held.extend((path, value) for value in values if isinstance(value, torch.Tensor))

        return read

    extra = {"output_attentions": True}
    if "return_dict" in _parameters(model):
        extra["return_dict"] = True
    try:
        for path, module in model.named_modules():
            if is_attention_module(module):
                handles.append(module.register_forward_hook(hook(path), prepend=True))
        with eager_attention(model), torch.set_grad_enabled(grad):
            output = call_model(lambda *args, **kwargs: model(*args, **kwargs, **extra), inputs)  # type: ignore[arg-type]
    finally:
        for handle in handles:
            handle.remove()
    returned = {id(t) for name in FIELDS for t in (_field(output, name) or ()) if isinstance(t, torch.Tensor)}
    owners: dict[int, str] = {}
    for path, tensor in held:  # forward hooks fire as modules finish: the innermost holder comes first
        if id(tensor) in returned:
            owners.setdefault(id(tensor), path)
    result: dict[str, torch.Tensor] = {}
    calls: dict[str, int] = {}
    for path, tensor in held:
        if owners.get(id(tensor)) == path:
            owners.pop(id(tensor))
            calls[path] = calls.get(path, 0) + 1
            result[path if calls[path] == 1 else f"{path}#{calls[path]}"] = tensor
    return result, output


def _parameters(model: nn.Module) -> set[str]:
    try:
        return set(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):  # a forward without a signature (a builtin, a C extension)
        return set()


def _field(output: Any, name: str) -> Any:
    """``output.name`` or ``output[name]`` of a ModelOutput or dict, else None."""
    if isinstance(output, dict):
        return output.get(name)
    return getattr(output, name, None)
