"""A sequence model's residual blocks and the projection from its residual stream to logits (final norm, unembedding).

Found by structure, not by name: the blocks are the last outermost ``nn.ModuleList`` whose items share one type
(GPT-2's ``transformer.h``, Llama's ``model.layers``, an encoder-decoder's decoder layers); the unembedding is
``model.get_output_embeddings()``, as transformers models declare it. What runs between them (a final norm, a
projection) is found in a forward, by ``tail``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

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
            found = BlockStack(path, cast(nn.ModuleList, module), owner)  # a stack is a ModuleList
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


def output_embedding(model: nn.Module) -> nn.Module | None:
    """The module the model declares as its output embedding (``get_output_embeddings()``, as transformers language
    models do; a quantized Linear too); None when it declares none."""
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    return head if isinstance(head, nn.Module) else None
