"""Calling a model with user-given inputs and choosing a backward score."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

Inputs = torch.Tensor | tuple | list | dict
Target = int | Sequence[int] | Callable[[Any], torch.Tensor] | str | None


def call_model(model: nn.Module, inputs: Inputs) -> Any:
    """``model(x)``, ``model(*args)`` or ``model(**kwargs)`` depending on the inputs' type."""
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def describe_inputs(inputs: Inputs) -> str:
    """A short description of inputs for error messages, such as ``Tensor(1, 3, 32, 32)``."""
    if isinstance(inputs, torch.Tensor):
        return f"Tensor({', '.join(map(str, inputs.shape))})"
    if isinstance(inputs, dict):
        return "{" + ", ".join(f"{k}: {describe_inputs(v)}" for k, v in inputs.items()) + "}"
    if isinstance(inputs, (tuple, list)):
        return "(" + ", ".join(describe_inputs(v) for v in inputs) + ")"
    return type(inputs).__name__


def backward_score(output: Any, target: Target) -> torch.Tensor:
    """The scalar to backpropagate: ``output[i, target_i]`` summed over the batch, or ``target(output)``.

    ``target`` is a class index, one index per batch item, ``"top"`` for each item's top class,
    or a callable returning a scalar.
    """
    if callable(target):
        score = target(output)
        if not isinstance(score, torch.Tensor) or score.numel() != 1:
            raise ValueError("a callable target must return a scalar tensor, e.g. lambda out: out[:, 3].sum()")
        return score.reshape(())
    logits = output[0] if isinstance(output, (tuple, list)) else output
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(
            f"a class target needs an output of shape (batch, classes), got {shape}; "
            "pass target=callable(output) returning a scalar instead"
        )
    batch, classes = logits.shape
    if target == "top":
        index = logits.detach().argmax(dim=1)
    elif isinstance(target, int):
        index = torch.full((batch,), target, dtype=torch.long, device=logits.device)
    else:
        index = torch.as_tensor(list(target), dtype=torch.long, device=logits.device)
        if index.shape != (batch,):
            raise ValueError(f"target has {index.numel()} class indices but the batch has {batch} items")
    if bool(((index < 0) | (index >= classes)).any()):
        raise ValueError(f"target class {index.tolist()} out of range: the output has {classes} classes")
    return logits.gather(1, index[:, None]).sum()
