"""A small vision transformer on the bundled digits: 4×4 patches, a class token, attention weights hookable.

Each block's softmax is a module (``blocks.N.attn.softmax``), so a forward hook there captures the attention
weights ``(N, heads, 65, 65)``. Trains in seconds on a CPU; nothing is downloaded.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .cache import cached_model
from .digits import IMAGE_SIZE, recipe_with, train_on_digits

PATCH = 4
GRID = IMAGE_SIZE // PATCH  # 8×8 patches, plus the class token: 65 tokens


class Attention(nn.Module):
    """Multi-head self-attention written out, so the softmax over keys is a module of its own."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        """The number of heads."""
        self.qkv = nn.Linear(dim, 3 * dim)
        """Queries, keys and values in one Linear."""
        self.softmax = nn.Softmax(dim=-1)
        """The softmax over keys, a module: a forward hook here captures the attention weights."""
        self.proj = nn.Linear(dim, dim)
        """The output projection."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, tokens, dim = x.shape
        q, k, v = self.qkv(x).reshape(n, tokens, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        weights = self.softmax(q @ k.transpose(-2, -1) * (dim // self.heads) ** -0.5)
        return self.proj((weights @ v).transpose(1, 2).reshape(n, tokens, dim))


class Block(nn.Module):
    """Pre-norm transformer block: attention and an MLP, each with a residual."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        """The norm before attention."""
        self.attn = Attention(dim, heads)
        """The attention."""
        self.norm2 = nn.LayerNorm(dim)
        """The norm before the MLP."""
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        """The MLP."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DigitsViT(nn.Module):
    """Patch embedding (a strided conv), class token, position embedding, two blocks, a head on the class token."""

    def __init__(self, dim: int = 32, heads: int = 4, depth: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.patch = nn.Conv2d(1, dim, PATCH, stride=PATCH)
        """The patch embedding, a strided conv: 4×4 patches, an 8×8 grid."""
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        """The class token."""
        self.pos = nn.Parameter(torch.randn(1, 1 + GRID * GRID, dim) * 0.02)
        """The position embedding."""
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(depth)))
        """The transformer blocks (``Block``)."""
        self.norm = nn.LayerNorm(dim)
        """The final norm."""
        self.head = nn.Linear(dim, classes)
        """The classifier, on the class token."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls_token.expand(len(x), -1, -1), tokens], dim=1) + self.pos
        return self.head(self.norm(self.blocks(tokens))[:, 0])


VIT_RECIPE: dict[str, Any] = {
    "revision": 1,
    "optimizer": "AdamW",
    "lr": 4e-3,
    "epochs": 4,
    "seed": 0,
    "digits": 1500,
    "batch": 64,
}
"""Everything the DigitsViT's trained weights depend on but its code: the cache file is keyed by it."""


def train_digits_vit(epochs: int | None = None, seed: int | None = None) -> DigitsViT:
    """Train a DigitsViT on the first 1,500 digits in seconds on one CPU thread, leaving the global RNG and thread
    count untouched; ``epochs`` and ``seed`` default to ``VIT_RECIPE``'s."""
    return train_on_digits(DigitsViT, recipe_with(VIT_RECIPE, epochs=epochs, seed=seed))


def pretrained_digits_vit(cache: bool = True) -> DigitsViT:
    """A trained DigitsViT in eval mode, trained on first use and cached on disk after (keyed by ``VIT_RECIPE``)."""
    return cached_model("digits_vit", DigitsViT, lambda: train_on_digits(DigitsViT, VIT_RECIPE), cache, VIT_RECIPE)
