"""Calling a model with user-given inputs and choosing a backward score."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from .nested import children

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
    logits = class_scores(output)
    batch, classes = logits.shape
    target = class_target(target)
    if target == "top":
        index = logits.detach().argmax(dim=1)
    elif isinstance(target, int):
        index = torch.full((batch,), target, dtype=torch.long, device=logits.device)
    else:
        index = torch.as_tensor(target, dtype=torch.long, device=logits.device)
        if index.shape != (batch,):
            raise ValueError(f"target has {index.numel()} class indices but the batch has {batch} items")
    if bool(((index < 0) | (index >= classes)).any()):
        raise ValueError(f"target class {index.tolist()} out of range: the output has {classes} classes")
    return logits.gather(1, index[:, None]).sum()


SCALAR_FIX = "pass target=callable(output) returning a scalar instead"


def class_scores(output: Any, fix: str = SCALAR_FIX) -> torch.Tensor:
    """The ``(batch, classes)`` scores in a model output (see ``_scores_in``); else a ValueError naming what
    the output holds, ending with ``fix``."""
    scores = _scores_in(output)
    if scores is None or scores.dim() != 2:
        got = describe_output(output)
        raise ValueError(f"a class target needs an output of shape (batch, classes), got {got}; {fix}")
    return scores


def top_classes(output: Any, k: int = 5) -> list[tuple[int, float]]:
    """``[(class, probability), …]`` of the first item's top ``k`` classes, the scores found as a class target finds
    them; ``[]`` when the output holds no floating-point ``(batch, classes)`` scores or no item."""
    try:
        scores = class_scores(output)
    except ValueError:
        return []
    if not scores.is_floating_point() or scores.shape[0] == 0:
        return []
    probs = scores[0].detach().float().softmax(-1)
    values, indices = probs.topk(min(k, probs.numel()))
    return [(int(i), round(float(v), 4)) for v, i in zip(values, indices, strict=True)]


def _scores_in(output: Any) -> torch.Tensor | None:
    """The tensor meant as class scores: the output itself, a tuple's first item, a ``logits`` key or field
    (dicts, HF ModelOutputs, dataclasses, namedtuples), else their first 2-D floating-point tensor."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, tuple) and hasattr(output, "_fields"):  # a namedtuple names its items as a dataclass does
        output = output._asdict()
    elif isinstance(output, (tuple, list)):
        first = output[0] if output else None
        return first if isinstance(first, torch.Tensor) else None
    items = children(output)
    if items is None:
        return None
    values = dict(items)
    if isinstance(values.get("logits"), torch.Tensor):
        return values["logits"]
    # Floating point only: a 2-D integer tensor beside the scores (token ids, labels) is no class score.
    return next(
        (v for v in values.values() if isinstance(v, torch.Tensor) and v.dim() == 2 and v.is_floating_point()), None
    )


def describe_output(output: Any, limit: int = 6) -> str:
    """A model output for error messages: a tensor's shape ``(2, 3, 4)``, else its type and first ``limit`` items."""
    if isinstance(output, torch.Tensor):
        return str(tuple(output.shape))
    items = children(output)
    if items is None:
        return type(output).__name__
    items = list(items)
    keyed = not isinstance(output, (tuple, list))  # a plain sequence's keys are its indexes: not worth showing
    shown = [f"{key}: {describe_inputs(v)}" if keyed else describe_inputs(v) for key, v in items[:limit]]
    more = ", …" if len(items) > limit else ""
    brackets = "{}" if keyed else "()"
    return f"{type(output).__name__} {brackets[0]}{', '.join(shown)}{more}{brackets[1]}"


TARGET_FORMS = '"top", a class index (3), one index per batch item ([3, 7]) or a callable(output) -> scalar'


def class_target(target: Any) -> str | int | list[int]:
    """``target`` as "top", an int or a list of ints; a ValueError naming the accepted forms for anything else.

    An integer tensor counts as its value(s) (``pred.argmax(1)`` is a fine target), a numpy integer as
    an int; a bool, a float or another string is refused rather than read as a class.
    """
    if isinstance(target, str):
        if target == "top":
            return target
    elif isinstance(target, torch.Tensor):
        if (
            target.dim() <= 1
            and not target.is_floating_point()
            and not target.is_complex()
            and target.dtype != torch.bool
        ):
            return target.tolist()
    elif isinstance(target, Sequence):
        indices = [_index(item) for item in target]
        if None not in indices:
            return indices
    elif (index := _index(target)) is not None:
        return index
    raise ValueError(f"target {target!r} is not a score target; pass {TARGET_FORMS}")


def _index(value: Any) -> int | None:
    """``value`` as an int when it is an integer other than a bool (numpy integers too), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None
