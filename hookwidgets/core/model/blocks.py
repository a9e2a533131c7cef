"""A sequence model's residual blocks and the projection from its residual stream to logits (final norm, unembedding).

Found by structure, not by name: the blocks are the last outermost ``nn.ModuleList`` whose items share one type
(GPT-2's ``transformer.h``, Llama's ``model.layers``, an encoder-decoder's decoder layers); the final norm is the
last child of that list's owner, registered after it, whose parameters are all ``(hidden,)`` vectors (LayerNorm,
RMSNorm); the unembedding is ``model.get_output_embeddings()``, as transformers models declare it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

Unembed = Callable[[torch.Tensor], torch.Tensor]


class BlockStack(NamedTuple):
    """The model's block stack: the list's path, the list, and the module that holds it."""

    path: str
    blocks: nn.ModuleList
    owner: nn.Module


def block_stack(model: nn.Module) -> BlockStack | None:
    """The last outermost ``nn.ModuleList`` whose items share one type, in ``named_modules()`` order (a list inside
    another, as a mixture of experts' experts inside a block, is part of that block); None when there is none."""
    found: BlockStack | None = None
    seen: set[int] = set()

    def visit(module: nn.Module, path: str, owner: nn.Module, inside: bool) -> None:
        nonlocal found
        seen.add(id(module))  # a module met twice keeps its first path, as in named_modules()
        stack = isinstance(module, nn.ModuleList) and len(module) > 0 and len({type(m) for m in module}) == 1
        if stack and not inside:
            found = BlockStack(path, module, owner)
        inside = inside or (stack and bool(path))  # a model that is itself a list hides no list of its items
        for name, child in module._modules.items():
            if child is not None and id(child) not in seen:
                visit(child, f"{path}.{name}" if path else name, module, inside)

    visit(model, "", model, False)
    return found


def decoder_blocks(model: nn.Module, stack: BlockStack | None = None) -> list[tuple[str, nn.Module]]:
    """``[(path, block), …]`` of the model's block stack (``stack``: found already), in order; a ValueError when it
    holds no such list."""
    found = stack if stack is not None else block_stack(model)
    if found is None:
        raise ValueError(
            f"{type(model).__name__} holds no nn.ModuleList of blocks of one type (as a transformer's layers), "
            "so there are no blocks to use: pass layers=[module path, …]"
        )
    path = found.path
    return [(f"{path}.{i}" if path else str(i), block) for i, block in enumerate(found.blocks)]


def final_projection(model: nn.Module, stack: BlockStack | None = None) -> Unembed | None:
    """``hidden -> logits`` through the model's final norm (when it has one) and output embedding; None when the
    model declares no output embedding (``get_output_embeddings()``, as transformers language models do)."""
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    weight = getattr(head, "weight", None)
    if not isinstance(head, nn.Module) or not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        return None
    norm = final_norm(model, weight.shape[1], stack)
    if norm is None:
        return head
    return lambda hidden: head(norm(hidden))


def final_norm(model: nn.Module, width: int, stack: BlockStack | None = None) -> nn.Module | None:
    """The norm applied after the block stack: the last child of the stack's owner, registered after the stack,
    whose parameters are all vectors of ``width``; None when there is none."""
    found = stack if stack is not None else block_stack(model)
    if found is None:
        return None
    after, norm = False, None
    for child in found.owner.children():
        if child is found.blocks:
            after = True
        elif after and _is_norm(child, width):
            norm = child
    return norm


def _is_norm(module: nn.Module, width: int) -> bool:
    params = list(module.parameters())
    return bool(params) and all(p.dim() == 1 and p.shape[0] == width for p in params)
