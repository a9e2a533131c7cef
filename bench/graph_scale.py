"""Autograd graph recording at scale: extraction time, and what a recording forward costs (issue 4, Figures).

Run: ``.venv/bin/python bench/graph_scale.py [--pairs N] [--threads T] [--width W] [--no-cnn]``.

- Extraction: ``record_graph(model, x).data()`` — one forward with the recorder, the graph walk,
  the saved-tensor metadata and the plain data — in absolute seconds (median over ``--pairs`` runs
  after 3 warm-ups), on the 2000-block MLP (batch 64) and on a 20,000-node graph (a chain of
  10,000 ``sin``/``mul`` steps). Bars: ≤ 1 s and ≤ 3 s.
- Recording forward: a forward inside ``GraphRecorder`` (the graph is read at the end of the
  forward: ids, scopes and saved tensors) against a plain grad-enabled forward, by the protocol of
  DESIGN.md, on the 2000-block MLP (batch 64) and on ResNet-18 (batch 8, 224×224). Bar: ≤ 1.5×.
- Node-hook recorder: with one persistent node hook attached, the explorer's lean recorder walks
  every forward's graph to place it; a forward, and a forward+backward (the hook firing), against
  plain ones on ResNet-18 (batch 8, 224×224). Bar: ≤ 1.2×.

The MLP is ``width``-wide Linear+ReLU blocks with identity weights (random ones vanish into
denormals over 2000 layers, and denormal arithmetic is 100× slower). Fewer than 15 pairs is a smoke
run: it prints the same lines, marked "smoke", and proves nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

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
    revision,
    set_threads,
)
from models import ResNet18
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.graph import GraphRecorder, record_graph

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


def extraction(name: str, model: nn.Module, x: torch.Tensor, runs: int, bar: float) -> float:
    """Median seconds of ``record_graph(model, x).data()``, with the walk's share and the node count."""
    totals, data_only, nodes = [], [], 0
    for i in range(WARMUP_PAIRS + runs):
        start = time.perf_counter()
        recording = record_graph(model, x)
        recorded = time.perf_counter()
        data = recording.data()
        end = time.perf_counter()
        del recording
        if i >= WARMUP_PAIRS:
            totals.append(end - start)
            data_only.append(end - recorded)
        nodes = len(data["nodes"])
    median = statistics.median(totals)
    verdict = "PASS" if median <= bar else "OVER"
    print(
        f"{name:<44} {median:6.3f} s  (data() {statistics.median(data_only):.3f} s)  {nodes:,} nodes  "
        f"runs={runs}  bar ≤{bar:.1f} s {verdict}",
        flush=True,
    )
    return median


def recorded_forward(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """A grad-enabled forward inside a GraphRecorder (the graph read at its end); checks a graph came."""

    def run() -> None:
        with GraphRecorder(model) as recorder:
            model(x)
        if len(recorder.result()) == 0:
            raise RuntimeError("the recorder saw no graph")

    return run


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
    result = Comparison(name, ratios, a_s, b_s, a_faults, b_faults, bar, f"smoke: {pairs} < {MIN_PAIRS} pairs")
    print(result.line(), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser, pairs=15)
    parser.add_argument("--width", type=int, default=128, help="width of the 2000-block MLP")
    parser.add_argument("--no-cnn", action="store_true", help="skip the ResNet-18 comparison")
    args = parser.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    print(f"machine: {machine()}\nrevision: {revision()}\n")

    mlp, mlp_x = deep_mlp(BLOCKS, args.width), torch.randn(64, args.width)
    chain, chain_x = Chain(CHAIN_STEPS), torch.randn(16)
    print(f"extraction, record_graph(model, x).data(), median of {args.pairs} runs after {WARMUP_PAIRS} warm-ups:")
    extraction(f"{BLOCKS}-block MLP, width {args.width}, batch 64", mlp, mlp_x, args.pairs, BARS["mlp_extract_s"])
    extraction(f"{2 * CHAIN_STEPS:,}-node chain", chain, chain_x, args.pairs, BARS["chain_extract_s"])

    print("\nrecording forward (GraphRecorder) vs plain grad-enabled forward:")
    bar = BARS["recording_forward"]
    results = [
        ratio(
            f"{BLOCKS}-block MLP w{args.width} b64",
            plain_forward(mlp, mlp_x),
            recorded_forward(mlp, mlp_x),
            args.pairs,
            bar,
        )
    ]
    if not args.no_cnn:
        cnn, cnn_x = ResNet18().eval(), torch.randn(8, 3, 224, 224)
        results.append(
            ratio("ResNet-18 b8 224²", plain_forward(cnn, cnn_x), recorded_forward(cnn, cnn_x), args.pairs, bar)
        )
        print("\npersistent node-hook recorder (one node_pre hook, capture) vs plain, ResNet-18 b8 224²:")
        bar = BARS["node_hook_recorder"]
        forward = plain_forward(cnn, cnn_x)
        results.append(ratio("forward", forward, with_node_hook(cnn, cnn_x, forward, fires=False), args.pairs, bar))
        step = plain_step(cnn, cnn_x)
        results.append(ratio("forward+backward", step, with_node_hook(cnn, cnn_x, step, fires=True), args.pairs, bar))
    print("\n" + MARKDOWN_HEADER)
    for result in results:
        print(result.markdown_row())


if __name__ == "__main__":
    main()
