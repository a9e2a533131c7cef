"""The logit lens and a patching sweep against the same work written by hand, on a 12-layer GPT-2.

Run: ``.venv/bin/python bench/interp.py [--pairs N] [--threads T]``. stdout is the markdown section for
bench/RESULTS.md (bench/README.md); progress goes to stderr.
transformers' ``GPT2LMHeadModel`` from a config (12 layers, width 128, 4 heads, vocabulary 5000, random weights:
nothing is downloaded), eval mode, batch 1 × 32 tokens.
Logit lens: B = ``ex.logit_lens(top_k=5)``; A = a hand-written lens: forward hooks on the 12 blocks keep their
hidden states in one forward under ``torch.no_grad()``, then ``lm_head(ln_f(h)).softmax(-1).topk(5)`` per block and
for the output's logits.
Patch sweep: B = ``ex.patch_sweep(clean, corrupted)`` (12 blocks × 32 positions); A = the same forwards by hand: a clean
run keeping the blocks' outputs, the corrupted run, then per block one batch of 32 copies of the corrupted ids with
copy ``i``'s block output at position ``i`` replaced by the clean one, the logit of the clean top token read at the
last position, minus the corrupted one.
transformers is a bench-only dependency (``pip install -e ".[bench]"``, which ``make bench`` runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from _protocol import MARKDOWN_HEADER, MIN_PAIRS, WARMUP_PAIRS, add_arguments, compare, machine, revision, set_threads
from models import gpt2_lm

from hookwidgets.core import Explorer

LENS_BAR, SWEEP_BAR = 1.2, 1.2
LAYERS, WIDTH, HEADS, TOKENS, VOCAB, TOP_K = 12, 128, 4, 32, 5000, 5


def _first(output: object) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def hand_lens(model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Block hooks, final norm, unembedding, softmax, top-k: the lens a user writes."""
    hidden: list[torch.Tensor] = []
    handles = [b.register_forward_hook(lambda m, a, o: hidden.append(_first(o))) for b in model.transformer.h]
    try:
        with torch.no_grad():
            logits = model(ids).logits
            tops = [model.lm_head(model.transformer.ln_f(h)).softmax(-1).topk(TOP_K) for h in hidden]
            tops.append(logits.softmax(-1).topk(TOP_K))
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack([t.indices for t in tops]), torch.stack([t.values for t in tops])


def hand_sweep(model: torch.nn.Module, clean: torch.Tensor, corrupted: torch.Tensor) -> torch.Tensor:
    """The patched forwards of a sweep written by hand: one batch of T copies per block."""
    blocks = model.transformer.h
    kept: list[torch.Tensor] = []
    handles = [b.register_forward_hook(lambda m, a, o: kept.append(_first(o))) for b in blocks]
    with torch.no_grad():
        clean_logits = model(clean).logits
    for handle in handles:
        handle.remove()
    top = clean_logits[0, -1].argmax()
    rows = torch.arange(TOKENS)
    result = torch.empty(len(blocks), TOKENS)
    with torch.no_grad():
        base = model(corrupted).logits[0, -1, top]
        batch = corrupted.repeat(TOKENS, 1)
        for layer, block in enumerate(blocks):

            def patch(module, args, output, act=kept[layer]):
                hidden = _first(output).clone()
                hidden[rows, rows] = act[0]
                return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

            handle = block.register_forward_hook(patch)
            try:
                result[layer] = model(batch).logits[:, -1, top] - base
            finally:
                handle.remove()
    return result


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
    model = gpt2_lm(LAYERS, WIDTH, HEADS, TOKENS, vocab=VOCAB, needed_for="the interpretability rows")
    generator = torch.Generator().manual_seed(1)
    clean = torch.randint(0, VOCAB, (1, TOKENS), generator=generator)
    corrupted = torch.randint(0, VOCAB, (1, TOKENS), generator=generator)
    explorer = Explorer(model, clean)

    lens, (ids, probs) = explorer.logit_lens(top_k=TOP_K), hand_lens(model, clean)
    same_lens = torch.equal(lens["ids"], ids) and torch.allclose(lens["probs"], probs)
    sweep, expected = explorer.patch_sweep(clean, corrupted), hand_sweep(model, clean, corrupted)
    same_sweep = sweep.shape == (LAYERS, TOKENS) and torch.allclose(sweep, expected, atol=1e-5)
    print(f"lens equal to the hand-written one: {same_lens}; sweep equal: {same_sweep}", file=sys.stderr)
    results = [
        compare(
            f"logit lens ({LAYERS} layers) vs hand-written",
            lambda: hand_lens(model, clean),
            lambda: explorer.logit_lens(top_k=TOP_K),
            pairs=args.pairs,
            bar=LENS_BAR,
            show=False,
        ),
        compare(
            f"patch sweep ({LAYERS} layers × {TOKENS} positions) vs hand-written",
            lambda: hand_sweep(model, clean, corrupted),
            lambda: explorer.patch_sweep(clean, corrupted),
            pairs=args.pairs,
            bar=SWEEP_BAR,
            show=False,
        ),
    ]
    explorer.close()
    for result in results:
        print(result.line(), file=sys.stderr)
    lines = [
        "## Logit lens and patching sweep (issue 24)",
        "",
        f"`{command}`, {date}; {machine()}; hookwidgets at {revision()}. "
        f"1-min load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        f"transformers' `GPT2LMHeadModel` from a config ({LAYERS} layers, width {WIDTH}, {HEADS} heads, vocabulary "
        f"{VOCAB}, random weights), eval mode, batch 1 × {TOKENS} tokens. Logit lens: B = `ex.logit_lens(top_k="
        f"{TOP_K})`, A = block hooks in one `torch.no_grad()` forward, then `lm_head(ln_f(h)).softmax(-1).topk("
        f"{TOP_K})` per block and for the logits. Patch sweep: B = `ex.patch_sweep(clean, corrupted)`, A = the same "
        f"forwards by hand (a clean run, the corrupted run, then per block one batch of {TOKENS} patched copies). "
        f"Interleaved pairs after {WARMUP_PAIRS} warm-ups, {args.pairs} pairs. Same results: lens "
        f"{'yes' if same_lens else 'NO'}, sweep {'yes' if same_sweep else 'NO'}.",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result in results),
    ]
    print("\n".join(lines))
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
