"""Training time and cached-load time of ``hookwidgets.examples.induction_lm()``, and how well it copies.

Run: ``.venv/bin/python bench/induction_training.py``. Trains once from scratch into a temporary cache (one CPU
thread, as ``induction_lm()`` does on first use), then loads it from that cache; prints a markdown table with each
time against its bar (training ≤ 60 s, cached load ≤ 1 s) and the copying accuracy on sequences not trained on.
"""

from __future__ import annotations

import os
import tempfile
import time

import torch

from hookwidgets.examples import induction_lm, repeated_tokens
from hookwidgets.examples.induction import VOCAB, copy_batch

TRAIN_BAR_S, LOAD_BAR_S = 60.0, 1.0


def copying(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> float:
    """Top-1 next-token accuracy on the ``mask``ed positions (those whose next token a copy predicts)."""
    with torch.no_grad():
        predicted = model(ids)[:, :-1].argmax(-1)
    where = mask[:, :-1]
    return float((predicted[where] == ids[:, 1:][where]).float().mean())


def repeated(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """64 sequences of ``n`` tokens and their repeat, the repeat from its second token marked."""
    ids = repeated_tokens(n, batch=64, seed=7)
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, n:-1] = True
    return ids, mask


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        os.environ["HOOKWIDGETS_CACHE"] = cache
        start = time.perf_counter()
        model, _ = induction_lm()
        trained = time.perf_counter() - start
        start = time.perf_counter()
        induction_lm()
        loaded = time.perf_counter() - start
    held_out = copy_batch(512, torch.Generator().manual_seed(12345))  # a generator training never used
    print("| what | value | bar |\n|---|---|---|")
    print(
        f"| training on first use (1 thread, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}) "
        f"| {trained:.1f} s | {trained / TRAIN_BAR_S:.2f} × 60 s |"
    )
    print(f"| cached load | {loaded * 1000:.0f} ms | {loaded / LOAD_BAR_S:.3f} × 1 s |")
    chance = f"chance {1 / VOCAB:.1%}"
    unseen = copying(model, *held_out)
    print(f"| copying, 512 unseen segments of 2–32 tokens at random offsets ({chance}) | {unseen:.1%} | |")
    for n in (5, 20, 32):
        print(f"| copying, 64 × {n} tokens repeated once ({chance}) | {copying(model, *repeated(n)):.1%} | |")


if __name__ == "__main__":
    main()
