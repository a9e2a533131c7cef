"""A 2-layer attention-only transformer trained in seconds to copy repeated token segments: an induction head forms.

Trained on segments of varying length and offset inside random tokens (with a fixed period a positional head
would solve the task without induction), the loss on the repeated positions. Plain torch: ``nn.MultiheadAttention``
heads, which ``attention()`` and ``("ablate_heads", …)`` find; no download, no ``transformers``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .digits import cached_model, one_thread

CONSONANTS = "bdfgklmnprstvwxz"
VOWELS = "aeio"
VOCAB = len(CONSONANTS) * len(VOWELS)
"""64 tokens, each a readable syllable (``ba``, ``be``, … ``zo``)."""
CONTEXT = 64
"""The longest sequence the model takes (its learned positions)."""
WIDTH, HEADS, LAYERS = 64, 4, 2


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
    """``x + attn(x)`` under a causal mask: attention only, no MLP, so each layer's heads are all it does."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        """4 heads of width 16 (an ``nn.MultiheadAttention``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        out, _ = self.attn(x, x, x, attn_mask=causal, need_weights=False)
        return x + out


class InductionLM(nn.Module):
    """Token and position embeddings, ``blocks`` (2 attention-only blocks), a final LayerNorm and ``unembed``."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        """The token embedding, 64 ids of width 64."""
        self.position = nn.Embedding(CONTEXT, WIDTH)
        """The learned position embedding, 64 positions."""
        self.blocks = nn.ModuleList(AttentionBlock() for _ in range(LAYERS))
        """The two AttentionBlocks, ``blocks.0`` and ``blocks.1`` (an ``nn.ModuleList``: the logit lens's rows)."""
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


def copy_batch(batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)``, both ``(batch, 64)``: random tokens, each row holding a segment of 3–24 tokens at a random
    offset followed at once by its repeat; ``mask`` marks the positions whose next token is predictable (the repeat
    after its first token)."""
    ids = torch.randint(VOCAB, (batch, CONTEXT), generator=generator)
    mask = torch.zeros(batch, CONTEXT, dtype=torch.bool)
    lengths = torch.randint(3, 25, (batch,), generator=generator).tolist()
    for row, length in enumerate(lengths):
        start = int(torch.randint(0, CONTEXT - 2 * length + 1, (1,), generator=generator))
        ids[row, start + length : start + 2 * length] = ids[row, start : start + length]
        mask[row, start + length : start + 2 * length - 1] = True  # predicting tokens 2… of the repeat
    return ids, mask


def copy_loss(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the next token on the ``mask``ed positions."""
    logits = model(ids)[:, :-1]
    return F.cross_entropy(logits[mask[:, :-1]], ids[:, 1:][mask[:, :-1]])


def train_induction_lm(steps: int = 2000, seed: int = 0, lr: float = 2e-3) -> InductionLM:
    """An InductionLM trained ``steps`` Adam steps on batches of 32 copy sequences, on one CPU thread, under
    ``seed`` in a forked RNG (the global RNG and thread count left as found); in eval mode, gradients cleared."""
    with torch.random.fork_rng(devices=[]), one_thread():
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        model = InductionLM()
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        for _ in range(steps):
            optimizer.zero_grad()
            copy_loss(model, *copy_batch(32, generator)).backward()
            optimizer.step()
    model.zero_grad(set_to_none=True)
    return model.eval()


def induction_lm(cache: bool = True) -> tuple[InductionLM, InductionTokenizer]:
    """A trained InductionLM in eval mode and its tokenizer; trained on first use (seconds, CPU) and cached on disk."""
    return cached_model("induction_lm_v1", InductionLM, train_induction_lm, cache), InductionTokenizer()
