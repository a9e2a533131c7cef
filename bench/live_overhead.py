"""A training loop watched by the widget: step time with live updates against the same loop unwatched (issue 6).

Run: ``.venv/bin/python bench/live_overhead.py [--pairs N] [--threads T] [--steps S]``.

A is ``steps`` SGD steps with no explorer. B is the same loop while a ``HookExplorer`` with its view
(headless: the widget serialises its state as in a notebook, with no browser to send it to) watches
it: ``forward`` capture on 5 layers, ``stats`` on every layer's output and its gradient (``global_forward``
and ``global_grad``, what the summary's "Stats on every layer" attaches),
live updates at most every 0.1 s and images every 2 s, together at most 3% of the loop's time. The
explorer is created just before each B run and closed just after it, outside the timed region.

Two models: the ResNet-18 layout of ``models.py`` (10 classes, batch 16, 64×64), a typical training
run, where the bar applies: the watched loop runs at ≥ 0.9× the speed of the plain one (B/A ≤ 1.11);
and the digits CNN (batch 64, 32×32), the worst case: its layers have 1–32 channels, so a layer's
statistics (a few passes over its output) cost about as much as the layer itself. Reported, no bar.
On ResNet-18 three more rows split the cost: the same watch with stats on every layer's output only
(no gradient statistics; the bar applies as well), the watched loop against the same hooks on a
headless core ``Explorer`` (no view), i.e. what the widget's live updates add on top of the hooks, and
the watched loop against the loop with hand-written hooks keeping the same captures (the 5 outputs, detached,
up to the store's byte budget) and nothing else. Captures kept as references pin the loop's memory, so how
much the loop page-faults around them depends on the process's heap: that last row, whose A keeps the same
references, is where the bar is judged when the rows against the plain loop differ by their faults.

A third model, issue 25's: a GPT-2-shaped language model (``models.gpt2_lm``: 6 layers, width 128, batch 8×64)
trained with AdamW, watched with stats on every layer's output and gradient, one capture (the first block's
output) and the optimizer monitor (``watch_optimizer``). Bars: the explorer with its view ≤ 1.15× the unwatched
loop, and the view's share (A: the same hooks and monitor on a headless ``Explorer``) ≤ 1.03×. Kernel-side: the
view has no page to send to; a browser showing it costs more (the page's own rendering shares the machine).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections import deque

import torch
from _protocol import MARKDOWN_HEADER, Side, add_arguments, compare, machine, revision, set_threads
from models import ResNet18, gpt2_lm
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.core.capture.store import DEFAULT_MEMORY_BUDGET
from hookwidgets.core.explorer import Explorer
from hookwidgets.examples import DigitsCNN

DIGITS_CAPTURED = ("features.conv1", "features.conv2", "features.pool2", "features.conv3", "classifier.fc")
RESNET_CAPTURED = ("conv1", "layer1.0.conv1", "layer2.0.conv1", "layer3.0.conv1", "fc")
BAR = 1 / 0.9
GPT2_CAPTURED = ("transformer.h.0",)
GPT2_BAR = 1.15  # the explorer with its view against the unwatched loop
VIEW_SHARE_BAR = 1.03  # the view's own share: against the same hooks with no view


def training_loop(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]):
    """SGD over ``batches``, as a user's notebook cell runs it."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def run() -> None:
        for x, y in batches:
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            optimizer.step()

    return run


EVERY_LAYER = ("global_forward", "global_grad")  # what the summary's "Stats on every layer" attaches


def lm_training_loop(model: nn.Module, batches: list[torch.Tensor]):
    """AdamW on a language model's next-token loss over ``batches`` of token ids; returns (run, optimizer)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def run() -> None:
        for ids in batches:
            optimizer.zero_grad(set_to_none=True)
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()

    return run, optimizer


def watched(
    model: nn.Module,
    example: torch.Tensor,
    loop,
    captured: tuple[str, ...],
    view: bool = True,
    stats_kinds: tuple[str, ...] = EVERY_LAYER,
    optimizer: torch.optim.Optimizer | None = None,
) -> Side:
    """``loop`` while a HookExplorer with its view captures 5 layers and keeps stats on every layer.

    ``stats_kinds``: every layer's output and gradient (the default), or its output alone
    (``("global_forward",)``). With ``view=False``, the same hooks on a headless core ``Explorer``:
    no widget, no live updates. With ``optimizer``, the explorer watches it too (its update ratios).
    """
    explorers: list[Explorer] = []

    def setup() -> None:
        ex = (HookExplorer if view else Explorer)(model, example_inputs=example)
        if view:
            ex.view  # noqa: B018 - the view exists, so live updates follow the loop
            ex.view.selected = captured[0]  # its images are redrawn during the loop too
        for path in captured:
            ex.attach(path, "forward")
        ex.attach("", list(stats_kinds), action="stats")
        if optimizer is not None:
            ex.watch_optimizer(optimizer)
        explorers.append(ex)

    def teardown() -> None:
        ex = explorers.pop()
        if ex.hooks[0].fired == 0 or (view and ex.view.status.get("state") != "live"):
            raise RuntimeError(f"the explorer did not follow the loop: {ex.hooks[0]!r}")
        ex.close()

    return Side(loop, setup, teardown)


def keeping_references(model: nn.Module, loop, captured: tuple[str, ...]) -> Side:
    """``loop`` under hand-written forward hooks keeping the ``captured`` outputs detached, the oldest dropped past
    the store's byte budget: the references the watch keeps, and nothing else."""
    kept: deque[torch.Tensor] = deque()
    handles: list = []
    nbytes = [0]

    def keep(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        t = out.detach()
        kept.append(t)
        nbytes[0] += t.nbytes
        while nbytes[0] > DEFAULT_MEMORY_BUDGET and len(kept) > 1:
            nbytes[0] -= kept.popleft().nbytes

    def setup() -> None:
        handles.extend(model.get_submodule(path).register_forward_hook(keep) for path in captured)

    def teardown() -> None:
        if not kept:
            raise RuntimeError("the hand-written hooks did not follow the loop")
        for handle in handles:
            handle.remove()
        handles.clear()
        kept.clear()
        nbytes[0] = 0

    return Side(loop, setup, teardown)


def case(name: str, model: nn.Module, shape: tuple[int, ...], captured: tuple[str, ...], args, bar, split=False):
    """One model's comparison: ``args.steps`` SGD steps on random batches of ``shape``.

    With ``split``, two more: the same with stats on every layer's output only (no gradient stats),
    and the view's live updates isolated: the watched loop against the same hooks on a headless
    Explorer (what is left is the hooks' own cost, statistics above all).
    """
    batches = [(torch.randn(*shape), torch.randint(0, 10, (shape[0],))) for _ in range(args.steps)]
    loop = training_loop(model, batches)
    example = batches[0][0][:2]
    results = [compare(name, loop, watched(model, example, loop, captured), pairs=args.pairs, bar=bar)]
    if split:
        outputs_only = watched(model, example, loop, captured, stats_kinds=("global_forward",))
        results.append(compare(f"{name}: stats on outputs only", loop, outputs_only, pairs=args.pairs, bar=bar))
    if split:
        headless = watched(model, example, loop, captured, view=False)
        view_only = f"{name}: the view's live updates alone (A: same hooks, no view)"
        results.append(compare(view_only, headless, watched(model, example, loop, captured), pairs=args.pairs))
        by_hand = f"{name}: against hand-written hooks keeping the same captures (A)"
        watch = watched(model, example, loop, captured)
        results.append(compare(by_hand, keeping_references(model, loop, captured), watch, pairs=args.pairs, bar=bar))
    return results


def gpt2_case(args) -> list:
    """Issue 25's loop: a GPT-2-shaped LM under AdamW, watched with its view against the unwatched loop, and the
    view's share against the same hooks and monitor on a headless Explorer."""
    model = gpt2_lm(6, 128, 4, 64, needed_for="live_overhead's GPT-2 rows").train()
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 5000, (8, 64), generator=generator) for _ in range(args.steps)]
    loop, optimizer = lm_training_loop(model, batches)
    example = batches[0][:2]
    name = f"GPT-2 6×128 b8×64, {args.steps} AdamW steps"

    def watch(view: bool) -> Side:
        return watched(model, example, loop, GPT2_CAPTURED, view=view, optimizer=optimizer)

    return [
        compare(name, loop, watch(True), pairs=args.pairs, bar=GPT2_BAR),
        compare(
            f"{name}: the view's share (A: same hooks, no view)",
            watch(False),
            watch(True),
            pairs=args.pairs,
            bar=VIEW_SHARE_BAR,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser, pairs=15)
    parser.add_argument("--steps", type=int, default=10, help="training steps per timed loop")
    parser.add_argument("--no-digits", action="store_true", help="skip the digits CNN (the worst case)")
    parser.add_argument("--no-split", action="store_true", help="skip isolating the view's share on ResNet-18")
    parser.add_argument("--no-gpt2", action="store_true", help="skip the GPT-2-shaped AdamW loop (needs transformers)")
    parser.add_argument("--only-gpt2", action="store_true", help="run the GPT-2-shaped AdamW loop alone")
    args = parser.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = shlex.join([".venv/bin/python", "bench/live_overhead.py", *sys.argv[1:]])
    print(f"machine: {machine()}\nrevision: {revision()}\n")
    results = []
    if not args.only_gpt2:
        resnet = ResNet18(num_classes=10).train()
        name = f"ResNet-18 b16 64², {args.steps} SGD steps"
        results += case(name, resnet, (16, 3, 64, 64), RESNET_CAPTURED, args, BAR, split=not args.no_split)
    if not args.no_gpt2:
        results += gpt2_case(args)
    if not args.no_digits and not args.only_gpt2:
        name = f"digits CNN b64 32², {args.steps} SGD steps"
        results += case(name, DigitsCNN().train(), (64, 1, 32, 32), DIGITS_CAPTURED, args, None)
    print()
    print(markdown_section(results, command=command, started=started, steps=args.steps))


def markdown_section(results: list, *, command: str, started: str, steps: int) -> str:
    """The section for bench/RESULTS.md: command, date, machine, the table with bar and verdict, and speeds."""
    barred = [r for r in results if r.bar is not None]
    verdict = "PASS" if all(r.verdict == "PASS" for r in barred) else "OVER"
    lines = [
        "## Live updates while the user's loop runs (issue 6)",
        "",
        f"Command: `{command}` — {started}, hookwidgets at {revision()}.",
        "",
        f"Machine: {machine()}.",
        "",
        f"A: {steps} SGD steps of the user's own loop, no explorer. B: the same loop while a HookExplorer with its"
        " view follows it — `forward` capture on 5 layers, `stats` on every layer's output and gradient (outputs"
        " only where the row says so), live"
        " pushes (≤ 10/s, coalesced; images every 2 s; at most 3% of the loop's time). Bar: B runs at ≥ 0.9× A's"
        " speed, i.e. B/A ≤ 1.11 (the GPT-2 rows: AdamW steps, `forward` capture on one block, the optimizer"
        " monitor too; bars 1.15× and, for the view's share, 1.03×). The row against hand-written hooks keeping"
        " the same captures (A there: the 5"
        " outputs kept, detached, up to the same byte budget, and nothing else) is"
        " where the bar is judged when the rows against the plain loop differ by their page faults: kept"
        " references pin the loop's memory, and how much it faults around them depends on the process's heap.",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result in results),
        "",
        *(
            f"- {result.name}: the watched loop runs at {1 / result.median:.3f}× the speed of A"
            + (f" (bar ≥ {1 / result.bar:.2f}×)" if result.bar is not None else " (no bar)")
            for result in results
        ),
        "",
        f"Verdict: {verdict}.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
