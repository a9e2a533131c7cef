"""Calling a model with user-given inputs, and describing them in messages."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from .meta import call_time_watch, holds_meta

Inputs = torch.Tensor | tuple[Any, ...] | list[Any] | Mapping[str, Any]
Target = int | Sequence[int] | Callable[[Any], torch.Tensor] | str | None


def call_model(model: nn.Module, inputs: Inputs) -> Any:
    """``model(x)``, ``model(*args)`` or ``model(**kwargs)`` depending on the inputs' type: any mapping (a
    tokenizer's ``BatchEncoding`` too) is keyword arguments. For the explorer's own runs: a model holding meta
    tensors runs on meta every op that mixes them with others (``meta.CallTimeWatch``), so none makes up values."""
    if isinstance(model, nn.Module) and holds_meta(model):  # (some callers pass a plain callable)
        with call_time_watch(model, to_meta=True):
            return _call(model, inputs)
    return _call(model, inputs)


def _call(model: nn.Module, inputs: Inputs) -> Any:
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def describe_inputs(inputs: Inputs) -> str:
    """A short description of inputs for error messages, such as ``Tensor(1, 3, 32, 32)``."""
    if isinstance(inputs, torch.Tensor):
        return f"Tensor({', '.join(map(str, inputs.shape))})"
    if isinstance(inputs, Mapping):
        return "{" + ", ".join(f"{k}: {describe_inputs(v)}" for k, v in inputs.items()) + "}"
    if isinstance(inputs, (tuple, list)):
        return "(" + ", ".join(describe_inputs(v) for v in inputs) + ")"
    return type(inputs).__name__


def explain_run_error(exc: BaseException, inputs: Inputs) -> str:
    """The error of a failed run as text, with the inputs' shapes so a wrong shape is obvious."""
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return f"{type(exc).__name__}: {exc}\n(inputs were {describe_inputs(inputs)})\n\n{trace}"


_TOKEN_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def token_ids(inputs: Inputs) -> torch.Tensor | None:
    """The inputs' token ids ``(N, T)``: a Mapping's ``input_ids`` or a lone integer tensor; else None."""
    value = inputs.get("input_ids") if isinstance(inputs, Mapping) else inputs
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    if not isinstance(value, torch.Tensor) or value.dim() != 2 or value.dtype not in _TOKEN_DTYPES:
        return None
    return value
