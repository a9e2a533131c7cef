"""What capturing on every leaf of a ResNet-18 costs: the explorer against plain runs and hand-written hooks.

Run: ``.venv/bin/python bench/capture_overhead.py [--pairs N] [--threads T] [--profile] [--no-gpt2]``.
Batch 2, 224×224, eval mode (no BatchNorm statistics drift). Forward cases run under
``torch.no_grad()`` — the cheapest forward, so the hooks' share is the largest — plus one
grad-enabled forward for comparison; the ``grad`` case times forward + backward. Hooks are attached
just before each B run and removed (and the captures cleared) just after it, outside the timed region.
A second section does the same on transformers' GPT-2 with a history of captures kept across forwards,
against hand-written hooks and nnsight (``bench/gpt2.py``).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from collections.abc import Callable

import torch
from _protocol import (
    MARKDOWN_HEADER,
    MIN_PAIRS,
    Comparison,
    Side,
    add_arguments,
    compare,
    machine,
    progress_to_stderr,
    revision,
    set_threads,
)
from gpt2 import gpt2_comparisons
from models import ResNet18, leaf_paths
from torch import nn

from hookwidgets.core import Explorer

MEMORY_BUDGET = 8 * 2**30  # large enough that one run's captures are never evicted
BARS = {"forward": 1.10, "grad": 1.15, "stats": 1.5}
STATS_AIM = 1.3


class ExplorerSide:
    """Attaches the explorer's hooks on every leaf before B and detaches them (clearing captures) after."""

    def __init__(self, explorer: Explorer, leaves: list[str], kind: str, action: str = "capture") -> None:
        self.explorer, self.leaves, self.kind, self.action = explorer, leaves, kind, action
        self.records: list[int] = []
        self.evicted = 0

    def setup(self) -> None:
        for path in self.leaves:
            self.explorer.attach(path, self.kind, action=self.action)

    def teardown(self) -> None:
        summary = self.explorer.captures.summary()
        self.records.append(summary["records"])
        self.evicted += summary["evicted"]
        self.explorer.detach()
        self.explorer.captures.clear()
        self.explorer.captures.evicted = 0

    def side(self, fn: Callable[[], object]) -> Side:
        return Side(fn, self.setup, self.teardown)


class HandWritten:
    """The reference: a plain ``register_forward_hook`` per leaf keeping ``out.detach()`` in a list.

    With ``grad=True`` the forward hook instead registers a tensor hook that keeps the gradient;
    with ``keep=False`` it detaches the output and drops it (the hook call without the memory it keeps).
    """

    def __init__(self, model: nn.Module, leaves: list[str], grad: bool = False, keep: bool = True) -> None:
        self.modules = [model.get_submodule(path) for path in leaves]
        self.hook = self._arm_grad if grad else self._keep_output if keep else self._drop_output
        self.kept: list[torch.Tensor] = []
        self.handles: list[torch.utils.hooks.RemovableHandle] = []
        self.records: list[int] = []

    def _keep_output(self, module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        self.kept.append(out.detach())

    def _drop_output(self, module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        out.detach()

    def _arm_grad(self, module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        out.register_hook(self.kept.append)

    def setup(self) -> None:
        self.handles = [m.register_forward_hook(self.hook) for m in self.modules]

    def teardown(self) -> None:
        self.records.append(len(self.kept))
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.kept.clear()

    def side(self, fn: Callable[[], object]) -> Side:
        return Side(fn, self.setup, self.teardown)


def forward(model: nn.Module, x: torch.Tensor, grad: bool = False, repeat: int = 1) -> Callable[[], None]:
    """A forward of ``model`` on ``x`` (``repeat`` times), with or without autograd."""

    def run() -> None:
        with torch.set_grad_enabled(grad):
            for _ in range(repeat):
                model(x)

    return run


def forward_backward(model: nn.Module, x: torch.Tensor, repeat: int = 1) -> Callable[[], None]:
    """Forward, then backward of the output's sum; parameter grads are reset to None first, as in training."""

    def run() -> None:
        for _ in range(repeat):
            model.zero_grad(set_to_none=True)
            model(x).sum().backward()

    return run


def leaf_outputs(model: nn.Module, leaves: list[str], x: torch.Tensor) -> tuple[int, int]:
    """Hook calls in one forward with a hook on every leaf (shared modules fire twice), and their output bytes."""
    counter = HandWritten(model, leaves)
    counter.setup()
    try:
        with torch.no_grad():
            model(x)
        return len(counter.kept), sum(t.numel() * t.element_size() for t in counter.kept)
    finally:
        counter.teardown()


def stats_available(explorer: Explorer, leaf: str) -> bool:
    """Whether ``Explorer.attach`` accepts ``action="stats"`` yet."""
    try:
        explorer.attach(leaf, "forward", action="stats")
    except (ValueError, TypeError):
        return False
    explorer.detach()
    return True


def check_fired(name: str, records: list[int], expected: int) -> None:
    """Fail loudly if the hooks of a B side did not all fire: a ratio of hooks that never ran means nothing."""
    if not records or min(records) < expected:
        raise RuntimeError(f"{name}: expected at least {expected} records per B run, got {sorted(set(records))}")


def resnet_comparisons(pairs: int) -> list[Comparison]:
    """The comparisons of RESULTS.md on ResNet-18, batch 2, 224×224."""
    torch.manual_seed(0)
    model = ResNet18().eval()
    x = torch.randn(2, 3, 224, 224)
    leaves = leaf_paths(model)
    calls, nbytes = leaf_outputs(model, leaves, x)
    print(f"model: ResNet-18 layout, {sum(p.numel() for p in model.parameters()):,} parameters, ", end="")
    print(f"{len(leaves)} leaf modules, {calls} leaf forward calls per forward (the block ReLUs run twice), ", end="")
    print(f"{nbytes / 2**20:.0f} MiB of leaf outputs per forward (in-place ReLU outputs counted again)")
    explorer = Explorer(model, memory_budget=MEMORY_BUDGET)
    plain = forward(model, x)
    results = []

    ex_fwd = ExplorerSide(explorer, leaves, "forward")
    results.append(
        compare("forward capture (no_grad) vs plain", plain, ex_fwd.side(plain), pairs=pairs, bar=BARS["forward"])
    )
    check_fired("forward capture", ex_fwd.records, calls)

    raw = HandWritten(model, leaves)
    results.append(
        compare("hand-written hooks (no_grad) vs plain", plain, raw.side(plain), pairs=pairs, note="issue: 1.05×")
    )
    check_fired("hand-written hooks", raw.records, calls)

    results.append(
        compare(
            "hand-written hooks keeping nothing vs plain",
            plain,
            HandWritten(model, leaves, keep=False).side(plain),
            pairs=pairs,
            note="hook calls only",
        )
    )

    ex_vs_raw = ExplorerSide(explorer, leaves, "forward")
    results.append(
        compare(
            "forward capture vs hand-written (no_grad)",
            raw.side(plain),
            ex_vs_raw.side(plain),
            pairs=pairs,
            note="explorer / raw",
        )
    )

    grad_fwd = forward(model, x, grad=True)
    ex_fwd_grad = ExplorerSide(explorer, leaves, "forward")
    results.append(
        compare(
            "forward capture (grad enabled) vs plain",
            grad_fwd,
            ex_fwd_grad.side(grad_fwd),
            pairs=pairs,
            bar=BARS["forward"],
        )
    )

    fb = forward_backward(model, x)
    ex_grad = ExplorerSide(explorer, leaves, "grad")
    results.append(compare("grad capture, fwd+bwd vs plain", fb, ex_grad.side(fb), pairs=pairs, bar=BARS["grad"]))
    check_fired("grad capture", ex_grad.records, 1)
    raw_grad = HandWritten(model, leaves, grad=True)
    results.append(
        compare("hand-written grad hooks, fwd+bwd vs plain", fb, raw_grad.side(fb), pairs=pairs, note="reference")
    )
    print(
        f"  grad records per fwd+bwd: explorer {max(ex_grad.records)}, hand-written {max(raw_grad.records)}",
        flush=True,
    )

    if stats_available(explorer, leaves[0]):
        ex_stats = ExplorerSide(explorer, leaves, "forward", action="stats")
        results.append(
            compare(
                "stats (no_grad) vs plain",
                plain,
                ex_stats.side(plain),
                pairs=pairs,
                bar=BARS["stats"],
                note=f"aim {STATS_AIM}×",
            )
        )
        print(f"  stats: {(results[-1].b_ms - results[-1].a_ms) / calls * 1e3:.0f} µs per hook call on average")
    else:
        print("stats: not available yet")

    evicted = sum(side.evicted for side in (ex_fwd, ex_vs_raw, ex_fwd_grad, ex_grad))
    print(f"captures evicted during B runs: {evicted} (budget {MEMORY_BUDGET / 2**30:.0f} GiB)")
    explorer.close()
    return results


def per_hook_costs(pairs: int, leaves: int = 60, repeat: int = 20) -> None:
    """Per-hook-call cost on a chain of tiny modules, where the hooks are nearly all the work."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.ReLU() for _ in range(leaves)])
    x = torch.randn(1, 8, requires_grad=True)
    paths = leaf_paths(model)
    explorer = Explorer(model, memory_budget=MEMORY_BUDGET)
    calls = leaves * repeat
    print(f"\nper hook call, {leaves} ReLUs on a 1×8 tensor, {repeat} runs per timing:")
    cases = [
        ("forward", forward(model, x, repeat=repeat), False),
        ("grad (fwd+bwd)", lambda: [model(x).sum().backward() for _ in range(repeat)], True),
    ]
    for label, fn, grad in cases:
        raw = compare(f"  {label}: hand-written vs plain", fn, HandWritten(model, paths, grad).side(fn), pairs=pairs)
        kind = "grad" if grad else "forward"
        ours = compare(f"  {label}: explorer vs plain", fn, ExplorerSide(explorer, paths, kind).side(fn), pairs=pairs)
        raw_us = (raw.b_ms - raw.a_ms) / calls * 1e3
        ours_us = (ours.b_ms - ours.a_ms) / calls * 1e3
        print(f"  {label}: hand-written {raw_us:.1f} µs per hook call, explorer {ours_us:.1f} µs per hook call")
    explorer.close()


def profile_hooks(title: str, model: nn.Module, x: torch.Tensor, runs: int, action: str = "capture") -> None:
    """cProfile of ``runs`` no_grad forwards with the explorer's forward hook on every leaf: where the time goes."""
    paths = leaf_paths(model)
    explorer = Explorer(model, memory_budget=MEMORY_BUDGET)
    for path in paths:
        explorer.attach(path, "forward", action=action)
    run = forward(model, x, repeat=runs)
    run()
    explorer.captures.clear()
    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    calls = explorer.captures.summary()["records"]
    explorer.close()
    rows = pstats.Stats(profiler).stats.items()  # (file, line, name) -> (cc, ncalls, own s, cum s, callers)
    print(f"\ncProfile, {title}, {calls} hook calls (the profiler inflates every time):")
    print_profile("top functions by own time", sorted(rows, key=lambda r: r[1][2], reverse=True)[:12], calls)
    ours = [r for r in rows if "hookwidgets" in r[0][0]]
    print_profile("hookwidgets functions by cumulative time", sorted(ours, key=lambda r: r[1][3], reverse=True), calls)


def print_profile(title: str, rows: list, calls: int) -> None:
    """Profile rows as calls, own and cumulative microseconds per hook call."""
    print(f"  {title:<52} {'calls/hook':>10} {'own µs':>8} {'cum µs':>8}")
    for (filename, line, func), (_, ncalls, own, cum, _) in rows:
        where = f"{func} ({os.path.basename(filename)}:{line})" if line else func
        print(f"  {where[:52]:<52} {ncalls / calls:10.2f} {own / calls * 1e6:8.2f} {cum / calls * 1e6:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--profile", action="store_true", help="also measure per-hook-call cost and cProfile it")
    parser.add_argument("--no-gpt2", action="store_true", help="skip the GPT-2 rows (they need transformers, nnsight)")
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs must be at least {MIN_PAIRS} (the protocol of bench/_protocol.py)")
    set_threads(args.threads)
    started = time.perf_counter()
    command = " ".join([".venv/bin/python", "bench/capture_overhead.py", *sys.argv[1:]])
    date = time.strftime("%Y-%m-%d %H:%M %Z")
    with progress_to_stderr() as log:
        print(f"$ {command}\n{date} — {machine()}\nhookwidgets at {revision()}")
        results = resnet_comparisons(args.pairs)
        model_line = next(line for line in log.getvalue().splitlines() if line.startswith("model: "))
        gpt2_model, gpt2_results = gpt2_comparisons(args.pairs) if not args.no_gpt2 else ("", [])
        profile_start = len(log.getvalue())
        if args.profile:
            per_hook_costs(args.pairs)
            chain = nn.Sequential(*[nn.ReLU() for _ in range(60)])
            profile_hooks("explorer forward capture, 60 ReLUs on a 1×8 tensor", chain, torch.randn(1, 8), runs=300)
            resnet = ResNet18().eval()
            with Explorer(resnet) as probe:
                has_stats = stats_available(probe, "fc")
            if has_stats:
                x = torch.randn(2, 3, 224, 224)
                profile_hooks("explorer stats on every leaf, ResNet-18", resnet, x, runs=5, action="stats")
        profile = log.getvalue()[profile_start:].strip("\n")
        print(f"took {time.perf_counter() - started:.0f} s")
    lines = [
        "## Capture overhead (issue 3)",
        "",
        f"`{command}` — {date}, {machine()}; hookwidgets at `{revision()}`.",
        "",
        f"{model_line.removeprefix('model: ')}; batch 2, 224×224, eval mode. Hooks are attached"
        " just before each B run and removed just after it; the forward rows run under `torch.no_grad()`, the"
        " grad rows time `zero_grad` + forward + `out.sum().backward()`.",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result in results),
    ]
    if gpt2_results:
        lines += [
            "",
            "### GPT-2, every leaf captured with a history",
            "",
            f"{gpt2_model}. The explorer's hooks and the hand-written ones are attached just before each B run and"
            " removed just after it, their captures kept from run to run; nnsight traces a copy of the model"
            " (`tracer.cache(modules=...)` on the same leaves), which it wraps. Bars: the explorer ≤ 1.10× the"
            " plain forward and ≤ 1.05× the hand-written hooks.",
            "",
            MARKDOWN_HEADER,
            *(result.markdown_row() for result in gpt2_results),
        ]
    if profile:
        lines += [
            "",
            "Per hook call and where the time goes (cProfile inflates every time):",
            "",
            "```text",
            profile,
            "```",
        ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
