"""Which modules compute attention: the places attention probabilities come from."""

from __future__ import annotations

from torch import nn


def is_attention_module(module: nn.Module) -> bool:
    """Whether ``module`` computes attention: ``nn.MultiheadAttention``, or a class named ``…Attention`` as
    transformers' (``GPT2Attention``, ``BertSelfAttention``, ``CLIPAttention``) and this repo's examples name them."""
    if isinstance(module, nn.MultiheadAttention):
        return True
    return type(module).__name__.endswith("Attention")
