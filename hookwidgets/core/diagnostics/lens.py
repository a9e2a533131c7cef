"""The logit lens: each block's residual output read through the model's final norm and unembedding, top-k per token."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..model.blocks import Unembed, block_stack, decoder_blocks, final_projection
from ..model.inputs import Inputs, call_model
from ..model.meta import no_values
from ..model.nested import first_tensor
from ..model.scores import output_scores

NO_UNEMBED = (
    "{model} declares no output embedding (get_output_embeddings()), so the logit lens cannot read its blocks: "
    "pass unembed=callable(hidden) -> logits (the final norm, then the unembedding)"
)


def logit_lens(model: nn.Module, inputs: Inputs, *, top_k: int = 5, unembed: Unembed | None = None) -> dict[str, Any]:
    """``{"layers", "ids", "probs"}`` of one forward: a row per block (in the order they ran), then ``"output"`` (the
    model's own logits); ``ids`` and ``probs`` are ``(L, N, T, top_k)``. Runs as called: no grad mode, no state kept."""
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    stack = block_stack(model)  # one walk, for the final norm and the blocks
    project = unembed if unembed is not None else final_projection(model, stack)
    if project is None:
        raise ValueError(NO_UNEMBED.format(model=type(model).__name__))
    rows: list[tuple[str, torch.Tensor, torch.Tensor]] = []

    def read(path: str) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            hidden = first_tensor(output)
            if hidden is not None:  # top-k kept, the (N, T, vocabulary) logits let go at once
                rows.append((path, *_top(project(hidden), top_k)))

        return hook

    handles = [block.register_forward_hook(read(path)) for path, block in decoder_blocks(model, stack)]
    try:
        output = call_model(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    logits = output_scores(output).tensor
    if logits.is_meta:  # so are the blocks' rows: no top tokens to rank
        raise ValueError(no_values("logit_lens()", "the model's output"))
    rows.append(("output", *_top(logits, top_k)))
    names = _numbered([path for path, _, _ in rows])
    shapes = {tuple(ids.shape) for _, ids, _ in rows}
    if len(shapes) > 1:
        described = ", ".join(f"{name} {tuple(ids.shape[:-1])}" for name, (_, ids, _) in zip(names, rows, strict=True))
        raise ValueError(f"the lens rows differ in shape, so they cannot be stacked: {described}")
    return {
        "layers": names,
        "ids": torch.stack([ids for _, ids, _ in rows]),
        "probs": torch.stack([probs for _, _, probs in rows]),
    }


def _top(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, probabilities)`` of the ``k`` likeliest tokens; softmax in float32 (half-precision models too)."""
    if k > logits.shape[-1]:
        raise ValueError(f"top_k={k} exceeds the vocabulary of {logits.shape[-1]} tokens")
    probs, ids = logits.float().softmax(-1).topk(k, dim=-1)
    return ids, probs


def _numbered(paths: list[str]) -> list[str]:
    """Paths with a module's second and later calls named ``path#2``, ``path#3``."""
    seen: dict[str, int] = {}
    names = []
    for path in paths:
        seen[path] = seen.get(path, 0) + 1
        names.append(path if seen[path] == 1 else f"{path}#{seen[path]}")
    return names
