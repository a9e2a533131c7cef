"""Integrated gradients on tokens: ``ex.attribute(method="integrated_gradients")`` against Captum, on a 6-layer GPT-2.

Run: ``.venv/bin/python bench/token_attribution.py [--pairs N] [--threads T]``. stdout is the markdown section for
bench/RESULTS.md (bench/README.md); progress goes to stderr.
transformers' ``GPT2LMHeadModel`` from a config (6 layers, width 128, 4 heads, vocabulary 5000, random weights:
nothing is downloaded), eval mode, batch 2 × 32 tokens, 50 Gauss–Legendre steps, every step in one batch
(``internal_batch_size=None`` on both sides). B = ``ex.attribute(ids, method="integrated_gradients")``: a forward
that finds the embedding of the ids and the top next token, then one forward and backward of the 100 scaled
embeddings, model state saved and restored. A = Captum's ``IntegratedGradients`` on a function of the embeddings
(``inputs_embeds=``), given the same top tokens, summed over the hidden dimension.
transformers is a bench-only dependency (``pip install -e ".[bench]"``, which ``make bench`` runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch
from _protocol import MARKDOWN_HEADER, MIN_PAIRS, WARMUP_PAIRS, add_arguments, compare, machine, revision, set_threads
from models import gpt2_lm

from hookwidgets.core import Explorer

BAR = 1.10
LAYERS, WIDTH, HEADS, BATCH, TOKENS, STEPS = 6, 128, 4, 2, 32, 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs must be at least {MIN_PAIRS} (the protocol of bench/_protocol.py)")
    from captum.attr import IntegratedGradients

    set_threads(args.threads)
    command = " ".join([os.path.relpath(sys.executable), *sys.argv])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    model = gpt2_lm(LAYERS, WIDTH, HEADS, TOKENS, needed_for="the integrated gradients row")
    ids = torch.randint(0, model.config.vocab_size, (BATCH, TOKENS), generator=torch.Generator().manual_seed(1))
    explorer = Explorer(model, ids)
    with torch.no_grad():
        top = model(ids).logits[:, -1].argmax(-1).tolist()
    captum = IntegratedGradients(lambda embeddings: model(inputs_embeds=embeddings).logits[:, -1])

    def ours() -> torch.Tensor:
        return explorer.attribute(ids, method="integrated_gradients", n_steps=STEPS)

    def theirs() -> torch.Tensor:
        embeddings = model.transformer.wte(ids).detach()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Captum warns that it set requires_grad on the input
            found = captum.attribute(embeddings, target=top, n_steps=STEPS, method="gausslegendre")
        return found.sum(-1)

    got = ours()
    difference = (got - theirs()).abs().max().item()
    print(f"classes {got.classes} (Captum given {top}); max |hookwidgets − Captum| = {difference:.2e}", file=sys.stderr)
    results = [compare("IG 50 steps: ex.attribute vs Captum", theirs, ours, pairs=args.pairs, bar=BAR, show=False)]
    explorer.close()
    for result in results:
        print(result.line(), file=sys.stderr)
    lines = [
        "## Integrated gradients on tokens (issue 24)",
        "",
        f"`{command}`, {date}; {machine()}; hookwidgets at {revision()}. "
        f"1-min load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        f"transformers' `GPT2LMHeadModel` from a config ({LAYERS} layers, width {WIDTH}, {HEADS} heads, vocabulary "
        f"5000, random weights), eval mode, batch {BATCH} × {TOKENS} tokens, {STEPS} Gauss–Legendre steps in one "
        "batch on both sides (`internal_batch_size=None`), the zero-embedding baseline, the top next token. "
        'B = `ex.attribute(ids, method="integrated_gradients")` (a forward that finds the embedding of the ids and '
        "the top token, then one forward and backward of the scaled embeddings, model state saved and restored). "
        'A = Captum `IntegratedGradients(f).attribute(E, target=top, n_steps=50, method="gausslegendre").'
        "sum(-1)` with `f(E) = model(inputs_embeds=E).logits[:, -1]`, `E` the embedding of the ids. Interleaved "
        f"pairs after {WARMUP_PAIRS} warm-ups, {args.pairs} pairs. Same result: the largest difference between "
        f"the two is {difference:.1e}.",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result in results),
    ]
    print("\n".join(lines))
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
