"""A sequence model's residual blocks and the projection from its residual stream to logits (final norm, unembedding).

Found by structure, not by name: the blocks are the last outermost ``nn.ModuleList`` whose items share one type
(GPT-2's ``transformer.h``, Llama's ``model.layers``, an encoder-decoder's decoder layers); the final norm is the
last child of that list's owner, registered after it, whose parameters are all ``(hidden,)`` vectors (LayerNorm,
RMSNorm); the unembedding is ``model.get_output_embeddings()``, as transformers models declare it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

Unembed = Callable[[torch.Tensor], torch.Tensor]


def decoder_blocks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``[(path, block), …]`` of the model's block stack, in order; a ValueError when it holds no such list."""
    found = _block_list(model)
    if found is None:
        raise ValueError(
            f"{type(model).__name__} holds no nn.ModuleList of blocks of one type (as a transformer's layers), "
            "so there are no blocks to use: pass layers=[module path, …]"
        )
    path, blocks = found
    return [(f"{path}.{i}" if path else str(i), block) for i, block in enumerate(blocks)]


def _block_list(model: nn.Module) -> tuple[str, nn.ModuleList] | None:
    lists = [
        (path, module)
        for path, module in model.named_modules()
        if isinstance(module, nn.ModuleList) and len(module) and len({type(m) for m in module}) == 1
    ]
    # A list inside a block (a mixture of experts' experts) is part of that block, not a stack of its own.
    outer = [(p, m) for p, m in lists if not any(p.startswith(f"{q}.") for q, _ in lists if q)]
    return outer[-1] if outer else None


def final_projection(model: nn.Module) -> Unembed | None:
    """``hidden -> logits`` through the model's final norm (when it has one) and output embedding; None when the
    model declares no output embedding (``get_output_embeddings()``, as transformers language models do)."""
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    weight = getattr(head, "weight", None)
    if not isinstance(head, nn.Module) or not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        return None
    norm = final_norm(model, weight.shape[1])
    if norm is None:
        return head
    return lambda hidden: head(norm(hidden))


def final_norm(model: nn.Module, width: int) -> nn.Module | None:
    """The norm applied after the block stack: the last child of the stack's owner, registered after the stack,
    whose parameters are all vectors of ``width``; None when there is none."""
    found = _block_list(model)
    if found is None:
        return None
    path, stack = found
    owner = model.get_submodule(path.rpartition(".")[0]) if "." in path else model
    after, norm = False, None
    for child in owner.children():
        if child is stack:
            after = True
        elif after and _is_norm(child, width):
            norm = child
    return norm


def _is_norm(module: nn.Module, width: int) -> bool:
    params = list(module.parameters())
    return bool(params) and all(p.dim() == 1 and p.shape[0] == width for p in params)
