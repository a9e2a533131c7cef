"""Rank functions for the tests of explorers on models sharded across ranks (module level: spawned processes import
them). Each returns plain data; the tests assert on it."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh
from torch.nn.parallel import DistributedDataParallel as DDP

from hookwidgets import HookExplorer
from hookwidgets.core import DistributedRunError, Explorer

STEPS = 3


def make_blocks() -> nn.Module:
    """Two residual-free MLP blocks and a head, the same on every rank."""
    torch.manual_seed(0)

    def block(width: int) -> nn.Module:
        return nn.Sequential(nn.Linear(width, 16), nn.GELU(), nn.Linear(16, 16))

    return nn.Sequential(block(8), block(16), nn.Linear(16, 4))


class SelfAttention(nn.Module):
    """One self-attention layer: what ``attention()`` records."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x)[0]


def fsdp2(model: nn.Module, mesh: Any = None) -> nn.Module:
    """``fully_shard`` on each block, then on the model."""
    for child in list(model)[:2]:
        fully_shard(child, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def batch(rank: int, step: int) -> torch.Tensor:
    return torch.randn(6, 8, generator=torch.Generator().manual_seed(100 * step + rank))


def train(model: nn.Module, rank: int) -> list[float]:
    """STEPS SGD steps on rank-specific data: the loss of each."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = model(batch(rank, step)).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def hook_counts(model: nn.Module) -> dict[str, tuple[int, ...]]:
    """How many hooks each module and parameter holds, by path."""
    counts: dict[str, tuple[int, ...]] = {}
    for path, module in model.named_modules():
        dicts = (module._forward_hooks, module._forward_pre_hooks, module._backward_hooks, module._backward_pre_hooks)
        counts[path] = tuple(len(d) for d in dicts)
    for name, param in model.named_parameters():
        counts[name] = (len(param._post_accumulate_grad_hooks or {}), len(param._backward_hooks or {}))
    return counts


def refusals(ex: Explorer) -> dict[str, str]:
    """The message of each run the user asks for, refused on this rank alone ("" when it ran)."""
    calls: dict[str, Callable[[], Any]] = {
        "run": lambda: ex.run(target=0),
        "graph": lambda: ex.graph(),
        "first_nonfinite": lambda: ex.first_nonfinite(),
        "attribute": lambda: ex.attribute(method="saliency", target=0),
        "compare_backward": lambda: ex.compare_backward("1"),
        "logit_lens": lambda: ex.logit_lens(unembed=lambda h: h),
        "patch_sweep": lambda: ex.patch_sweep(ex.example_copy(), ex.example_copy(), layers=["0"]),
        "gradcam": lambda: ex.gradcam("0", target=0),
    }
    said = {}
    for name, call in calls.items():
        try:
            call()
            said[name] = ""
        except DistributedRunError as exc:
            said[name] = str(exc)
    return said


def fsdp_explorer_on_rank_0(rank: int, world: int) -> dict[str, Any]:
    """An explorer with example inputs on rank 0 only, hooks attached, then training on both ranks: the losses equal
    those of the same training without it, and the model's hooks are as found after close()."""
    plain = fsdp2(make_blocks())
    expected = train(plain, rank)
    model = fsdp2(make_blocks())
    result: dict[str, Any] = {"expected": expected}
    if rank == 0:
        ex = Explorer(model, example_inputs=torch.randn(2, 8))
        result["probe_shape"] = ex.tree["shape"]
        backward = ex.attach("1", ["backward", "backward_pre"], action="stats")
        global_backward = ex.attach("", "global_backward", action="stats")
        node = ex.attach("2/AddmmBackward0#0", "node", action="stats")  # no graph recorded to check the id against
        result["notes"] = [info.note for info in [*backward, global_backward, node]]
        result["refusals"] = refusals(ex)
        result["diagnostics"] = ex.diagnostics
        result["losses"] = train(model, rank)
        result["after_training"] = [info.note for info in [*backward, global_backward, node]]
        result["summary_paths"] = sorted({row["path"] for row in ex.summary()})
        ex.close()
        with HookExplorer(model, example_inputs=torch.randn(2, 8)) as shown:  # the widget runs nothing either
            result["widget_tree"] = shown.view is not None and shown.tree["shape"] is None
    else:
        result["losses"] = train(model, rank)
    result["hooks_as_found"] = hook_counts(model) == hook_counts(plain)
    return result


def fsdp_collective(rank: int, world: int) -> dict[str, Any]:
    """An explorer with collective=True and example inputs on every rank: the probe and a run happen on both in
    step, and give the same on both, the training after them the losses of one without them; global_backward on
    FSDP2 modules draws no warning."""
    expected = train(fsdp2(make_blocks()), rank)
    model = fsdp2(make_blocks())
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(7))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ex = Explorer(model, example_inputs=x, collective=True)
        ex.attach("", "global_backward", action="stats")
        output = ex.run(target=0)
        losses = train(model, rank)
        ex.close()
    return {
        "probe": ex.probe_output["shape"],
        "output": output.tolist(),
        "losses": losses,
        "expected": expected,
        "warnings": [str(w.message) for w in caught],
        "diagnostics": ex.diagnostics,
    }


def fsdp_runs(rank: int, world: int) -> dict[str, Any]:
    """Both FSDP2 cases in one job: the explorer on rank 0 alone, then with collective=True on every rank."""
    return {"alone": fsdp_explorer_on_rank_0(rank, world), "collective": fsdp_collective(rank, world)}


def detection(rank: int, world: int) -> dict[str, Any]:
    """DDP, FSDP (FullyShardedDataParallel, inside a Sequential) and a DTensor parameter across 2 ranks: the
    explorer on rank 0 only skips its probe and refuses run(); DDP over a group of one rank and FSDP2 over a mesh of
    one rank are not refused."""
    x = torch.randn(2, 8)
    found: dict[str, Any] = {}
    ddp = DDP(make_blocks())
    fsdp1 = nn.Sequential(FullyShardedDataParallel(make_blocks(), device_id=torch.device("cpu")))
    mesh = init_device_mesh("cpu", (world,))
    holder = make_blocks()
    holder[2].weight = nn.Parameter(distribute_tensor(holder[2].weight.detach(), mesh, [Shard(0)]))
    singles = [dist.new_group([r]) for r in range(world)]  # every rank makes every group
    solo_ddp = DDP(make_blocks(), process_group=singles[rank])
    attention = DDP(SelfAttention())
    solo_fsdp = fsdp2(make_blocks(), mesh=init_device_mesh("cpu", (world, 1), mesh_dim_names=("r", "dp"))["dp"])
    if rank == 0:
        for name, model in (("ddp", ddp), ("fsdp1", fsdp1), ("dtensor", holder)):
            with Explorer(model, example_inputs=x) as ex:
                found[name] = {"diagnostics": ex.diagnostics, "shape": ex.tree["shape"]}
                try:
                    ex.run()
                except DistributedRunError as exc:
                    found[name]["refused"] = str(exc)
                    found[name]["found"] = tuple(exc.found)
        with Explorer(attention, example_inputs=torch.randn(1, 3, 8)) as ex:
            try:
                ex.attention()
            except DistributedRunError as exc:
                found["attention"] = str(exc)
        for name, model in (("solo_ddp", solo_ddp), ("solo_fsdp", solo_fsdp)):
            with Explorer(model, example_inputs=x) as ex:
                found[name] = {"diagnostics": ex.diagnostics, "run": tuple(ex.run().shape)}
    dist.barrier()
    return found
