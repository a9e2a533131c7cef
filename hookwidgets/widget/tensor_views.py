"""Draw one captured tensor in the view chosen for it: maps, heads, patches, tokens, bars or a histogram."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..core.capture.views import ATTENTION_SCALES, is_attention_source, sequence_axis, tensor_views
from ..core.model.tokens import Sequences

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Context:
    """What the views of the tensors at a path need beyond their shapes."""

    sequences: Sequences = field(default_factory=Sequences)
    """The explorer's token labels, sequence lengths and patch grid."""
    attention: bool = False
    """The module there gives attention probabilities (an attention module, or a softmax or dropout inside one)."""
    decoder: bool = False
    """The path is in a decoder: its sequence axes take the decoder's tokens first."""


def context_for(explorer: Any, path: str) -> Context:
    """The ``Context`` of ``path`` in ``explorer`` (a module path, a parameter or a node id)."""
    model = explorer.model
    decoder = "decoder" in path.split(".")
    return Context(explorer.sequences, is_attention_source(model, path), decoder)


def views_of(tensor: torch.Tensor, context: Context) -> list[str]:
    """The views that fit ``tensor`` from the place ``context`` describes, the default first."""
    return tensor_views(tuple(tensor.shape), attention=context.attention, sequences=context.sequences)


def sequence_labels(tensor: torch.Tensor, view: str, context: Context) -> tuple[list[str] | None, list[str] | None]:
    """(labels of the sequence axis — the queries in ``heads`` —, labels of the keys) of item 0 for ``view``."""
    sequences, shape = context.sequences, tuple(tensor.shape)
    if view == "heads":
        queries = sequences.labels(shape[-2], 0, context.decoder)
        # Keys of a cross-attention (T_k ≠ T_q) are the encoder's tokens.
        keys = queries if shape[-1] == shape[-2] else sequences.labels(shape[-1], 0, decoder=False)
        return queries, keys
    if view == "tokens":
        axis = sequence_axis(shape, sequences)
        return (sequences.labels(shape[axis], 0, context.decoder) if axis is not None else None), None
    return None, None


def scales_of(view: str) -> list[str]:
    """The colour scales the page offers for ``view`` (empty: none to choose)."""
    return list(ATTENTION_SCALES) if view == "heads" else []


def draw(
    tensor: torch.Tensor,
    view: str,
    *,
    name: str,
    title: str,
    gradient: bool,
    context: Context,
    head: int | None = None,
    scale: str | None = None,
) -> Figure:
    """The figure of ``tensor`` (named ``name``) in ``view``; gradients on a scale centred on zero; ``scale``: one of
    ``scales_of(view)`` (None: its default)."""
    from ..plots import (  # matplotlib only when drawing
        attention_heads_figure,
        bars_figure,
        feature_map_figure,
        gradient_map_figure,
        histogram_figure,
        patch_grid_figure,
        token_map_figure,
    )
    from ..plots._common import NO_VALUES, empty_figure

    if tensor.is_meta:  # a model built empty: shapes, and no values to draw
        return empty_figure(title, tensor.shape, NO_VALUES)
    if view == "histogram":
        return histogram_figure({name: tensor}, title=title)
    if view == "heads":
        queries, keys = sequence_labels(tensor, view, context)
        scale = scale if scale is not None else ATTENTION_SCALES[0]
        return attention_heads_figure(tensor, queries, heads=head, title=title, key_tokens=keys, scale=scale)
    if view == "tokens":
        axis = sequence_axis(tuple(tensor.shape), context.sequences)
        if axis is None:  # views_of offers "tokens" only with a sequence axis
            raise ValueError(f"the tokens view needs an axis of a known sequence length; {list(tensor.shape)} has none")
        labels, _ = sequence_labels(tensor, view, context)
        return token_map_figure(tensor.movedim(axis, 1), labels, title=title, diverging=gradient)
    if view == "patches":
        first = context.sequences.patch_tokens(tensor.shape[1])
        return patch_grid_figure(tensor, class_token=first or 0, grid=context.sequences.grid, title=title)
    if view == "bars":
        values = tensor[0] if tensor.dim() == 2 else tensor.reshape(-1)
        return bars_figure(values, title=title, diverging=gradient)
    return (gradient_map_figure if gradient else feature_map_figure)(tensor, title=title)
