"""Rank functions for the DDP tests (module level, so spawned processes can import them)."""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from hookwidgets.distributed import DDPInspector

STEPS = 3
# Small buckets so the model's gradients travel in several of them.
DDP_KWARGS = {"bucket_cap_mb": 0.05}


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))


def _train(ddp: DDP, rank: int) -> list[dict[str, torch.Tensor]]:
    """STEPS SGD steps on rank-specific data; the gradients after each backward."""
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    grads = []
    for step in range(STEPS):
        x = torch.randn(16, 32, generator=torch.Generator().manual_seed(100 * step + rank))
        opt.zero_grad(set_to_none=True)
        ddp(x).pow(2).mean().backward()
        grads.append({n: p.grad.clone() for n, p in ddp.module.named_parameters()})
        opt.step()
    return grads


def _same(a: list[dict[str, torch.Tensor]], b: list[dict[str, torch.Tensor]]) -> list[str]:
    """The step.param names whose gradients differ in any value (empty when all are equal)."""
    return [
        f"{step}.{name}"
        for step, (ga, gb) in enumerate(zip(a, b, strict=True))
        for name in ga
        if not torch.equal(ga[name], gb[name])
    ]


def inspect_runs(rank: int, world: int, log_dir: str) -> dict[str, dict[str, Any]]:
    """``inspect_run`` with allreduce and with fp16 compression, in one spawn (ranks start slowly)."""
    return {mode: inspect_run(rank, world, f"{log_dir}/{mode}", mode == "fp16") for mode in ("allreduce", "fp16")}


def inspect_run(rank: int, world: int, log_dir: str, compressed: bool) -> dict[str, Any]:
    """A plain DDP run and an inspected one on the same model and data; what each saw."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook

    model = make_model()
    plain = DDP(copy.deepcopy(model), **DDP_KWARGS)
    if compressed:
        plain.register_comm_hook(None, fp16_compress_hook)
    reference = _train(plain, rank)
    inspected = DDP(copy.deepcopy(model), **DDP_KWARGS)
    inspector = DDPInspector(inspected, hook=fp16_compress_hook if compressed else None, log_dir=log_dir)
    grads = _train(inspected, rank)
    gathered = inspector.gather()
    everywhere = inspector.gather(dst=None)
    ready = inspector.gather(records="ready")
    inspector.close()
    dist.barrier()  # every rank's log is complete before rank 0's caller reads it
    return {
        "differ": _same(reference, grads),
        "records": inspector.records,
        "ready": inspector.ready_order,
        "gathered": gathered,
        "everywhere": everywhere,
        "gathered_ready": ready,
        "params": [n for n, _ in model.named_parameters()],
        "step": inspector.step,
    }
