"""The edits of the generated code: each ``edit[0] == "<name>"`` branch of ``_edit_tensor`` is emitted only when
a hook uses that edit."""

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

# An edit as the generated code writes it: its name, then its arguments, ("scale", 2.0), ("ablate", [0, 3], 1), ...
Edit = tuple[Any, ...]

# --- generated code ---


def _edit(value: Any, edits: Sequence[Edit], first: list[bool] | None = None) -> Any:
    """value with every floating-point tensor inside edited in order: new tensors, never in place; replace and
    mean_ablate change the first floating-point tensor only (``first`` notes it was met)."""
    first = [] if first is None else first
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            return value
        if first:
            edits = tuple(edit for edit in edits if edit[0] not in ("replace", "mean_ablate"))
        first.append(True)
        return _edit_tensor(value, edits)
    if isinstance(value, tuple):
        items = [_edit(v, edits, first) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # namedtuples too
    if isinstance(value, list):
        return type(value)(_edit(v, edits, first) for v in value)
    if isinstance(value, dict):
        return type(value)({k: _edit(v, edits, first) for k, v in value.items()})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # replace() takes init fields only; __post_init__ recomputes the others
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        return dataclasses.replace(value, **{name: _edit(getattr(value, name), edits, first) for name in fields})
    return value  # None and non-tensors pass through


def _edit_tensor(t: torch.Tensor, edits: Sequence[Edit]) -> torch.Tensor:
    for edit in edits:
        if edit[0] == "scale":
            t = t * edit[1]
        elif edit[0] == "clip":
            t = t.clamp(-edit[1], edit[1])
        elif edit[0] == "clip_norm":
            # the norm in float32 at least, so float16 does not overflow; the rescale stays differentiable
            norm = torch.linalg.vector_norm(t, dtype=torch.promote_types(t.dtype, torch.float32))
            t = t * torch.where(norm > edit[1], edit[1] / norm, torch.ones_like(norm)).to(t.dtype)
        elif edit[0] == "zero":
            # masked_fill keeps the graph (zero gradients upstream) and, unlike t * 0, turns Inf and NaN into 0
            t = t.masked_fill(torch.ones((), dtype=torch.bool, device=t.device), 0)
        elif edit[0] == "ablate":
            # zero the given indices along edit[2], else the channels: dim 1, or dim 0 of a 1-D tensor
            index = torch.tensor(edit[1], dtype=torch.long, device=t.device)
            t = t.index_fill(edit[2] if len(edit) > 2 else 1 if t.dim() >= 2 else 0, index, 0)
        elif edit[0] == "ablate_heads":
            pass  # done before the attention's output projection, by the hook registered with this one
        elif edit[0] == "replace":
            # a fresh tensor; where() keeps the graph, so upstream gradients are zero rather than None
            t = torch.where(torch.ones((), dtype=torch.bool, device=t.device), edit[1].to(t.device, t.dtype), t)
        elif edit[0] == "mean_ablate":
            # edit[1] is the record's mean over dim 0 (a batch of one), broadcast over the batch
            t = torch.where(torch.ones((), dtype=torch.bool, device=t.device), edit[1].to(t.device, t.dtype), t)
    return t
