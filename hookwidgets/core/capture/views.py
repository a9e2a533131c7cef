"""Which views fit a captured tensor: feature maps, tokens, attention heads, a patch grid, bars, a histogram."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from ..model.attention import is_attention_module
from ..model.tokens import Sequences

VIEWS = ("maps", "heads", "patches", "tokens", "bars", "histogram")
"""Every view a captured tensor can have: ``maps`` (N, C, H, W) feature maps; ``heads`` attention probabilities
(N, H, T_q, T_k), one heatmap per head; ``patches`` a vision transformer's (N, 1+P, D) tokens on the patch grid;
``tokens`` a tokens × features heatmap; ``bars`` a vector; ``histogram`` any shape."""

ATTENTION_SCALES = ("linear", "per-row", "log")
"""The colour scales of the ``heads`` view, the default first: as they are, each query row divided by its own
max, logarithmic (from a floor)."""

ATTENTION_PARTS = (nn.Softmax, nn.Dropout)
"""Modules inside an attention module whose output is its probabilities (a softmax over keys, then dropout)."""


def is_attention_source(model: nn.Module, path: str) -> bool:
    """Whether the module at ``path`` gives attention probabilities: an attention module, or a softmax or
    dropout directly inside one (``blocks.0.attn.softmax``). False for a path that names no module."""
    try:
        module = model.get_submodule(path)
    except (AttributeError, ValueError, TypeError, RuntimeError):  # a parameter, an autograd node; a ScriptModule
        return False
    if is_attention_module(module):
        return True
    if not isinstance(module, ATTENTION_PARTS) or not path:
        return False
    parent = model.get_submodule(path.rpartition(".")[0])
    return is_attention_module(parent)


def tensor_views(shape: Sequence[int], *, attention: bool = False, sequences: Sequences | None = None) -> list[str]:
    """The views that fit a tensor of ``shape``, the default first, ``histogram`` always last.

    ``attention``: it came from an attention source (``is_attention_source``), so a 4-D tensor whose last two
    dimensions are sequence lengths is drawn as heads, never a conv output that merely has 4 dimensions.
    """
    sequences = sequences or Sequences()
    ndim = len(shape)
    views: list[str] = []
    if ndim == 4 and attention and _are_sequences(shape[-2:], sequences):
        views.append("heads")
    elif ndim == 4:
        views.append("maps")
    if ndim == 3 and sequences.patch_tokens(shape[1]) is not None:
        views.append("patches")
    if sequence_axis(shape, sequences) is not None:
        views.append("tokens")
    if ndim == 3 and not views:
        views.append("maps")  # (C, H, W) of one item, as before
    if ndim <= 2:
        views.append("bars")
    views.append("histogram")
    return views


def sequence_axis(shape: Sequence[int], sequences: Sequences) -> int | None:
    """The axis of a batched tensor (N, …, T, …, features) whose size is a known sequence length, the first
    after the batch; None for fewer than 3 dimensions or no such axis (the last is the features)."""
    if len(shape) < 3:
        return None
    return next((axis for axis in range(1, len(shape) - 1) if shape[axis] in sequences.lengths), None)


def _are_sequences(sizes: Sequence[int], sequences: Sequences) -> bool:
    """Whether (T_q, T_k) are sequence lengths of the inputs (any sizes when none are known)."""
    return not sequences.lengths or all(size in sequences.lengths for size in sizes)
