"""A 2-layer attention-only transformer trained in seconds to copy repeated token segments: an induction head forms.

Trained on segments of varying length and offset inside random tokens (with a fixed period a positional head
would solve the task without induction), the loss on the repeated positions only. The first layer has 4 heads, the
second one: with 4 heads there, all 4 learned to copy and no single head's ablation stopped it; with one, the
induction mechanism is one head to find and ablate. Plain torch: ``nn.MultiheadAttention`` heads, which
``attention()`` and ``("ablate_heads", …)`` find; no download, no ``transformers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .cache import cached_model
from .digits import one_thread

CONSONANTS = "bdfgklmnprstvwxz"
VOWELS = "aeio"
VOCAB = len(CONSONANTS) * len(VOWELS)
"""64 tokens, each a readable syllable (``ba``, ``be``, … ``zo``)."""
CONTEXT = 64
"""The longest sequence the model takes (its learned positions)."""
WIDTH = 64
LAYER_HEADS = (4, 1)
"""Heads per layer: 4 in ``blocks.0`` (one of them learns to attend to the previous token), 1 in ``blocks.1`` (the
induction head)."""
RECIPE = {
    "revision": 2,  # raise it when the model or its training changes in a way the numbers below do not say
    "vocab": VOCAB,
    "context": CONTEXT,
    "width": WIDTH,
    "layer_heads": list(LAYER_HEADS),
    "segments": [2, CONTEXT // 2],
    "batch": 32,
    "steps": 1000,
    "lr": 5e-3,
    "seed": 0,
}
"""Everything the trained weights depend on; the cache file is keyed by it, so a changed recipe trains anew."""


class InductionTokenizer:
    """Names the model's 64 token ids as syllables (``ba``, ``be``, …): what ``HookExplorer(tokenizer=...)`` needs."""

    vocab_size = VOCAB

    def __init__(self) -> None:
        self.tokens = [c + v for c in CONSONANTS for v in VOWELS]
        """The syllable of each id, in id order."""
        self._ids = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return VOCAB

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """The syllable of each id (one id: its syllable); an id outside the vocabulary raises an IndexError."""
        if isinstance(ids, int):
            return self.tokens[ids]
        return [self.tokens[int(i)] for i in ids]

    def encode(self, text: str) -> list[int]:
        """The ids of space-separated syllables; a ValueError names one that is not in the vocabulary."""
        try:
            return [self._ids[t] for t in text.split()]
        except KeyError as exc:
            raise ValueError(
                f"{exc.args[0]!r} is not a token: tokens are a consonant of {CONSONANTS!r} then a vowel of {VOWELS!r}"
            ) from None

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """The syllables of ``ids``, space-separated."""
        return " ".join(self.tokens[int(i)] for i in ids)


class AttentionBlock(nn.Module):
    """``x + attn(norm(x))`` under a causal mask (a pre-LayerNorm block): attention only, no MLP, so the block's heads
    are all it does."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        """The LayerNorm before the attention (without it the model did not learn to copy in 1,200 steps)."""
        self.attn = nn.MultiheadAttention(WIDTH, heads, batch_first=True)
        """``heads`` heads of width ``64 // heads`` (an ``nn.MultiheadAttention``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        h = self.norm(x)
        out, _ = self.attn(h, h, h, attn_mask=causal, need_weights=False)
        return x + out


class InductionLM(nn.Module):
    """Token and position embeddings, ``blocks`` (2 attention-only blocks: 4 heads, then 1), a final LayerNorm and
    ``unembed``."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        """The token embedding, 64 ids of width 64."""
        self.position = nn.Embedding(CONTEXT, WIDTH)
        """The learned position embedding, 64 positions."""
        self.blocks = nn.ModuleList(AttentionBlock(heads) for heads in LAYER_HEADS)
        """The two AttentionBlocks, ``blocks.0`` (4 heads) and ``blocks.1`` (1 head): the logit lens's rows."""
        self.norm = nn.LayerNorm(WIDTH)
        """The final LayerNorm, before ``unembed``."""
        self.unembed = nn.Linear(WIDTH, VOCAB)
        """The output projection to the 64 tokens' logits."""

    def get_output_embeddings(self) -> nn.Module:
        """``unembed``: what the logit lens reads each block's output through (after ``norm``)."""
        return self.unembed

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[-1] > CONTEXT:
            raise ValueError(
                f"InductionLM takes at most {CONTEXT} tokens, got {input_ids.shape[-1]}: shorten the input"
            )
        positions = torch.arange(input_ids.shape[-1], device=input_ids.device)
        x = self.embed(input_ids) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.unembed(self.norm(x))


def repeated_tokens(n: int, batch: int = 1, seed: int = 0) -> torch.Tensor:
    """``(batch, 2n)`` random token ids whose second half repeats the first (``2n`` ≤ 64); the global RNG untouched."""
    if not 1 <= n <= CONTEXT // 2:
        raise ValueError(f"repeated_tokens(n={n}): n must be between 1 and {CONTEXT // 2} (the model takes {CONTEXT})")
    first = torch.randint(VOCAB, (batch, n), generator=torch.Generator().manual_seed(seed))
    return torch.cat([first, first], dim=1)


def copy_batch(
    batch: int, generator: torch.Generator, lengths: Sequence[int] = (2, 32)
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)``, both ``(batch, 64)``: random tokens, each row holding a segment of ``lengths[0]`` to
    ``lengths[1]`` tokens at a random offset followed at once by its repeat; ``mask`` marks the positions whose next
    token is predictable (the repeat after its first token)."""
    ids = torch.randint(VOCAB, (batch, CONTEXT), generator=generator)
    length = torch.randint(lengths[0], lengths[1] + 1, (batch, 1), generator=generator)
    start = (torch.rand(batch, 1, generator=generator) * (CONTEXT - 2 * length + 1)).long()
    position = torch.arange(CONTEXT)
    repeat = (position >= start + length) & (position < start + 2 * length)
    ids = ids.gather(1, torch.where(repeat, position - length, position))
    mask = repeat & (position < start + 2 * length - 1)  # predicting tokens 2… of the repeat from the one before
    return ids, mask


def copy_loss(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the next token on the ``mask``ed positions."""
    logits = model(ids)[:, :-1]
    return F.cross_entropy(logits[mask[:, :-1]], ids[:, 1:][mask[:, :-1]])


def train_induction_lm(recipe: Mapping[str, Any] = RECIPE) -> InductionLM:
    """An InductionLM trained as ``recipe`` says (Adam, its steps, batch, learning rate and segment lengths), on one
    CPU thread, under its seed in a forked RNG (the global RNG and thread count left as found); in eval mode,
    gradients cleared."""
    with torch.random.fork_rng(devices=[]), one_thread():
        torch.manual_seed(recipe["seed"])
        generator = torch.Generator().manual_seed(recipe["seed"])
        model = InductionLM()
        optimizer = torch.optim.Adam(model.parameters(), lr=recipe["lr"])
        model.train()
        for _ in range(recipe["steps"]):
            optimizer.zero_grad()
            copy_loss(model, *copy_batch(recipe["batch"], generator, recipe["segments"])).backward()
            optimizer.step()
    model.zero_grad(set_to_none=True)
    return model.eval()


def induction_lm(cache: bool = True) -> tuple[InductionLM, InductionTokenizer]:
    """A trained InductionLM in eval mode and its tokenizer; trained on first use (about 20 s on one CPU thread), then
    loaded from the cache in milliseconds. The cache file is keyed by the training recipe: a changed one trains anew."""
    model = cached_model("induction_lm", InductionLM, lambda: train_induction_lm(RECIPE), cache, RECIPE)
    return model, InductionTokenizer()
