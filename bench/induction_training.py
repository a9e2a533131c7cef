"""Training time and cached-load time of ``hookwidgets.examples.induction_lm()``, and how well it copies.

Run: ``.venv/bin/python bench/induction_training.py``. Trains once from scratch into a temporary cache (one CPU
thread, as ``induction_lm()`` does on first use), then loads it from that cache; prints a markdown table.
"""

from __future__ import annotations

import os
import tempfile
import time

import torch

from hookwidgets.examples import induction_lm, repeated_tokens


def copying(model: torch.nn.Module, n: int = 20) -> float:
    """Top-1 next-token accuracy over the repeated half (from its second token) of 64 unseen sequences."""
    ids = repeated_tokens(n, batch=64, seed=7)
    with torch.no_grad():
        predicted = model(ids)[:, n:-1].argmax(-1)
    return float((predicted == ids[:, n + 1 :]).float().mean())


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        os.environ["HOOKWIDGETS_CACHE"] = cache
        start = time.perf_counter()
        model, _ = induction_lm()
        trained = time.perf_counter() - start
        start = time.perf_counter()
        induction_lm()
        loaded = time.perf_counter() - start
    print("| what | value |\n|---|---|")
    print(f"| training on first use (1 thread, {os.cpu_count()} cores) | {trained:.1f} s |")
    print(f"| cached load | {loaded * 1000:.0f} ms |")
    print(f"| copying of the repeated half (64 × 20 tokens, chance 1.6%) | {copying(model):.1%} |")


if __name__ == "__main__":
    main()
