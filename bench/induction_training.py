"""Training time and cached-load time of ``hookwidgets.examples.induction_lm()``, and how well it copies.

Run: ``.venv/bin/python bench/induction_training.py``. Trains once from scratch into a temporary cache (one CPU
thread, as ``induction_lm()`` does on first use), then loads it from that cache; prints a markdown section with each
time against its bar (training ≤ 60 s, cached load ≤ 1 s, issue 36) and the copying accuracy on sequences not trained
on against chance.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch
from _protocol import machine, revision

from hookwidgets.examples import induction_lm, repeated_tokens
from hookwidgets.examples.induction import RECIPE, VOCAB, copy_batch

TRAIN_BAR_S, LOAD_BAR_S, COPY_BAR = 60.0, 1.0, 0.95


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


def row(what: str, value: str, bar: str, ok: bool | None) -> str:
    verdict = "—" if ok is None else "PASS" if ok else "OVER"
    return f"| {what} | {value} | {bar} | {verdict} |"


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    command = " ".join([os.path.relpath(sys.executable), *sys.argv])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as cache:
        os.environ["HOOKWIDGETS_CACHE"] = cache
        start, cpu_start = time.perf_counter(), time.process_time()
        model, _ = induction_lm()
        trained, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        print(f"trained in {trained:.1f} s", file=sys.stderr)
        start = time.perf_counter()
        induction_lm()
        loaded = time.perf_counter() - start
    held_out = copy_batch(512, torch.Generator().manual_seed(12345))  # a generator training never used
    accuracies = [("512 unseen segments of 2–32 tokens at random offsets", copying(model, *held_out))]
    accuracies += [(f"64 × {n} tokens repeated once", copying(model, *repeated(n))) for n in (5, 20, 32)]
    lines = [
        "## Training the induction example (issue 36)",
        "",
        f"`{command}`, {date}; {machine()}; hookwidgets at {revision()}. "
        f"1-min load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        f"`induction_lm()` into an empty cache: a 2-layer attention-only transformer (width {RECIPE['width']}, heads "
        f"{RECIPE['layer_heads']}) trained {RECIPE['steps']} Adam steps of {RECIPE['batch']} sequences of "
        f"{RECIPE['context']} tokens on one thread, the loss on the repeated positions only; then `induction_lm()` "
        f"again, which loads the cached weights. Copying: top-1 accuracy of the next token over the repeat from its "
        f"second token, on sequences training never saw (chance {1 / VOCAB:.1%}).",
        "",
        "| figure | value | bar | verdict |",
        "|---|---|---|---|",
        row("training on first use", f"{trained:.1f} s", f"≤ {TRAIN_BAR_S:.0f} s", trained <= TRAIN_BAR_S),
        row("training on first use, CPU time (what a quiet machine's wall time nears)", f"{cpu:.1f} s", "—", None),
        row("cached load", f"{loaded * 1000:.0f} ms", f"≤ {LOAD_BAR_S * 1000:.0f} ms", loaded <= LOAD_BAR_S),
        *(
            row(f"copying, {what}", f"{value:.1%}", f"≥ {COPY_BAR:.0%}", value >= COPY_BAR)
            for what, value in accuracies
        ),
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
