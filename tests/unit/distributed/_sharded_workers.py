"""Rank functions for the tests of DTensor statistics and hooks on FSDP2-sharded parameters (module level, so spawned
processes can import them)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DeviceMesh, DTensor, Partial, init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

from hookwidgets.core import Explorer
from hookwidgets.core.capture.stats import tensor_stats

STEPS = 3
PARAMS = ("0.weight", "2.weight", "2.bias")  # 2.weight (3, 6) and 2.bias (3,) split unevenly over 2 ranks: 2 and 1
COLLECTIVES = (
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "broadcast",
    "reduce_scatter_tensor",
    "reduce_scatter",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "gather",
    "scatter",
    "reduce",
)


def fsdp_model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    fully_shard(model[0])
    fully_shard(model)
    return model


def _batch(rank: int, step: int) -> torch.Tensor:
    return torch.randn(5, 4, generator=torch.Generator().manual_seed(100 * step + rank))


@contextlib.contextmanager
def counted() -> Iterator[dict[str, int]]:
    """Count the calls of torch.distributed's collectives inside the block (the counts by name)."""
    counts = dict.fromkeys(COLLECTIVES, 0)
    originals = {name: getattr(dist, name) for name in COLLECTIVES}

    def counting(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return fn(*args, **kwargs)

        return call

    for name, fn in originals.items():
        setattr(dist, name, counting(name, fn))
    try:
        yield counts
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


def _train(model: nn.Module, rank: int, after_backward: Callable[[int], None] | None = None) -> list[float]:
    losses = []
    for step in range(STEPS):
        model.zero_grad(set_to_none=True)
        loss = model(_batch(rank, step)).pow(2).mean()
        loss.backward()
        losses.append(loss.item())
        if after_backward is not None:
            after_backward(step)
    return losses


def fsdp_grad_stats(rank: int, world: int) -> dict[bool, dict[str, Any]]:
    """``_grad_stats`` without and with ``collective``, each on a model of its own."""
    return {collective: _grad_stats(rank, collective) for collective in (False, True)}


def _grad_stats(rank: int, collective: bool) -> dict[str, Any]:
    """post_accumulate stats on FSDP2-sharded parameters; the records' stats and scopes beside the full and local
    gradients' statistics, and the collectives each training run issued."""
    model = fsdp_model()
    with counted() as plain:
        _train(model, rank)
    ex = Explorer(model, collective=collective)
    for name in PARAMS:
        ex.attach(name, "post_accumulate", action="stats")
    full: dict[str, list[dict[str, float]]] = {name: [] for name in PARAMS}
    local: dict[str, list[dict[str, float]]] = {name: [] for name in PARAMS}

    def reference(step: int) -> None:
        for name in PARAMS:
            grad = model.get_parameter(name).grad
            full[name].append(tensor_stats(grad.full_tensor()))  # every rank, outside any hook
            local[name].append(tensor_stats(grad.to_local()))

    with counted() as explored:
        _train(model, rank, reference)
        synced = ex.sync_stats() if collective else None
    records = {name: [(r.step, r.stats, r.scope) for r in ex.captures[name]["post_accumulate"]] for name in PARAMS}
    notes = {name: next(h.note for h in ex.hooks if h.path == name) for name in PARAMS}
    ex.close()
    return {
        "records": records,
        "full": full,
        "local": local,
        "notes": notes,
        "synced": synced,
        "plain": plain,
        "explored": explored,
    }


def fsdp_one_rank_explorer(rank: int, world: int) -> dict[str, Any]:
    """Stats hooks on sharded gradients and outputs on rank 0 only: the job goes on, losses as without them."""
    plain = _train(fsdp_model(), rank)
    model = fsdp_model()
    ex = Explorer(model) if rank == 0 else None
    if ex is not None:
        for name in PARAMS:
            ex.attach(name, "post_accumulate", action="stats")
        ex.attach("0", "forward", action="stats")
    losses = _train(model, rank)
    scopes = sorted({r.scope or "" for r in ex.captures["0.weight"]["post_accumulate"]}) if ex is not None else []
    if ex is not None:
        ex.close()
    return {"plain": plain, "losses": losses, "scopes": scopes}


class _PartialOut(nn.Module):
    """Returns its input as a Partial DTensor: the full value is the sum of the ranks' inputs."""

    def __init__(self, mesh: DeviceMesh) -> None:
        super().__init__()
        self.mesh = mesh

    def forward(self, x: torch.Tensor) -> DTensor:
        return DTensor.from_local(x, self.mesh, [Partial()])


def tensor_parallel_stats(rank: int, world: int, collective: bool) -> dict[str, Any]:
    """forward stats on a column-parallel Linear's DTensor output (and a Partial one): records beside the full
    output's statistics, over STEPS forwards."""
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh())
    parallelize_module(model, mesh, {"0": ColwiseParallel(use_local_output=False)})
    partial = nn.Sequential(_PartialOut(mesh))
    ex = Explorer(model, collective=collective)
    ex.attach("1", "forward", action="stats")  # the Tanh: its output is the model's, a DTensor sharded as the Linear's
    other = Explorer(partial, collective=collective)
    other.attach("0", "forward", action="stats")
    full = []
    with counted() as explored:
        for step in range(STEPS):
            out = model(torch.randn(3, 4, generator=torch.Generator().manual_seed(step)))  # the same input everywhere
            full.append(tensor_stats(out.full_tensor()))
            partial(torch.full((2,), float(rank + 1)))
        synced = ex.sync_stats() if collective else None
        if collective:
            other.sync_stats()
    records = [(r.step, r.stats, r.scope) for r in ex.captures["1"]["forward"]]
    partial_scopes = sorted({r.scope or "" for r in other.captures["0"]["forward"]})
    ex.close()
    other.close()
    return {"records": records, "full": full, "synced": synced, "explored": explored, "partial": partial_scopes}


def all_runs(rank: int, world: int) -> dict[str, Any]:
    """Every scenario above in one pair of processes (spawning ranks costs more than the runs)."""
    return {
        "fsdp": fsdp_grad_stats(rank, world),
        "one_rank": fsdp_one_rank_explorer(rank, world),
        "tensor_parallel": tensor_parallel_stats(rank, world, collective=True),
    }
