"""The score an attribution explains: a class per item (given, per-item, or the top one) or a callable."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..model.inputs import class_scores, class_target

AttributionTarget = int | Sequence[int] | Callable[[Any], torch.Tensor] | None


PER_ITEM_FIX = "pass target=callable(output) returning one score per item, e.g. lambda out: out[:, 3]"


def class_indices(logits: torch.Tensor, target: int | Sequence[int] | None) -> torch.Tensor:
    """One class index per item: ``None`` or ``"top"`` picks each item's top class; the forms ``ex.run`` takes
    (integer tensors, numpy integers) are read the same way; a range error names the class count."""
    batch, classes = logits.shape
    target = "top" if target is None else class_target(target)  # a ValueError naming the forms for anything else
    if target == "top":
        return logits.detach().argmax(dim=1)
    if isinstance(target, int):
        index = torch.full((batch,), target, dtype=torch.long, device=logits.device)
    else:
        index = torch.as_tensor([int(t) for t in target], dtype=torch.long, device=logits.device)
        if index.shape != (batch,):
            raise ValueError(f"target has {index.numel()} class indices but the batch has {batch} items")
    bad = index[(index < 0) | (index >= classes)]
    if bad.numel():
        raise ValueError(
            f"target class {bad[0].item()} is out of range: the output has {classes} classes (0 to {classes - 1})"
        )
    return index


def target_score(output: Any, target: AttributionTarget) -> tuple[torch.Tensor, list[int] | None]:
    """The scalar to differentiate (items' scores summed: items do not interact in eval mode) and the classes used.

    A callable gets the model output and returns one score per item ``(N,)`` or one scalar.
    """
    if callable(target):
        score = target(output)
        if not isinstance(score, torch.Tensor) or score.dim() > 1:
            got = tuple(score.shape) if isinstance(score, torch.Tensor) else type(score).__name__
            raise ValueError(
                f"a callable target must return one score per item (N,) or a scalar, got {got}; "
                "e.g. lambda out: out[:, 3]"
            )
        return score.sum(), None
    logits = class_scores(output, PER_ITEM_FIX)
    index = class_indices(logits, target)
    return logits.gather(1, index[:, None]).sum(), index.tolist()
