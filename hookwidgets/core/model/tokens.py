"""What the explorer knows of its inputs' sequences: token labels, sequence lengths and a vision model's patch grid."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import torch
from torch import nn

TokenList = list[list[str]]


@dataclass(frozen=True)
class Sequences:
    """Token labels per item (encoder side and decoder side), the known sequence lengths, and the patch grid."""

    tokens: TokenList | None = None
    """One list of labels per item for the (encoder's) input sequence, or None."""
    decoder_tokens: TokenList | None = None
    """One list of labels per item for an encoder-decoder model's decoder input, or None."""
    lengths: tuple[int, ...] = ()
    """Sequence lengths the inputs have (``input_ids``' and ``decoder_input_ids``' T, a ViT's 1 + patches)."""
    grid: tuple[int, int] | None = None
    """(rows, columns) of a vision transformer's patches, from its image input and its patch embedding."""
    tokenizer: Any = field(default=None, repr=False, compare=False)
    """The ``tokenizer=`` given, which names the token ids the run bar offers as targets; None otherwise."""
    vocabulary: dict[int, str] = field(default_factory=dict, repr=False, compare=False)
    """The labels ``tokens=`` gave the ids of the example inputs, by id (what names a generated id without a
    tokenizer)."""

    def id_names(self, ids: list[int]) -> list[str] | None:
        """The tokenizer's strings for vocabulary ``ids`` (``#id`` for one it lacks); None without a tokenizer."""
        if self.tokenizer is None:
            return None
        return _convert(self.tokenizer, torch.tensor([ids], dtype=torch.long))[0] if ids else []

    def token_names(self, ids: list[int]) -> list[str] | None:
        """Labels for vocabulary ``ids``: the tokenizer's strings, else the labels ``tokens=`` gave those ids in the
        example inputs (``#id`` for others); None with neither."""
        if self.tokenizer is not None:
            return self.id_names(ids)
        if not self.vocabulary:
            return None
        return [self.vocabulary.get(i, f"#{i}") for i in ids]

    def labels(self, length: int, item: int = 0, decoder: bool = False) -> list[str] | None:
        """The labels of item ``item`` for a sequence axis of ``length`` (the decoder's first when ``decoder``); a
        vision transformer's tokens are ``CLS`` (and the others before the patches), then each patch's ``row,col``."""
        sides = (self.decoder_tokens, self.tokens) if decoder else (self.tokens, self.decoder_tokens)
        for side in sides:
            if side and len(side[min(item, len(side) - 1)]) == length:
                return side[min(item, len(side) - 1)]
        leading = self.patch_tokens(length)
        if leading is None or self.grid is None:
            return None
        columns = self.grid[1]
        before = ["CLS", *(f"token {i}" for i in range(1, leading))][:leading]
        return before + [f"{p // columns},{p % columns}" for p in range(length - leading)]

    def labels_of(self, model: nn.Module, inputs: Any, example: bool, length: int) -> list[str] | None:
        """The first item's labels of ``inputs`` (``example``: the example inputs, whose tokens are known), for a
        sequence axis of ``length``: else the tokenizer's; None when neither names them."""
        if example:
            return self.labels(length)
        if self.tokenizer is None:
            return None
        try:
            return read_sequences(model, inputs, tokenizer=self.tokenizer).labels(length)
        except ValueError:  # inputs without input_ids: nothing to label
            return None

    def ids_labels(self, ids: torch.Tensor, example: bool) -> TokenList | None:
        """The labels of token ``ids`` ``(N, T)``: the tokenizer's strings, else the example's ``tokens`` for the
        example inputs (``example``); None with neither."""
        if self.tokenizer is not None:
            return [self.id_names(row) or [] for row in ids.tolist()]
        return self.tokens if example else None

    def nested_names(self, ids: torch.Tensor) -> list[Any] | None:
        """The tokenizer's strings of any-shaped ``ids``, as nested lists of that shape; None without a tokenizer."""
        if self.tokenizer is None:
            return None
        flat: list[Any] = self.id_names(ids.flatten().tolist()) or []
        for size in reversed(ids.shape[1:]):
            flat = [flat[i : i + size] for i in range(0, len(flat), size)]
        return flat

    def patch_tokens(self, length: int) -> int | None:
        """How many tokens precede the patches in a sequence of ``length`` (``leading_tokens``), or None when
        ``length`` is not the patch grid's, or is the token ids' (a text tower's) but for a class token and patches."""
        found = leading_tokens(length, self.grid)
        if found is not None and found != 1 and length in self.lengths:
            return None  # the lengths hold the token ids' and 1 + patches: a text sequence of this length
        return found


def read_sequences(model: nn.Module, inputs: Any, tokens: Any = None, tokenizer: Any = None) -> Sequences:
    """The ``Sequences`` of ``inputs``: ``tokens`` (one list, or one per item) or ``tokenizer`` applied to the
    ``input_ids`` (and ``decoder_input_ids``) found in them; a ValueError when they do not fit the inputs."""
    if tokens is not None and tokenizer is not None:
        raise ValueError("pass tokens= or tokenizer=, not both: tokens= are the labels, tokenizer= makes them")
    if tokenizer is not None and not callable(getattr(tokenizer, "convert_ids_to_tokens", None)):
        raise TypeError(
            f"tokenizer= needs a convert_ids_to_tokens(ids) method (a transformers tokenizer has one); "
            f"got {type(tokenizer).__name__}"
        )
    ids, decoder_ids = _token_ids(inputs)
    decoder_tokens = None
    if tokenizer is not None:
        if ids is None and decoder_ids is None:
            raise ValueError(
                "tokenizer= labels the input_ids of the example inputs, and they hold none: pass example_inputs "
                "with input_ids (a dict, a tokenizer's BatchEncoding, or an integer tensor (N, T)), or tokens="
            )
        tokens = _convert(tokenizer, ids)
        decoder_tokens = _convert(tokenizer, decoder_ids)
    elif tokens is not None:
        tokens = _checked(tokens, ids)
    lengths = [t.shape[1] for t in (ids, decoder_ids) if t is not None]
    if tokens and ids is None:
        lengths.append(len(tokens[0]))
    grid = patch_grid(model, inputs)
    if grid is not None:
        lengths.append(grid[0] * grid[1] + 1)
    vocabulary: dict[int, str] = {}
    if tokens is not None and ids is not None and tokenizer is None:
        for row, labels in zip(ids.tolist(), tokens, strict=False):
            vocabulary.update(zip(row, labels, strict=False))
    return Sequences(tokens, decoder_tokens, tuple(dict.fromkeys(lengths)), grid, tokenizer, vocabulary)


def call_token_ids(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> torch.Tensor | None:
    """The token ids ``(N, T)`` of one call of the model: its ``input_ids`` keyword, else its lone integer argument."""
    ids = _token_ids(kwargs)[0] if kwargs else None
    return ids if ids is not None else _token_ids(args)[0]


def _token_ids(inputs: Any) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``(input_ids, decoder_input_ids)`` of the inputs: Mapping keys, or a lone integer tensor (N, T)."""
    if isinstance(inputs, Mapping):
        return _ids(inputs.get("input_ids")), _ids(inputs.get("decoder_input_ids"))
    if isinstance(inputs, (tuple, list)) and len(inputs) == 1:
        inputs = inputs[0]
    return _ids(inputs), None


def _ids(value: Any) -> torch.Tensor | None:
    """``value`` if it is an integer tensor of token ids ``(N, T)`` (``(T,)`` taken as one item), else None."""
    if not isinstance(value, torch.Tensor) or value.is_floating_point() or value.is_complex():
        return None
    if value.dtype == torch.bool or value.dim() not in (1, 2):
        return None
    return value[None] if value.dim() == 1 else value


@overload
def _convert(tokenizer: Any, ids: torch.Tensor) -> TokenList: ...
@overload
def _convert(tokenizer: Any, ids: torch.Tensor | None) -> TokenList | None: ...
def _convert(tokenizer: Any, ids: torch.Tensor | None) -> TokenList | None:
    if ids is None:
        return None
    if ids.is_meta:
        raise ValueError(
            "tokenizer= labels the input_ids of the example inputs, but they are on the meta device (no values): pass "
            "them on the CPU (a model on the meta device runs them on meta all the same), or tokens="
        )
    labelled: TokenList = []
    for row in ids.tolist():
        names = tokenizer.convert_ids_to_tokens(row)
        # An id the vocabulary lacks comes back as None: labelled by its number instead.
        labelled.append([f"#{i}" if t is None else str(t) for i, t in zip(row, names, strict=True)])
    return labelled


def _checked(tokens: Any, ids: torch.Tensor | None) -> TokenList:
    """``tokens`` as one list per item, checked against the shape of the ``input_ids``."""
    if isinstance(tokens, str) or not isinstance(tokens, Sequence) or not tokens:
        raise TypeError(
            f"tokens= takes a list of strings (one sequence) or one list per item, got {type(tokens).__name__}"
        )
    if all(isinstance(t, str) for t in tokens):
        per_item = [list(tokens)] * (ids.shape[0] if ids is not None else 1)
    elif all(isinstance(t, Sequence) and not isinstance(t, str) for t in tokens):
        per_item = [[str(t) for t in row] for row in tokens]
        if ids is not None and len(per_item) != ids.shape[0]:
            raise ValueError(
                f"tokens= has {len(per_item)} lists but the input_ids hold {ids.shape[0]} items: "
                "pass one list per item, or one list for all"
            )
    else:
        raise TypeError("tokens= takes a list of strings (one sequence) or one list of strings per item, not a mix")
    length = ids.shape[1] if ids is not None else len(per_item[0])
    for item, row in enumerate(per_item):
        if len(row) != length:
            what = "the input_ids have" if ids is not None else "the first list has"
            raise ValueError(
                f"tokens= for item {item} has {len(row)} tokens but {what} {length}: give one label per token"
            )
    return per_item


def patch_grid(model: nn.Module, inputs: Any) -> tuple[int, int] | None:
    """(rows, columns) of patches a vision transformer makes of its image input: the first ``Conv2d`` whose stride
    equals its kernel (a patch embedding) applied to the first image ``(N, C, H, W)`` of the inputs; else None."""
    image = _first_image(inputs)
    if image is None:
        return None
    for module in model.modules():
        if isinstance(module, nn.Conv2d) and module.kernel_size == module.stride and max(module.kernel_size) > 1:
            (kh, kw), (h, w) = module.kernel_size, image.shape[-2:]
            return (h // kh, w // kw) if h >= kh and w >= kw else None
    return None


def leading_tokens(length: int, grid: tuple[int, int] | None) -> int | None:
    """How many tokens precede a vision transformer's patches in a sequence of ``length``: ``length`` minus the
    patches of ``grid`` (a class token, a distillation token, register tokens), fewer than the patches; else None."""
    if grid is None:
        return None
    patches = grid[0] * grid[1]
    extra = length - patches
    return extra if 0 <= extra < patches else None


def _first_image(inputs: Any) -> torch.Tensor | None:
    values = (
        inputs.values() if isinstance(inputs, Mapping) else inputs if isinstance(inputs, (tuple, list)) else [inputs]
    )
    for value in values:
        if isinstance(value, torch.Tensor) and value.dim() == 4 and value.is_floating_point():
            return value
    return None


def is_square(count: int) -> bool:
    """Whether ``count`` patches fill a square grid."""
    return count > 0 and math.isqrt(count) ** 2 == count
