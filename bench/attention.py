"""Attention probabilities of every layer: ``ex.attention()`` against a plain eager forward, on a 12-layer GPT-2.

Run: ``.venv/bin/python bench/attention.py [--pairs N] [--threads T]``. stdout is the markdown section for
bench/RESULTS.md (bench/README.md); progress goes to stderr.
transformers' ``GPT2LMHeadModel`` from a config (12 layers, width 128, 4 heads, vocabulary 5000, random weights:
nothing is downloaded), eval mode, batch 1 × 64 tokens. B = ``ex.attention()`` on the model as built (sdpa, its
default implementation): one forward with every config set to eager attention, its 12 attention modules hooked,
model state saved and restored. A = the same model built with eager attention, one forward under ``torch.no_grad()``.
transformers is a bench-only dependency (``pip install -e ".[bench]"``, which ``make bench`` runs).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

import torch
from _protocol import MARKDOWN_HEADER, MIN_PAIRS, WARMUP_PAIRS, add_arguments, compare, machine, revision, set_threads
from models import gpt2_lm

from hookwidgets.core import Explorer

BAR = 2.0
LAYERS, WIDTH, HEADS, TOKENS = 12, 128, 4, 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs must be at least {MIN_PAIRS} (the protocol of bench/_protocol.py)")
    set_threads(args.threads)
    command = " ".join([os.path.relpath(sys.executable), *sys.argv])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    model = gpt2_lm(LAYERS, WIDTH, HEADS, TOKENS, needed_for="the attention row")
    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")
    ids = torch.randint(0, model.config.vocab_size, (1, TOKENS), generator=torch.Generator().manual_seed(1))
    explorer = Explorer(model, ids)
    implementation = model.config._attn_implementation

    def ours() -> dict[str, torch.Tensor]:
        return explorer.attention()

    def plain() -> object:
        with torch.no_grad():
            return eager(ids)

    with torch.no_grad():
        expected = eager(ids, output_attentions=True).attentions
    got = ours()
    same = len(got) == LAYERS and all(torch.equal(a, b) for a, b in zip(got.values(), expected, strict=True))
    print(f"{len(got)} layers, equal to output_attentions=True under eager: {same}", file=sys.stderr)
    results = [compare("ex.attention() vs plain eager forward", plain, ours, pairs=args.pairs, bar=BAR, show=False)]
    explorer.close()
    for result in results:
        print(result.line(), file=sys.stderr)
    lines = [
        "## Attention probabilities (issue 23)",
        "",
        f"`{command}`, {date}; {machine()}; hookwidgets at {revision()}. "
        f"1-min load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        f"transformers' `GPT2LMHeadModel` from a config ({LAYERS} layers, width {WIDTH}, {HEADS} heads, vocabulary "
        f"5000, random weights), eval mode, batch 1 × {TOKENS} tokens. B = `ex.attention()` on the model as built "
        f"({implementation}, transformers' default): one forward with every config set to eager attention and "
        "restored, a hook on each attention module, model state saved and restored. A = the same weights built "
        "with eager attention, one forward under `torch.no_grad()`. Interleaved pairs after "
        f"{WARMUP_PAIRS} warm-ups, {args.pairs} pairs. Same result: the {len(got)} tensors equal "
        f"`output_attentions=True` under eager: {'yes' if same else 'NO'}.",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result in results),
    ]
    print("\n".join(lines))
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
