"""The patching panel's clean and corrupted boxes: whether a sweep can start from the page, what the boxes hold at
first, and their text as model inputs shaped as the example inputs are (text through the tokenizer, else token ids)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..core.explorer import Explorer
from ..core.model.blocks import decoder_blocks
from ..core.model.inputs import token_ids

TEXT_KEYS = ("input_ids", "attention_mask", "token_type_ids")
"""What a tokenizer makes of a text; example inputs holding anything else are not rebuilt from the boxes."""
METRIC_CHOICES = ("recovered", "logit_diff")
"""The metrics the page offers (``patch_metrics.METRICS``), the first its default."""


@dataclass(frozen=True)
class Boxes:
    """What the page's boxes start with: ``mode`` ("text": the tokenizer reads them; "ids": token ids apart by spaces),
    the clean and corrupted contents, the corrupted box's hint; ``reason`` says why no sweep starts from the page
    ("" when one can)."""

    reason: str = ""
    mode: str = "ids"
    clean: str = ""
    corrupted: str = ""
    hint: str = ""


def boxes(explorer: Explorer) -> Boxes:
    """The boxes of ``explorer``'s panel: a sweep starts from the page for a model fed token ids, with a stack of
    blocks and scores to read, given example inputs; the clean box holds the example's first item."""
    example = explorer.example_inputs
    ids = token_ids(example) if example is not None else None
    if example is None or ids is None:
        return Boxes(reason="activation patching from the page needs example inputs holding token ids (N, T)")
    extra = sorted(set(example) - set(TEXT_KEYS)) if isinstance(example, Mapping) else []
    if extra:
        return Boxes(
            reason=f"the example inputs hold {', '.join(map(repr, extra))} beside the token ids, which the page's "
            "boxes cannot fill: call ex.patch_sweep(clean, corrupted) from Python"
        )
    try:
        decoder_blocks(explorer.model)
    except ValueError as exc:
        return Boxes(reason=f"no layers to patch: {exc}")
    output = explorer.probe_output
    if output.get("probe_failed"):  # no scores known because the probe raised, not because the output has none
        return Boxes(reason=f"{output['probe_failed']}: the metric reads the output's scores, which it could not find")
    if output["kind"] not in ("sequence", "classes"):
        return Boxes(reason="the example inputs' output holds no class or token scores for the metric to read")
    text = _text_tokenizer(explorer)
    first = ids[0].tolist()
    corrupted = ids[1].tolist() if ids.shape[0] > 1 else None  # a second example item: a recorded corrupted input
    if text is not None:
        decode = getattr(text, "decode", None)
        if callable(decode):
            return Boxes(
                mode="text",
                clean=str(decode(first)),
                corrupted=str(decode(corrupted)) if corrupted is not None else "",
                hint="the clean text with one word changed, as many tokens (e.g. cat → dog)",
            )
    return Boxes(
        mode="ids",
        clean=" ".join(map(str, first)),
        corrupted=" ".join(map(str, corrupted)) if corrupted is not None else "",
        hint="the clean token ids with one changed, as many ids, apart by spaces",
    )


def page_inputs(explorer: Explorer, clean: Any, corrupted: Any) -> tuple[Any, Any]:
    """The boxes' ``clean`` and ``corrupted`` contents as model inputs shaped as the example inputs; a ValueError
    naming both lengths and the fix when they differ in length."""
    offer = boxes(explorer)
    if offer.reason:
        raise ValueError(offer.reason)
    made = [_encoded(explorer, offer.mode, clean, "clean"), _encoded(explorer, offer.mode, corrupted, "corrupted")]
    lengths = [int(m["input_ids"].shape[1]) for m in made]
    if lengths[0] != lengths[1]:
        unit = "tokens" if offer.mode == "text" else "ids"
        fix = (
            "change the corrupted text so the tokenizer makes as many tokens (swap a word for one that is one token)"
            if offer.mode == "text"
            else "give as many ids in both"
        )
        raise ValueError(
            f"the clean input is {lengths[0]} {unit} and the corrupted input {lengths[1]}: patching swaps activations "
            f"position by position, so both need the same length; {fix}"
        )
    example = explorer.example_inputs
    return _like(example, made[0]), _like(example, made[1])


def _text_tokenizer(explorer: Explorer) -> Any:
    """The explorer's tokenizer when it turns text into ids (callable, as a transformers tokenizer is); else None."""
    tokenizer = explorer.sequences.tokenizer
    return tokenizer if callable(tokenizer) else None


def _encoded(explorer: Explorer, mode: str, value: Any, which: str) -> dict[str, torch.Tensor]:
    """One box's content as ``{"input_ids": (1, T), …}`` on the example ids' device and dtype."""
    if not isinstance(value, str) or not value.strip():
        what = "text" if mode == "text" else "token ids apart by spaces"
        raise ValueError(f"the {which} box is empty: type the {which} input ({what})")
    example = explorer.example_inputs
    ids = token_ids(example) if example is not None else None
    assert ids is not None  # boxes() offered the panel only with token ids
    if mode == "text":
        encoded = _text_tokenizer(explorer)(value, return_tensors="pt")
        made = {k: encoded[k] for k in TEXT_KEYS if k in encoded}
    else:
        try:
            made = {"input_ids": torch.tensor([[int(part) for part in value.split()]])}
        except ValueError:
            raise ValueError(
                f"the {which} box holds {value!r}: type token ids, whole numbers apart by spaces (e.g. 12 7 40)"
            ) from None
    if made["input_ids"].shape[-1] == 0:
        raise ValueError(f"the tokenizer made no tokens of the {which} text {value!r}: type words it knows")
    return {k: v.to(ids.device, ids.dtype if k == "input_ids" else v.dtype) for k, v in made.items()}


def _like(example: Any, made: dict[str, torch.Tensor]) -> Any:
    """``made`` in the example inputs' form: the keys the example has (a Mapping), else the ids alone."""
    if isinstance(example, Mapping):
        return {k: made[k] for k in example if k in made} | {"input_ids": made["input_ids"]}
    if isinstance(example, (tuple, list)):
        return (made["input_ids"],)
    return made["input_ids"]
