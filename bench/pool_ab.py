"""The capture pool on and off, interleaved in one process: ResNet-18 capture, GPT-2 capture with a history,
and the ResNet-18 and digits live loops (issue 22, part 4). A: the store's pool disabled; B: as shipped.

Run: ``.venv/bin/python bench/pool_ab.py [--pairs N] [--threads T] [--only resnet,gpt2,live,digits]``.
Prints one ``compare`` line per row (plain vs pool off, plain vs pool on, pool off vs pool on).
"""

from __future__ import annotations

import argparse

import capture_overhead as co
import gpt2
import live_overhead as lo
import torch
from _protocol import Side, add_arguments, compare, machine, revision, set_threads
from models import ResNet18, leaf_paths

from hookwidgets.core import Explorer
from hookwidgets.core.capture import pool as capture_pool
from hookwidgets.core.capture.store import DEFAULT_MEMORY_BUDGET
from hookwidgets.examples import DigitsCNN

POOL = capture_pool.SHARED


def with_pool(side: Side, on: bool) -> Side:
    """``side`` with the pool switched on or off just before its setup (stores made then take it or not)."""

    def setup() -> None:
        capture_pool.SHARED = POOL if on else None
        if side.setup is not None:
            side.setup()

    return Side(side.fn, setup, side.teardown)


def pool_store(explorer: Explorer, on: bool) -> Explorer:
    explorer.captures._pool = POOL if on else None
    return explorer


def three(name: str, plain, off: Side, on: Side, pairs: int) -> None:
    compare(f"{name}: pool off vs plain", plain, off, pairs=pairs)
    compare(f"{name}: pool on vs plain", plain, on, pairs=pairs)
    compare(f"{name}: pool on vs pool off", off, on, pairs=pairs)


def resnet(pairs: int) -> None:
    torch.manual_seed(0)
    model = ResNet18().eval()
    x = torch.randn(2, 3, 224, 224)
    leaves = leaf_paths(model)
    plain = co.forward(model, x)
    off = co.ExplorerSide(pool_store(Explorer(model, memory_budget=co.MEMORY_BUDGET), False), leaves, "forward")
    on = co.ExplorerSide(pool_store(Explorer(model, memory_budget=co.MEMORY_BUDGET), True), leaves, "forward")
    three("ResNet-18 forward capture (no_grad)", plain, off.side(plain), on.side(plain), pairs)


def gpt(pairs: int) -> None:
    model, ids = gpt2.gpt2()
    leaves, _ = gpt2.leaves_that_run(model, ids)

    def plain() -> None:
        with torch.no_grad():
            model(ids)

    budget = DEFAULT_MEMORY_BUDGET
    off = gpt2.ExplorerHistory(pool_store(Explorer(model, memory_budget=budget), False), leaves)
    on = gpt2.ExplorerHistory(pool_store(Explorer(model, memory_budget=budget), True), leaves)
    three("GPT-2 forward capture, history", plain, off.side(plain), on.side(plain), pairs)
    raw = gpt2.HandWrittenHistory(model, leaves, budget)
    compare("GPT-2 hand-written history vs plain", plain, raw.side(plain), pairs=pairs)


def live(name: str, model, shape, captured, pairs: int, steps: int = 10) -> None:
    batches = [(torch.randn(*shape), torch.randint(0, 10, (shape[0],))) for _ in range(steps)]
    loop = lo.training_loop(model, batches)
    example = batches[0][0][:2]
    off = with_pool(lo.watched(model, example, loop, captured), False)
    on = with_pool(lo.watched(model, example, loop, captured), True)
    three(name, loop, off, on, pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, pairs=20)
    parser.add_argument("--only", default="resnet,gpt2,live,digits")
    args = parser.parse_args()
    set_threads(args.threads)
    print(f"{machine()}; hookwidgets at {revision()}", flush=True)
    only = args.only.split(",")
    if "resnet" in only:
        resnet(args.pairs)
    if "gpt2" in only:
        gpt(args.pairs)
    if "live" in only:
        torch.manual_seed(0)
        live(
            "ResNet-18 live b16 64²", ResNet18(num_classes=10).train(), (16, 3, 64, 64), lo.RESNET_CAPTURED, args.pairs
        )
    if "digits" in only:
        torch.manual_seed(0)
        live("digits live b64 32²", DigitsCNN().train(), (64, 1, 32, 32), lo.DIGITS_CAPTURED, args.pairs)


if __name__ == "__main__":
    main()
