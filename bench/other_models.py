"""Other models beside an open explorer: a model nobody explores runs as fast as without the explorer.

Run: ``.venv/bin/python bench/other_models.py [--pairs N] [--threads T]``. stdout is the markdown section for
bench/RESULTS.md (bench/README.md); progress goes to stderr.
Model B, the one timed, is the ResNet-18 layout of ``bench/models.py`` (batch 2, 224×224, eval mode) and a
stack of 300 small Linear + ReLU blocks (batch 2, width 8: module calls dominate). Side A runs B alone; side
B runs B while an explorer of another model (a two-layer MLP) has every global kind attached (``stats`` on
``global_forward_pre``, ``global_forward``, ``global_backward_pre``, ``global_backward``, ``global_grad``),
made just before the run and closed just after it. Forward + backward of ``out.sum()``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from _protocol import (
    MARKDOWN_HEADER,
    MIN_PAIRS,
    WARMUP_PAIRS,
    Side,
    add_arguments,
    compare,
    machine,
    revision,
    set_threads,
)
from models import ResNet18
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.hooks.kinds import GLOBAL_KINDS

BAR = 1.05


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
    torch.manual_seed(0)
    explored = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    open_explorers: list[Explorer] = []

    def open_explorer() -> None:
        explorer = Explorer(explored)
        explorer.attach("", list(GLOBAL_KINDS), action="stats")
        open_explorers.append(explorer)

    def close_explorer() -> None:
        open_explorers.pop().close()

    models = {
        "ResNet-18 b2 224², fwd+bwd": (ResNet18().eval(), torch.randn(2, 3, 224, 224)),
        "300 × (Linear 8, ReLU) b2, fwd+bwd": (
            nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(300)]),
            torch.randn(2, 8),
        ),
    }
    results = []
    for name, (model, x) in models.items():

        def step(model: nn.Module = model, x: torch.Tensor = x) -> None:
            model.zero_grad(set_to_none=True)
            model(x).sum().backward()

        results.append(
            compare(
                f"{name}: beside an explorer of another model vs alone",
                step,
                Side(step, setup=open_explorer, teardown=close_explorer),
                pairs=args.pairs,
                bar=BAR,
                show=False,
            )
        )
    for result in results:
        print(result.line(), file=sys.stderr)
    lines = [
        "## Other models beside an open explorer (issue 21)",
        "",
        f"`{command}`, {date}; {machine()}; hookwidgets at {revision()}. "
        f"1-min load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        "B is a model nobody explores: the ResNet-18 layout of `bench/models.py` (random weights, eval mode, batch 2, "
        "224×224) and a stack of 300 Linear(8, 8) + ReLU blocks (batch 2: module calls dominate), each timed for "
        "`zero_grad` + forward + `out.sum().backward()`. Side A runs B alone; side B runs it while an explorer of "
        "another model (a two-layer MLP) has every global kind attached with the `stats` action, the explorer made "
        "just before the run and closed just after it (not timed). Global kinds are hooks on the explored model's "
        "own modules, so B should not notice them. Interleaved pairs after "
        f"{WARMUP_PAIRS} warm-ups, {args.pairs} pairs each.",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result in results),
    ]
    print("\n".join(lines))
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
