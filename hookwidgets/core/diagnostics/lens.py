"""The logit lens: each block's residual output read as the model reads its last block's, top-k per token."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, cast

import torch
from torch import nn

from ..display import quoted
from ..model.after_head import AfterHead
from ..model.blocks import Unembed, block_stack, decoder_blocks, output_embedding
from ..model.inputs import Inputs, call_model
from ..model.meta import no_values
from ..model.scores import output_scores
from ..model.tail import TailTrace

NO_UNEMBED = (
    "{model} declares no output embedding (get_output_embeddings()), so the logit lens cannot read its blocks: "
    "pass unembed=callable(hidden) -> logits (the final norm, then the unembedding)"
)


class LogitLens(TypedDict):
    """What ``logit_lens()`` returns: a row per block, in the order they ran, then ``"output"``."""

    layers: list[str]
    """The blocks' paths (a second call of one: ``path#2``), then ``"output"``, the model's own logits."""
    ids: torch.Tensor
    """The top-k token ids of each row, ``(L, N, T, top_k)``, likeliest first."""
    probs: torch.Tensor
    """Their probabilities, ``(L, N, T, top_k)``, in float32."""
    answer_probs: torch.Tensor
    """The probability of the model's final answer at each position (the ``"output"`` row's top-1 there) in every
    row, ``(L, N, T)``, float32: how likely the answer is at each layer."""
    answer_ranks: torch.Tensor
    """That answer's rank in every row, ``(L, N, T)``, int64: 1 where it is the row's top-1."""
    vocab: int
    """The size of the vocabulary read (the logits' last dim): ``1 / vocab`` is a uniform guess's probability."""
    labels: NotRequired[list[Any]]
    """The ids' strings, nested lists of the ids' shape: only when the explorer was given a tokenizer."""
    edits: NotRequired[str]
    """Whether the run had the user's edits, in one sentence (``edits_note``; "" when none is attached): set by
    ``Explorer.logit_lens``."""


def logit_lens(model: nn.Module, inputs: Inputs, *, top_k: int = 5, unembed: Unembed | None = None) -> LogitLens:
    """``{"layers", "ids", "probs"}`` of one forward: a row per block (in the order they ran), then ``"output"`` (the
    model's own logits); ``ids`` and ``probs`` are ``(L, N, T, top_k)``. Each block's output is read through what the
    forward ran between the last block and the output embedding (``tail``), then that embedding; ``unembed``
    replaces both. Runs as called: no grad mode, no state kept."""
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    head = None if unembed is not None else output_embedding(model)
    if unembed is None and head is None:  # said before the blocks: the lens takes no layers=, which they would ask for
        raise ValueError(NO_UNEMBED.format(model=type(model).__name__))
    blocks = decoder_blocks(model, block_stack(model))
    with TailTrace(model, blocks, head) as trace:
        output = call_model(model, inputs)
    logits = output_scores(output).tensor
    if logits.is_meta:  # so are the blocks' rows: no top tokens to rank
        raise ValueError(no_values("logit_lens()", "the model's output"))
    # head is None only with an unembed (checked above)
    project = unembed if unembed is not None else _through(model, inputs, cast(nn.Module, head), trace, logits)
    # top-k kept per row, its (N, T, vocabulary) logits let go at once
    answer = logits.argmax(-1, keepdim=True)  # the final answer at each position, (N, T, 1)
    rows = [(path, *_top(project(hidden), top_k, answer)) for path, hidden in trace.rows]
    rows.append(("output", *_top(logits, top_k, answer)))
    names = _numbered([path for path, *_ in rows])
    shapes = {tuple(row[1].shape) for row in rows}
    if len(shapes) > 1:
        described = ", ".join(f"{name} {tuple(row[1].shape[:-1])}" for name, row in zip(names, rows, strict=True))
        raise ValueError(f"the lens rows differ in shape, so they cannot be stacked: {described}")
    return {
        "layers": names,
        "ids": torch.stack([row[1] for row in rows]),
        "probs": torch.stack([row[2] for row in rows]),
        "answer_probs": torch.stack([row[3] for row in rows]),
        "answer_ranks": torch.stack([row[4] for row in rows]),
        "vocab": int(logits.shape[-1]),
    }


def _through(model: nn.Module, inputs: Inputs, head: nn.Module, trace: TailTrace, logits: torch.Tensor) -> Unembed:
    """``hidden -> logits``: the tail the forward ran after its last block, the head, then what the forward did to
    the head's output before returning ``logits`` (each checked on a forward: that one recorded by a second forward,
    only for a model that changes the head's output)."""
    name = next((quoted(path) for path, module in model.named_modules() if module is head), type(head).__name__)
    tail = trace.tail(name)
    after = None
    if not trace.head_untouched(logits):
        with AfterHead(head) as recorder:
            again = call_model(model, inputs)
        after = recorder.replay(output_scores(again).tensor, name)

    def project(hidden: torch.Tensor) -> torch.Tensor:
        read = head(tail(hidden))
        return read if after is None else after(read)

    return project


def _top(
    logits: torch.Tensor, k: int, answer: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids, probabilities)`` of the ``k`` likeliest tokens, then the probability and rank (1: top) of ``answer``
    ``(N, T, 1)`` at each position; softmax in float32 (half-precision models too)."""
    if k > logits.shape[-1]:
        raise ValueError(f"top_k={k} exceeds the vocabulary of {logits.shape[-1]} tokens")
    full = logits.float().softmax(-1)
    probs, ids = full.topk(k, dim=-1)
    if full.shape[:-1] != answer.shape[:-1]:  # a row of another shape: said by the caller, which cannot stack it
        return ids, probs, probs[..., 0], ids[..., 0]
    chosen = full.gather(-1, answer)  # ties share the better rank, as in topk's order of equal values
    ranks = (full > chosen).sum(-1) + 1
    return ids, probs, chosen.squeeze(-1), ranks


def _numbered(paths: list[str]) -> list[str]:
    """Paths with a module's second and later calls named ``path#2``, ``path#3``."""
    seen: dict[str, int] = {}
    names = []
    for path in paths:
        seen[path] = seen.get(path, 0) + 1
        names.append(path if seen[path] == 1 else f"{path}#{seen[path]}")
    return names
