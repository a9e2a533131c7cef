"""Edits a hook applies to the activations or gradients it sees: scale, clip, clip_norm, zero, ablate along any
axis, ablate_heads (done where the heads' context meets the output projection: ``heads.py``), replace and
mean_ablate (activation patching)."""

from __future__ import annotations

import difflib
import math
from numbers import Real
from typing import Any

import torch

from ..model.nested import map_tensors

Edit = tuple[Any, ...]
EDIT_NAMES = ("scale", "clip", "clip_norm", "zero", "ablate", "ablate_heads", "replace", "mean_ablate")
"""The edits by name, as the first element of an ``edit=`` tuple."""
VALID_FORMS = (
    "('scale', f), ('clip', v), ('clip_norm', n), ('zero',), ('ablate', [indices]) or ('ablate', [indices], dim), "
    "('ablate_heads', [heads]), ('replace', tensor_or_record), ('mean_ablate', record)"
)
PRIMARY = ("replace", "mean_ablate")
"""Edits of the primary tensor only (the first one, a ``Record``'s ``tensor``): other tensors pass unchanged."""


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
    and integer or bool tensors (indices, masks) pass through unchanged. replace and mean_ablate change the first
    floating-point tensor only (a ``Record``'s ``tensor``).
    """
    if not edits:
        return value
    for edit in edits:  # a plain loop: a generator in any() costs a tenth of a firing's edit
        if edit[0] in PRIMARY:
            return _apply_primary(value, edits)
    return map_tensors(value, lambda t: _apply_all(t, edits))


def _apply_primary(value: Any, edits: tuple[Edit, ...]) -> Any:
    """``value`` edited with replace and mean_ablate on its first floating-point tensor only."""
    others = tuple(edit for edit in edits if edit[0] not in PRIMARY)
    seen: list[bool] = []

    def edit(t: torch.Tensor) -> torch.Tensor:
        if seen or not t.is_floating_point():
            return _apply_all(t, others)
        seen.append(True)
        return _apply_all(t, edits)

    return map_tensors(value, edit)


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
    if name == "ablate" and len(args) == 2:
        return ("ablate", _channels(args[0]), _dim(args[1]))
    if len(args) != 1:
        expected = FORMS[name]
        raise ValueError(f"edit {tuple(edit)!r}: {name!r} takes exactly one argument, write {expected}")
    (arg,) = args
    if name == "ablate":
        return ("ablate", _channels(arg))
    if name == "ablate_heads":
        return ("ablate_heads", _channels(arg, "head"))
    if name in PRIMARY:
        return (name, _patch(name, arg))
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


FORMS = {
    "scale": "('scale', f)",
    "clip": "('clip', v)",
    "clip_norm": "('clip_norm', n)",
    "ablate": "('ablate', [channels]) or ('ablate', [indices], dim)",
    "ablate_heads": "('ablate_heads', [heads])",
    "replace": "('replace', tensor_or_record)",
    "mean_ablate": "('mean_ablate', record)",
}


def _dim(arg: Any) -> int:
    if not isinstance(arg, int) or isinstance(arg, bool):
        raise ValueError(f"edit ('ablate', indices, {arg!r}): the dim must be an int (negative counts from the end)")
    return arg


def _patch(name: str, arg: Any) -> torch.Tensor:
    """The tensor a replace or mean_ablate edit puts in: a tensor, or a ``Record``'s ``tensor``; detached, and for
    mean_ablate its mean over dim 0, kept as a batch of one (computed once here, not on every firing)."""
    tensor = getattr(arg, "tensor", arg) if not isinstance(arg, torch.Tensor) else arg
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(
            f"edit ({name!r}, …): expected a tensor or a Record of a forward hook (its .tensor), got "
            f"{type(arg).__name__}; write {FORMS[name]}"
        )
    if not tensor.is_floating_point():
        raise ValueError(f"edit ({name!r}, …): the tensor must be floating point, got {tensor.dtype}")
    tensor = tensor.detach()
    if name == "mean_ablate":
        if tensor.dim() == 0:
            raise ValueError("edit ('mean_ablate', …): the record's tensor is a scalar, with no dim 0 to average")
        tensor = tensor.mean(0, keepdim=True)
    return tensor


def _is_number(x: Any) -> bool:
    # bool is an int to Python, but ('scale', True) is a mistake rather than a factor of 1.
    return isinstance(x, Real) and not isinstance(x, bool)


def _channels(arg: Any, what: str = "channel") -> tuple[int, ...]:
    """The channel (or head) indices of an ablate edit, sorted and unique; a single int is one."""
    name = "ablate" if what == "channel" else "ablate_heads"
    channels = [arg] if isinstance(arg, int) and not isinstance(arg, bool) else arg
    if not isinstance(channels, (list, tuple, range)) or not channels:
        raise ValueError(
            f"edit ({name!r}, {arg!r}): expected a non-empty list of {what} indices, e.g. ({name!r}, [0, 3])"
        )
    bad = [c for c in channels if not isinstance(c, int) or isinstance(c, bool) or c < 0]
    if bad:
        raise ValueError(f"edit ({name!r}, {arg!r}): {what} indices must be ints >= 0, got {bad[0]!r}")
    return tuple(sorted(set(channels)))


def describe_edit(edit: Edit) -> list[Any]:
    """An edit as plain data for display and export: a patch tensor as ``"tensor (shape)"``."""
    return [f"tensor {tuple(v.shape)}" if isinstance(v, torch.Tensor) else v for v in edit]


def _apply_one(t: torch.Tensor, edit: Edit) -> torch.Tensor:
    name = edit[0]
    if name == "scale":
        scaled: torch.Tensor = t * edit[1]  # edit[1] is the factor (Any to mypy)
        return scaled
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
    if name == "ablate":
        return _ablate(t, edit[1], edit[2] if len(edit) > 2 else None)
    if name in PRIMARY:
        patch = edit[1]
        check_patch_shape(name, tuple(patch.shape), tuple(t.shape))
        # a fresh tensor (never the record's own, which a later in-place op would change), broadcast over the batch;
        # where() keeps the graph, so upstream gradients are zero rather than None, as with ('zero',)
        return torch.where(torch.ones((), dtype=torch.bool, device=t.device), patch.to(t.device, t.dtype), t)
    return t  # ablate_heads: done before the output projection (heads.py), not on the value the hook sees


def ablate_dim(channels: tuple[int, ...], dim: int | None, shape: tuple[Any, ...]) -> int:
    """The axis an ablate edit zeroes along in a tensor of ``shape`` (``dim`` None: 1, or 0 for a 1-D tensor);
    an IndexError naming the shape when ``dim`` or an index is out of range."""
    rank = len(shape)
    if rank == 0:
        raise IndexError(f"cannot ablate indices {list(channels)} of a 0-d tensor (a scalar has no axis)")
    axis = (1 if rank >= 2 else 0) if dim is None else dim
    if not -rank <= axis < rank:
        raise IndexError(f"ablate dim {dim} is out of range for a tensor of shape {tuple(shape)} ({rank} dims)")
    axis %= rank
    count = shape[axis]
    if isinstance(count, int) and channels[-1] >= count:
        what = "channels" if dim is None else "indices"
        raise IndexError(
            f"ablate {what[:-1] if dim is None else 'index'} {channels[-1]} is out of range: the tensor has {count} "
            f"{what} along dim {axis} (shape {tuple(shape)})"
        )
    return axis


class PatchShapeError(ValueError):
    """A replace or mean_ablate tensor that does not fit the hooked tensor."""


def without_patches(edits: tuple[Edit, ...]) -> tuple[Edit, ...]:
    """``edits`` without its replace and mean_ablate edits."""
    return tuple(edit for edit in edits if edit[0] not in PRIMARY)


def check_patch_shape(name: str, patch: tuple[Any, ...], shape: tuple[Any, ...]) -> None:
    """A ValueError naming both shapes when a replace or mean_ablate tensor does not fit the hooked tensor
    (mean_ablate's mean, a batch of one, is broadcast over the batch)."""
    fits = patch == shape or (name == "mean_ablate" and patch[1:] == shape[1:] and len(patch) == len(shape))
    if not fits:
        what = "the record's mean over dim 0" if name == "mean_ablate" else "the replacement"
        raise PatchShapeError(
            f"edit {name!r}: {what} has shape {patch}, the hooked tensor {shape}; patch a tensor of the same shape "
            "(a record of the same module, from inputs of the same shape)"
        )


def check_edits_fit(edits: tuple[Edit, ...], shape: tuple[Any, ...], path: str) -> None:
    """At attach: a ValueError when an ablate or patch edit does not fit the output shape ``shape`` the probe saw at
    ``path`` (the example inputs'), naming both, rather than an error at every firing."""
    for edit in edits:
        try:
            if edit[0] == "ablate":
                ablate_dim(edit[1], edit[2] if len(edit) > 2 else None, shape)
            elif edit[0] in PRIMARY:
                check_patch_shape(edit[0], tuple(edit[1].shape), shape)
        except (IndexError, ValueError) as exc:
            raise ValueError(f"{exc} — the output of {path!r} on the example inputs") from None


def _ablate(t: torch.Tensor, channels: tuple[int, ...], dim: int | None) -> torch.Tensor:
    """``t`` with the given indices zeroed along ``dim`` (None: dim 1, or dim 0 of a 1-D tensor)."""
    axis = ablate_dim(channels, dim, tuple(t.shape))
    index = torch.tensor(channels, dtype=torch.long, device=t.device)
    return t.index_fill(axis, index, 0)
