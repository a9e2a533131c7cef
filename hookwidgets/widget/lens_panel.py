"""The logit-lens panel: each block's residual read as next-token predictions, a layers × positions table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..core.display import display_name
from ..core.explorer import Explorer
from ..core.model.blocks import output_embedding
from ..core.model.inputs import token_ids
from .protocol import Lens

MAX_POSITIONS = 64
"""Columns the table shows at most: the last ones, where a language model's predictions are read."""
DEFAULT_TOP_K = 5


def lens_offer(explorer: Explorer) -> Lens:
    """The panel before any lens: shown when the example inputs hold token ids and the model has an output
    embedding to read the blocks through; else hidden, with the reason."""
    reason = ""
    if explorer.example_inputs is None or token_ids(explorer.example_inputs) is None:
        reason = "the logit lens reads token predictions: it needs example inputs holding token ids"
    elif output_embedding(explorer.model) is None:
        reason = (
            f"{display_name(type(explorer.model).__name__)} declares no output embedding to read its blocks through"
        )
    return {
        "available": not reason,
        "reason": reason,
        "layers": [],
        "positions": [],
        "first": 0,
        "top_k": DEFAULT_TOP_K,
        "cells": [],
        "answers": [],
        "answer_probs": [],
        "answer_ranks": [],
        "answer_first": [],
        "floor": 0.0,
        "edits": "",
        "caption": "",
        "error": "",
    }


def lens_payload(explorer: Explorer, top_k: Any = DEFAULT_TOP_K) -> Lens:
    """The ``lens`` traitlet after one ``ex.logit_lens()`` of the example inputs: the first item's top tokens and
    their probabilities at each block and position (the last ``MAX_POSITIONS`` positions of a long input)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= 20:
        raise ValueError(f"the widget sent the lens top_k {top_k!r}; expected an integer from 1 to 20")
    lens = explorer.logit_lens(None, top_k=top_k)
    ids, probs = lens["ids"][:, 0], lens["probs"][:, 0]  # (L, T, k): the first item
    length = ids.shape[1]
    first = max(0, length - MAX_POSITIONS)
    names = lens.get("labels")
    ids_list, probs_list = ids[:, first:].tolist(), probs[:, first:].tolist()
    cells = [
        [
            [
                [_label(names, row, first + t, j, token_id), prob]
                for j, (token_id, prob) in enumerate(zip(i, p, strict=True))
            ]
            for t, (i, p) in enumerate(zip(row_ids, row_probs, strict=True))
        ]
        for row, (row_ids, row_probs) in enumerate(zip(ids_list, probs_list, strict=True))
    ]
    floor = 1 / max(2, lens["vocab"])  # a uniform guess: no colour, whatever the vocabulary's size
    ranks = lens["answer_ranks"][:, 0, first:]  # (L, T shown): the final answer's rank at each layer
    top1 = (ranks == 1).int()
    positions = _position_labels(explorer, length)[first:]
    shown = f"positions {first}–{length - 1} of {length}" if first else f"{length} positions"
    return {
        **lens_offer(explorer),
        "layers": [display_name(layer) for layer in lens["layers"]],
        "positions": positions,
        "first": first,
        "top_k": top_k,
        "cells": cells,
        "answers": [position[0][0] for position in cells[-1]],  # the output row's top-1: the model's final answer
        "answer_probs": lens["answer_probs"][:, 0, first:].tolist(),
        "answer_ranks": ranks.tolist(),
        "answer_first": top1.argmax(0).tolist(),  # the output row is always its own top-1, so one row is found
        "floor": floor,
        "edits": lens.get("edits", ""),
        "caption": (
            f"top-{top_k} next tokens read at each block (item 0, {shown}); the last row is the model's own; "
            f"colour: the top token's probability on a log scale from a uniform guess over {lens['vocab']:,} tokens "
            f"({_percent(floor)}, no colour) to 100%; outlined: the layer where the model's final answer first "
            "becomes the top token"
        ),
    }


def _percent(p: float) -> str:
    """A probability in percent, 3 significant digits: ``0.00199%`` for 1 / 50,257."""
    return f"{p * 100:.3g}%"


def _label(names: Any, row: int, position: int, rank: int, token_id: int) -> str:
    """A predicted token's label: the tokenizer's string when the lens has labels, else ``#id``."""
    return str(names[row][0][position][rank]) if names is not None else f"#{token_id}"


def _position_labels(explorer: Explorer, length: int) -> list[str]:
    """The input tokens naming the columns: the example's labels, else the ids (``#id``) of the input whose length
    the lens rows have (an encoder-decoder's lens reads decoder positions), else the positions' numbers."""
    labels = explorer.sequences.labels(length)
    if labels is not None:
        return [str(label) for label in labels]
    inputs = explorer.example_inputs
    sides = [inputs.get(key) for key in ("decoder_input_ids", "input_ids")] if isinstance(inputs, Mapping) else []
    for ids in [*sides, token_ids(inputs) if inputs is not None else None]:
        if isinstance(ids, torch.Tensor) and ids.dim() == 2 and ids.shape[1] == length:
            return [f"#{i}" for i in ids[0].tolist()]
    return [str(t) for t in range(length)]
