"""Edits a hook applies to the activations or gradients it sees: scale, clip, clip_norm, zero, ablate."""

from __future__ import annotations

import difflib
import math
from numbers import Real
from typing import Any

import torch

from ..model.nested import map_tensors

Edit = tuple
EDIT_NAMES = ("scale", "clip", "clip_norm", "zero", "ablate")
VALID_FORMS = "('scale', f), ('clip', v), ('clip_norm', n), ('zero',), ('ablate', [channels])"


def normalize_edits(edit: Any) -> tuple[Edit, ...]:
    """The edits of an ``edit=`` argument (None, one tuple or a list of tuples), validated, in order.

    Raises ValueError naming the bad edit and what is expected, so a mistake shows at attach time.
    """
    if edit is None:
        return ()
    if isinstance(edit, (tuple, list)) and edit and isinstance(edit[0], str):
        return (_normalize_one(edit),)
    if isinstance(edit, (tuple, list)):
        return tuple(_normalize_one(e) for e in edit)
    if isinstance(edit, str):
        _normalize_one(edit)
    raise ValueError(f"edit={edit!r} is not an edit; pass a tuple or a list of tuples: {VALID_FORMS}")


def apply_edits(value: Any, edits: tuple[Edit, ...]) -> Any:
    """``value`` with every floating-point tensor inside edited in order; never changes a tensor in place.

    Tensors may sit in nested tuples, lists, dicts and dataclasses, whose types are kept; None, non-tensors
    and integer or bool tensors (indices, masks) pass through unchanged.
    """
    if not edits:
        return value
    return map_tensors(value, lambda t: _apply_all(t, edits))


def _apply_all(t: torch.Tensor, edits: tuple[Edit, ...]) -> torch.Tensor:
    if not t.is_floating_point():
        return t
    for edit in edits:
        t = _apply_one(t, edit)
    return t


def _normalize_one(edit: Any) -> Edit:
    if isinstance(edit, str):
        raise ValueError(
            f"edit {edit!r} must be a tuple, e.g. ({edit!r},) or ({edit!r}, value); edits are {VALID_FORMS}"
        )
    if not isinstance(edit, (tuple, list)) or not edit or not isinstance(edit[0], str):
        raise ValueError(f"edit {edit!r} is not an edit; edits are {VALID_FORMS}")
    name, args = edit[0], tuple(edit[1:])
    if name not in EDIT_NAMES:
        close = difflib.get_close_matches(name, EDIT_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown edit {name!r}{hint}; edits are {VALID_FORMS}")
    if name == "zero":
        if args:
            raise ValueError(f"edit {tuple(edit)!r}: 'zero' takes no argument, write ('zero',)")
        return ("zero",)
    if len(args) != 1:
        form = {"scale": "('scale', f)", "clip": "('clip', v)", "clip_norm": "('clip_norm', n)"}
        expected = form.get(name, "('ablate', [channels])")
        raise ValueError(f"edit {tuple(edit)!r}: {name!r} takes exactly one argument, write {expected}")
    (arg,) = args
    if name == "ablate":
        return ("ablate", _channels(arg))
    if not _is_number(arg) or math.isnan(arg):
        raise ValueError(f"edit {tuple(edit)!r}: the {name!r} argument must be a number, got {arg!r}")
    if name == "scale":
        if not math.isfinite(arg):
            raise ValueError(f"edit {tuple(edit)!r}: the 'scale' factor must be finite, got {arg!r}")
        return ("scale", float(arg))
    if arg < 0:
        what = "clip value v (values are clamped to [-v, v])" if name == "clip" else "clip_norm bound n (an L2 norm)"
        raise ValueError(f"edit {tuple(edit)!r}: the {what} must be >= 0, got {arg!r}")
    return (name, float(arg))


def _is_number(x: Any) -> bool:
    # bool is an int to Python, but ('scale', True) is a mistake rather than a factor of 1.
    return isinstance(x, Real) and not isinstance(x, bool)


def _channels(arg: Any) -> tuple[int, ...]:
    """The channel indices of an ablate edit, sorted and unique; a single int is one channel."""
    channels = [arg] if isinstance(arg, int) and not isinstance(arg, bool) else arg
    if not isinstance(channels, (list, tuple, range)) or not channels:
        raise ValueError(
            f"edit ('ablate', {arg!r}): expected a non-empty list of channel indices, e.g. ('ablate', [0, 3])"
        )
    bad = [c for c in channels if not isinstance(c, int) or isinstance(c, bool) or c < 0]
    if bad:
        raise ValueError(f"edit ('ablate', {arg!r}): channel indices must be ints >= 0, got {bad[0]!r}")
    return tuple(sorted(set(channels)))


def _apply_one(t: torch.Tensor, edit: Edit) -> torch.Tensor:
    name = edit[0]
    if name == "scale":
        return t * edit[1]
    if name == "clip":
        return t.clamp(-edit[1], edit[1])
    if name == "clip_norm":
        # Norm taken in float32 at least so that float16 tensors do not overflow; the rescale stays
        # on the device (no host sync) and differentiable, like a hand-written hook would be.
        norm = torch.linalg.vector_norm(t, dtype=torch.promote_types(t.dtype, torch.float32))
        factor = torch.where(norm > edit[1], edit[1] / norm, torch.ones_like(norm))
        return t * factor.to(t.dtype)
    if name == "zero":
        # masked_fill rather than zeros_like keeps the autograd graph (zero gradients upstream, not None)
        # and, unlike t * 0, gives 0 rather than NaN where t holds Inf or NaN.
        return t.masked_fill(torch.ones((), dtype=torch.bool, device=t.device), 0)
    return _ablate(t, edit[1])


def _ablate(t: torch.Tensor, channels: tuple[int, ...]) -> torch.Tensor:
    """``t`` with the given channels zeroed: dim 1 for tensors of dim >= 2, dim 0 for 1-D ones."""
    if t.dim() == 0:
        raise IndexError(f"cannot ablate channels {list(channels)} of a 0-d tensor (a scalar has no channels)")
    dim = 1 if t.dim() >= 2 else 0
    count = t.shape[dim]
    if channels[-1] >= count:
        raise IndexError(
            f"ablate channel {channels[-1]} is out of range: the tensor has {count} channels along dim {dim} "
            f"(shape {tuple(t.shape)})"
        )
    index = torch.tensor(channels, dtype=torch.long, device=t.device)
    return t.index_fill(dim, index, 0)
