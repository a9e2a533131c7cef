"""What DDPInspector costs per training step: 2 gloo ranks on the CPU, inspected DDP against plain DDP.

Run: ``.venv/bin/python bench/ddp_overhead.py [--pairs N] [--threads T]`` (T threads per rank).
Each rank holds copies of one MLP wrapped in DDP: A plain (DDP's built-in C++ allreduce), B with
the inspector. A step is zero_grad (gradients kept, not None) + forward + backward (with the
allreduce) + SGD step. The A/B pairs run inside the ranks, in the same order on both (every step is
a collective); rank 0's timings are reported.
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from _protocol import (
    MARKDOWN_HEADER,
    WARMUP_PAIRS,
    Comparison,
    compare,
    machine,
    progress_to_stderr,
    quantile,
    revision,
    set_threads,
)
from _ranks import parse_arguments, spawn_ranks
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook
from torch.nn.parallel import DistributedDataParallel as DDP

from hookwidgets.distributed import DDPInspector

WORLD = 2
BAR = 1.15
BATCH = 64
WIDTH = 2048


def make_model() -> nn.Module:
    """An MLP of 8.4M parameters (33.6 MB of gradients to allreduce per step)."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(1024, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1024)
    )  # fmt: skip


class Stepper:
    """One training step of ``ddp`` on ``x`` per call; keeps each call's process CPU time (all threads).

    CPU time barely depends on what else the shared machine runs, so it backs up the wall-time ratios.
    """

    def __init__(self, ddp: DDP, x: torch.Tensor) -> None:
        self.ddp, self.x = ddp, x
        self.opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        self.cpu: list[float] = []

    def __call__(self) -> None:
        start = time.process_time()
        # Gradients kept between steps: with set_to_none=True each step allocates 33 MB of fresh
        # gradients, and whether glibc serves them from its heap or from new pages (8,000 faults, +20%)
        # depended on which DDP copy was created when, not on the inspector.
        self.opt.zero_grad(set_to_none=False)
        self.ddp(self.x).pow(2).mean().backward()
        self.opt.step()
        self.cpu.append(time.process_time() - start)


def timed(name: str, a: Stepper, b: Stepper, pairs: int, show: bool, **options: Any) -> tuple[Comparison, str]:
    """The protocol's comparison of two steppers, and a line on their CPU time per step (warm-ups left out)."""
    result = compare(name, a, b, pairs=pairs, show=show, **options)
    a_cpu, b_cpu = a.cpu[WARMUP_PAIRS:], b.cpu[WARMUP_PAIRS:]
    ratios = [tb / ta for ta, tb in zip(a_cpu, b_cpu, strict=True)]
    line = (
        f"{name}: process CPU per step A {statistics.median(a_cpu) * 1e3:.1f} ms, "
        f"B {statistics.median(b_cpu) * 1e3:.1f} ms, median pair ratio {statistics.median(ratios):.3f}× "
        f"(p10–p90 {quantile(ratios, 0.1):.3f}–{quantile(ratios, 0.9):.3f})"
    )
    return result, line


def rank_main(rank: int, address: str, pairs: int, threads: int, log_dir: str, results: Any) -> None:
    """Every comparison on this rank; rank 0 sends its Comparisons (and what the inspectors saw) back."""
    set_threads(threads)
    dist.init_process_group("gloo", init_method=address, rank=rank, world_size=WORLD)
    try:
        model = make_model()
        x = torch.randn(BATCH, 1024, generator=torch.Generator().manual_seed(rank))
        plain = DDP(copy.deepcopy(model))
        inspected = DDP(copy.deepcopy(model))
        logged = DDP(copy.deepcopy(model))
        plain_fp16 = DDP(copy.deepcopy(model))
        inspected_fp16 = DDP(copy.deepcopy(model))
        plain_fp16.register_comm_hook(None, fp16_compress_hook)
        inspectors = [
            DDPInspector(inspected),
            DDPInspector(logged, log_dir=log_dir),
            DDPInspector(inspected_fp16, hook=fp16_compress_hook),
        ]
        show = rank == 0
        timings = [
            timed("DDP step, inspector vs none", Stepper(plain, x), Stepper(inspected, x), pairs, show, bar=BAR),
            timed("DDP step, inspector + log_dir vs none", Stepper(plain, x), Stepper(logged, x), pairs, show),
            timed(
                "fp16 hook: inspected vs plain",
                Stepper(plain_fp16, x),
                Stepper(inspected_fp16, x),
                pairs,
                show,
                note="+ compression error",
            ),
        ]
        seen = [(len(i.records), i.step, i.records[-1]["numel"], len(i.records[-1]["params"])) for i in inspectors]
        for inspector in inspectors:
            inspector.close()
        dist.barrier()
        if rank == 0:
            results.put(("ok", timings, seen, machine()))
    except BaseException as exc:
        results.put(("error", f"rank {rank}: {type(exc).__name__}: {exc}", None, None))
        raise
    finally:
        dist.destroy_process_group()


def run(pairs: int, threads: int) -> tuple[list[tuple[Comparison, str]], list[tuple[int, int, int, int]], str]:
    """Spawn the ranks and return what rank 0 measured (``_ranks.spawn_ranks``)."""
    rows, seen, where = spawn_ranks(rank_main, pairs, threads, world=WORLD, prefix="ddp-bench-")
    return rows, seen, where


def main() -> None:
    args = parse_arguments(__doc__)
    started = time.perf_counter()
    command = " ".join([".venv/bin/python", "bench/ddp_overhead.py", *sys.argv[1:]])
    params = sum(p.numel() for p in make_model().parameters())
    model = f"MLP 1024-{WIDTH}-{WIDTH}-1024, {params:,} parameters, batch {BATCH}; {WORLD} gloo ranks"
    with progress_to_stderr():
        print(f"$ {command}\nhookwidgets at {revision()}\nmodel: {model}")
        rows, seen, where = run(args.pairs, args.threads)
        print(f"took {time.perf_counter() - started:.0f} s")
    date = time.strftime("%Y-%m-%d %H:%M %Z")
    lines = [
        "## DDP communication-hook inspector (issue 7)",
        "",
        f"`{command}` — {date}, rank 0: {where}; hookwidgets at `{revision()}`.",
        "",
        f"Model: {model}. A: a DDP training step with torch's default allreduce; B: the same step with a"
        " `DDPInspector` wrapping it (bucket records, gradient-ready order); the fp16 row compares torch's"
        " `fp16_compress_hook` inspected (with its compression error measured) against it plain.",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result, _ in rows),
        "",
        *(f"- {cpu_line}" for _, cpu_line in rows),
        *(
            f"- {label}: {records} bucket records over {steps} steps; last bucket {numel:,} elements, {names} params"
            for label, (records, steps, numel, names) in zip(("inspector", "+ log_dir", "fp16"), seen, strict=True)
        ),
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
