"""Autograd graph recording at scale: extraction time, and what a recording forward costs (issue 4, Figures).

Run: ``.venv/bin/python bench/graph_scale.py [--pairs N] [--threads T] [--width W] [--no-cnn]``.

- Extraction: what ``ex.graph(x)`` does — one forward with the recorder (the model's state saved
  and restored), the graph walk, the saved-tensor metadata, the plain data, and the live graph let
  go of — in absolute seconds (median of ``--pairs`` runs after 3 warm-ups), on the 2000-block MLP
  (batch 64) and on a 20,000-node graph (a chain of 10,000 ``sin``/``mul`` steps). Bars: ≤ 1 s and
  ≤ 3 s. The plain forward's time is printed beside it: the graph's own share is the difference.
- Recording forward: a forward inside ``GraphRecorder`` (the graph read at the end of the forward:
  the nodes, their sequence numbers and ops, and the saved tensors, what a backward or a later
  forward could free or change; scopes, ids, edges and the plain data follow from those and are made
  when first asked for, which the extraction above includes) against a plain grad-enabled forward, by the
  protocol of ``bench/_protocol.py``, on the 2000-block MLP (batch 64) and on ResNet-18 (batch 8, 224×224).
  Bar: ≤ 1.5×. Where the MLP's extra time goes is measured part by part (``breakdown``).
- Node-hook recorder: with one persistent node hook attached, the explorer's lean recorder walks
  every forward's graph to place it; a forward, and a forward+backward (the hook firing), against
  plain ones on ResNet-18 (batch 8, 224×224). Bar: ≤ 1.2×.
- Recursion: a recursive walk of ``next_functions``, as torchviz's ``make_dot`` does (its
  ``add_nodes`` calls itself for every next function), on the MLP's graph at Python's default
  recursion limit. No torchviz install is needed to show it: the walk is the same.

The MLP is ``width``-wide Linear+ReLU blocks with identity weights (random ones vanish into
denormals over 2000 layers, and denormal arithmetic is 100× slower). Fewer than 15 pairs is a smoke
run: it prints the same lines, marked "smoke", and proves nothing. The last lines printed are a
markdown section for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from _protocol import (
    MARKDOWN_HEADER,
    MIN_PAIRS,
    WARMUP_PAIRS,
    Comparison,
    Side,
    add_arguments,
    compare,
    machine,
    progress_to_stderr,
    quantile,
    revision,
    set_threads,
)
from models import ResNet18
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.gc_pause import no_gc
from hookwidgets.core.graph.record import GraphRecorder, output_roots, record_graph
from hookwidgets.core.graph.recorded import RecordedGraph
from hookwidgets.core.graph.saved import read_saved
from hookwidgets.core.graph.walk import walk_graph
from hookwidgets.core.model.names import ParamNames
from hookwidgets.core.model.scope import Call, ScopeTracker

BLOCKS = 2000
CHAIN_STEPS = 10_000
BARS = {"mlp_extract_s": 1.0, "chain_extract_s": 3.0, "recording_forward": 1.5, "node_hook_recorder": 1.2}


def deep_mlp(blocks: int, width: int) -> nn.Sequential:
    """``blocks`` Linear+ReLU blocks with identity weights and zero biases (activations stay normal floats)."""
    layers: list[nn.Module] = []
    for _ in range(blocks):
        linear = nn.Linear(width, width)
        nn.init.eye_(linear.weight)
        nn.init.zeros_(linear.bias)
        layers += [linear, nn.ReLU()]
    return nn.Sequential(*layers)


class Chain(nn.Module):
    """``steps`` times ``sin(x) * w`` in the root's own forward: two autograd nodes per step."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps
        self.w = nn.Parameter(torch.ones(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.steps):
            x = torch.sin(x) * self.w
        return x


@dataclass
class Extraction:
    """Absolute seconds of ``ex.graph(x)`` over several runs, with the plain forward beside it."""

    name: str
    seconds: list[float]
    forward_s: list[float]
    nodes: int
    bar: float
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def verdict(self) -> str:
        return "PASS" if self.median <= self.bar else "OVER"

    def line(self) -> str:
        note = f"  ({self.note})" if self.note else ""
        return (
            f"{self.name:<44} {self.median:6.3f} s  p10–p90 {quantile(self.seconds, 0.1):.3f}–"
            f"{quantile(self.seconds, 0.9):.3f}  plain forward {statistics.median(self.forward_s):.3f} s  "
            f"{self.nodes:,} nodes  n={len(self.seconds)}  bar ≤{self.bar:.1f} s {self.verdict}{note}"
        )

    def markdown_row(self) -> str:
        return (
            f"| {self.name} | {self.nodes:,} | {self.median:.3f} s | {quantile(self.seconds, 0.1):.3f}–"
            f"{quantile(self.seconds, 0.9):.3f} | {statistics.median(self.forward_s):.3f} s | ≤ {self.bar:.0f} s | "
            f"{self.verdict}{' (' + self.note + ')' if self.note else ''} |"
        )


EXTRACTION_HEADER = (
    "| ex.graph(x) on | nodes | median | p10–p90 | plain forward | bar | verdict |\n|---|---|---|---|---|---|---|"
)


def extraction(name: str, model: nn.Module, x: torch.Tensor, runs: int, bar: float) -> Extraction:
    """Seconds of what ``ex.graph(x)`` does (``RecordedGraph.record``), interleaved with plain forwards."""
    totals, forwards, nodes = [], [], 0
    for i in range(WARMUP_PAIRS + runs):
        start = time.perf_counter()
        model(x)
        forwarded = time.perf_counter()
        graph = RecordedGraph()
        graph.record(model, x)
        end = time.perf_counter()
        nodes = len(graph.data["nodes"]) if graph.data is not None else 0
        if i >= WARMUP_PAIRS:
            forwards.append(forwarded - start)
            totals.append(end - forwarded)
    result = Extraction(name, totals, forwards, nodes, bar, smoke_note(runs))
    print(result.line(), flush=True)
    return result


def recursion_depth(model: nn.Module, x: torch.Tensor) -> tuple[int, str]:
    """How deep a recursive walk of the graph got (torchviz's ``add_nodes`` recursion) and how it ended."""
    output = model(x)
    seen: set = set()
    deepest = [0]

    def add_nodes(fn: object, depth: int) -> None:  # the shape of torchviz.make_dot's inner function
        if fn in seen:
            return
        seen.add(fn)
        deepest[0] = max(deepest[0], depth)
        for next_fn, _ in fn.next_functions:
            if next_fn is not None:
                add_nodes(next_fn, depth + 1)

    try:
        add_nodes(output.grad_fn, 1)
    except RecursionError as exc:
        return deepest[0], f"RecursionError ({exc})"
    return deepest[0], "completed"


def recorded_forward(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """A grad-enabled forward inside a GraphRecorder (the graph read at its end); checks a graph came."""

    def run() -> None:
        with GraphRecorder(model) as recorder:
            model(x)
        if len(recorder.result()) == 0:
            raise RuntimeError("the recorder saw no graph")

    return run


PARTS = {
    "setup": "names of modules, parameters and buffers read, nn.Module.__call__ wrapped (once per recorder)",
    "module hooks": "the wrapper of nn.Module.__call__ at every module call, and the scope log",
    "walk": "the graph walked from the outputs: nodes, sequence numbers, ops (scopes and ids come when read)",
    "saved tensors": "name, shape, dtype, bytes and alias of every tensor the nodes saved",
    "rest": "the graph's nodes and saved tensors as Python objects: garbage collection and freeing them",
}


def breakdown(model: nn.Module, x: torch.Tensor, runs: int) -> tuple[float, dict[str, float]]:
    """Median ms of a plain forward, and of each part of what a recording forward costs beyond it.

    Each run times, one after the other: a plain forward (its graph freed), a recorder's setup, a
    forward with the scope hooks alone (less the plain forward before its graph is freed), the walk
    and the saved-tensor read of that forward's graph, and a whole recording forward; "rest" is what
    the whole costs beyond the plain forward and the four parts.
    """
    record = recorded_forward(model, x)
    samples: dict[str, list[float]] = {name: [] for name in ["plain", *PARTS]}
    calls: list[Call] = []
    for i in range(WARMUP_PAIRS + runs):
        t0 = time.perf_counter()
        output = model(x)
        t1 = time.perf_counter()
        del output
        t2 = time.perf_counter()
        recorder = GraphRecorder(model)
        recorder.start()
        t3 = time.perf_counter()
        recorder.stop()
        tracker = ScopeTracker(model, lambda call, out, exc: calls.append(call))
        names = tracker.start()
        t4 = time.perf_counter()
        output = model(x)
        t5 = time.perf_counter()
        tracker.stop()
        params, call = ParamNames(model, names), calls[-1]
        with no_gc():
            t6 = time.perf_counter()
            table = walk_graph(
                output_roots(output), (call.starts, call.scopes), (call.start, call.end), params, saved_tensors=False
            )
            t7 = time.perf_counter()
            read_saved(table.saved, table.nodes, table.order, params)
            t8 = time.perf_counter()
        del table, output
        t9 = time.perf_counter()
        record()
        t10 = time.perf_counter()
        if i < WARMUP_PAIRS:
            continue
        plain = t2 - t0
        parts = [t3 - t2, (t5 - t4) - (t1 - t0), t7 - t6, t8 - t7]
        samples["plain"].append(plain)
        for name, value in zip(list(PARTS)[:4], parts, strict=True):
            samples[name].append(value)
        samples["rest"].append((t10 - t9) - plain - sum(parts))
    medians = {name: statistics.median(values) * 1e3 for name, values in samples.items()}
    return medians.pop("plain"), medians


def breakdown_lines(plain_ms: float, parts: dict[str, float], result: Comparison, markdown: bool = False) -> list[str]:
    """The parts as lines (or a markdown table), with what the bar allows and, when it is missed, by how much."""
    allowed = (result.bar - 1) * plain_ms if result.bar is not None else float("nan")
    extra = sum(parts.values())
    rows = [
        ("plain forward", plain_ms, "the baseline: the forward, its graph freed"),
        *[(name, ms, PARTS[name]) for name, ms in parts.items()],
    ]
    lines = ["| part | median ms | share of the plain forward | what |", "|---|---|---|---|"] if markdown else []
    for name, ms, what in rows:
        share = f"{ms / plain_ms:.1%}" if name != "plain forward" else "100%"
        lines.append(
            f"| {name} | {ms:.1f} | {share} | {what} |"
            if markdown
            else f"  {name:<14} {ms:7.1f} ms  {share:>6}  {what}"
        )
    summary = (
        f"Extra time by the parts: {extra:.1f} ms = {extra / plain_ms:.0%} of the plain forward; a ratio of "
        f"{result.bar:.2f}× allows {allowed:.1f} ms."
    )
    if result.verdict == "OVER":
        summary += (
            f" The bar is missed (median ratio {result.median:.3f}×): the module hooks and the Python objects of every"
            " node and saved tensor are costs of reading the graph from Python that no walk can avoid; see the parts."
        )
    lines.append(("\n" if markdown else "  ") + summary)
    return lines


def plain_forward(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        model(x)

    return run


def plain_step(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """Forward and backward, as a training step does (the gradients of the last step dropped first)."""

    def run() -> None:
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    return run


def with_node_hook(model: nn.Module, x: torch.Tensor, fn: Callable[[], None], *, fires: bool) -> Side:
    """``fn`` while an explorer keeps a node hook (capture) on the last residual add: its recorder follows forwards."""
    adds = [n["id"] for n in record_graph(model, x, saved_tensors=False).data()["nodes"] if n["op"] == "AddBackward0"]
    explorer: list[Explorer] = []

    def setup() -> None:
        explorer.append(Explorer(model))
        explorer[0].attach(adds[-1], "node_pre")

    def teardown() -> None:
        fired = explorer[0].hooks[0].fired
        explorer.pop().close()
        if fired != int(fires):
            raise RuntimeError(f"the node hook on {adds[-1]} fired {fired} times, expected {int(fires)}")

    return Side(fn, setup, teardown)


def smoke_note(pairs: int) -> str:
    return f"smoke: {pairs} < {MIN_PAIRS} pairs" if pairs < MIN_PAIRS else ""


def ratio(name: str, a: Side | Callable[[], None], b: Side | Callable[[], None], pairs: int, bar: float) -> Comparison:
    """The protocol's comparison; below its minimum of pairs, the same loop marked as a smoke run."""
    if pairs >= MIN_PAIRS:
        return compare(name, a, b, pairs=pairs, bar=bar)
    side_a = a if isinstance(a, Side) else Side(a)
    side_b = b if isinstance(b, Side) else Side(b)
    for _ in range(WARMUP_PAIRS):
        side_a.timed()
        side_b.timed()
    runs_a, runs_b = [], []
    for i in range(pairs):
        first, second = (side_a, side_b) if i % 2 == 0 else (side_b, side_a)
        one, two = first.timed(), second.timed()
        runs_a.append(one if first is side_a else two)
        runs_b.append(two if first is side_a else one)
    a_s, a_faults = (list(c) for c in zip(*runs_a, strict=True))
    b_s, b_faults = (list(c) for c in zip(*runs_b, strict=True))
    ratios = [tb / ta for ta, tb in zip(a_s, b_s, strict=True)]
    result = Comparison(name, ratios, a_s, b_s, a_faults, b_faults, bar, smoke_note(pairs))
    print(result.line(), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser, pairs=15)
    parser.add_argument("--width", type=int, default=128, help="width of the 2000-block MLP")
    parser.add_argument("--no-cnn", action="store_true", help="skip the ResNet-18 comparisons")
    args = parser.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    started = time.perf_counter()
    command = " ".join([os.path.relpath(sys.executable), *sys.argv])
    date = time.strftime("%Y-%m-%d %H:%M %Z")
    with progress_to_stderr():
        print(f"$ {command}\n{date} — {machine()}\nhookwidgets at {revision()}\n")

        mlp, mlp_x = deep_mlp(BLOCKS, args.width), torch.randn(64, args.width)
        chain, chain_x = Chain(CHAIN_STEPS), torch.randn(16)
        print(f"extraction, ex.graph(x), median of {args.pairs} runs after {WARMUP_PAIRS} warm-ups:")
        mlp_name = f"{BLOCKS}-block MLP, width {args.width}, batch 64"
        extractions = [
            extraction(mlp_name, mlp, mlp_x, args.pairs, BARS["mlp_extract_s"]),
            extraction(
                f"{2 * CHAIN_STEPS:,}-node chain (sin, mul)", chain, chain_x, args.pairs, BARS["chain_extract_s"]
            ),
        ]
        depth, ended = recursion_depth(mlp, mlp_x)
        recursion = (
            f"A recursive walk of `next_functions` (the recursion of torchviz's `make_dot`) on the {mlp_name} "
            f"graph ({extractions[0].nodes:,} nodes, ~{3 * BLOCKS:,} deep) at Python's recursion limit of "
            f"{sys.getrecursionlimit()}: {ended} at depth {depth:,}. hookwidgets walks iteratively."
        )
        print(f"\n{recursion}")

        print("\nrecording forward (GraphRecorder) vs plain grad-enabled forward:")
        bar = BARS["recording_forward"]
        results = [
            ratio(
                f"recording forward, {BLOCKS}-block MLP w{args.width} b64",
                plain_forward(mlp, mlp_x),
                recorded_forward(mlp, mlp_x),
                args.pairs,
                bar,
            )
        ]
        print(
            f"\nwhere the MLP's recording forward spends its extra time (median ms of {args.pairs} runs, parts apart):"
        )
        plain_ms, parts = breakdown(mlp, mlp_x, args.pairs)
        for line in breakdown_lines(plain_ms, parts, results[0]):
            print(line)
        if not args.no_cnn:
            cnn, cnn_x = ResNet18().eval(), torch.randn(8, 3, 224, 224)
            results.append(
                ratio(
                    "recording forward, ResNet-18 b8 224²",
                    plain_forward(cnn, cnn_x),
                    recorded_forward(cnn, cnn_x),
                    args.pairs,
                    bar,
                )
            )
            print("\npersistent node-hook recorder (one node_pre hook, capture) vs plain, ResNet-18 b8 224²:")
            bar = BARS["node_hook_recorder"]
            forward = plain_forward(cnn, cnn_x)
            results.append(
                ratio(
                    "node-hook recorder, forward",
                    forward,
                    with_node_hook(cnn, cnn_x, forward, fires=False),
                    args.pairs,
                    bar,
                )
            )
            step = plain_step(cnn, cnn_x)
            results.append(
                ratio(
                    "node-hook recorder, forward+backward",
                    step,
                    with_node_hook(cnn, cnn_x, step, fires=True),
                    args.pairs,
                    bar,
                )
            )

    print("## Autograd graph at scale (issue 4)\n")
    print(f"```\n{command}\n```\n")
    print(f"- Date: {date}.")
    print(f"- Machine: {machine()}.")
    print(f"- hookwidgets at `{revision()}`.")
    print(
        f"- Models (written in bench/): the {BLOCKS}-block MLP (Linear({args.width}, {args.width}) + ReLU per block, "
        "identity weights, batch 64); a chain of 10,000 `sin(x) * w` steps on a 16-vector; the ResNet-18 "
        "layout of `bench/models.py` (random weights, eval mode), batch 8, 224×224."
    )
    print(
        "- Extraction is `ex.graph(x)`'s work (`RecordedGraph.record`: recording forward with the model's state "
        "kept, walk, saved tensors, plain data, live graph released), median of the runs; the plain forward "
        "beside it is the same model's `model(x)`. The ratios follow the protocol of "
        "`bench/_protocol.py` (3 warm-up pairs, interleaved pairs, median of the pair ratios with p10–p90)."
    )
    print(f"- Recursion: {recursion} torchviz itself was not installed; TorchLens was not run here.\n")
    print(EXTRACTION_HEADER)
    for row in extractions:
        print(row.markdown_row())
    print(f"\n{MARKDOWN_HEADER}")
    for result in results:
        print(result.markdown_row())
    print(
        f"\nWhere the {BLOCKS}-block MLP's recording forward spends its extra time "
        f"({args.pairs} runs, parts measured apart):\n"
    )
    for line in breakdown_lines(plain_ms, parts, results[0], markdown=True):
        print(line)
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
