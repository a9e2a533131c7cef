"""The edits of the generated code: each ``edit[0] == "<name>"`` branch of ``_edit_tensor`` is emitted only when
a hook uses that edit."""

import dataclasses

import torch

# --- generated code ---


def _edit(value, edits):
    """value with every floating-point tensor inside edited in order: new tensors, never in place."""
    if isinstance(value, torch.Tensor):
        return _edit_tensor(value, edits) if value.is_floating_point() else value
    if isinstance(value, tuple):
        items = [_edit(v, edits) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # namedtuples too
    if isinstance(value, list):
        return type(value)(_edit(v, edits) for v in value)
    if isinstance(value, dict):
        return type(value)({k: _edit(v, edits) for k, v in value.items()})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # replace() takes init fields only; __post_init__ recomputes the others
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        return dataclasses.replace(value, **{name: _edit(getattr(value, name), edits) for name in fields})
    return value  # None and non-tensors pass through


def _edit_tensor(t, edits):
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
            # zero the given channels: dim 1, or dim 0 of a 1-D tensor
            index = torch.tensor(edit[1], dtype=torch.long, device=t.device)
            t = t.index_fill(1 if t.dim() >= 2 else 0, index, 0)
    return t
