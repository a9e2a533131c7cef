"""Rank functions for the run log tests (module level, so spawned processes and torchrun can import them)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import hookwidgets
from hookwidgets.core import Explorer

STEPS = 4
NAN_STEP = 2  # the explorer's step (1 for the first forward) whose batch holds a NaN on NAN_RANK
NAN_RANK = 1


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 2))


def batch(step: int, rank: int) -> torch.Tensor:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(100 * step + rank))
    if step == NAN_STEP and rank == NAN_RANK:
        x[1, 3] = float("nan")
    return x


def logged_training(rank: int, world: int, log_dir: str) -> dict[str, Any]:
    """DDP training with stats on every layer and ``record_to`` on every rank; rank 0 opens the log between steps.

    Returns what the explorer saw (its summary rows, per step) and what rank 0's reader saw mid-run."""
    model = DDP(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ex = Explorer(model)
    ex.attach("", ["global_forward", "global_grad"], action="stats")
    log = ex.record_to(log_dir)
    ex.watch_ddp()  # its bucket records go into the run log's directory
    seen: list[list[int]] = []
    for step in range(1, STEPS + 1):
        opt.zero_grad(set_to_none=True)
        model(batch(step, rank)).pow(2).mean().backward()
        opt.step()
        torch.distributed.barrier()  # each rank's frame of the step before is on disk (written as this step began)
        if rank == 0:
            run = hookwidgets.open_run(log_dir)
            seen.append(run.steps)
            run.close()
        torch.distributed.barrier()  # rank 1 begins no step (writes no frame) while rank 0 reads
    summary = ex.summary()
    ex.close()
    return {"summary": summary, "seen": seen, "rank": log.rank, "world": log.world, "closed": log.closed}
