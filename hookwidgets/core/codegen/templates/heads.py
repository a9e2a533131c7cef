"""Head ablation in the generated code: zero heads' slices of an attention's context before its output projection."""

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

# --- generated code ---


def _zero_heads(context: torch.Tensor, heads: Sequence[int], dim: int) -> torch.Tensor:
    """context (..., heads * dim) with the given heads' slices of its last dim zeroed."""
    mask = torch.ones(context.shape[-1], dtype=context.dtype, device=context.device)
    for h in heads:
        mask[h * dim : (h + 1) * dim] = 0
    return context * mask


def _zero_heads_first(output: torch.Tensor | tuple[Any, ...], heads: Sequence[int], dim: int) -> Any:
    """A module's output whose first element is the context (BERT's attention.self), those heads zeroed."""
    if isinstance(output, torch.Tensor):
        return _zero_heads(output, heads, dim)
    return (_zero_heads(output[0], heads, dim), *output[1:])


def _mha_without_heads(module: nn.MultiheadAttention, args: Any, kwargs: dict[str, Any], heads: Sequence[int]) -> Any:
    """nn.MultiheadAttention run again with out_proj's columns for those heads zeroed: the context's slices zeroed."""
    from torch.nn.utils.stateless import _reparametrize_module  # torch.func.functional_call's own context

    weight = module.out_proj.weight
    masked = _zero_heads(weight, heads, module.head_dim)  # the weight's input columns, one slice per head
    with _reparametrize_module(module, {"out_proj.weight": masked}):
        return module.forward(*args, **kwargs)
