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


def tensor_stats(t: torch.Tensor) -> dict[str, float]:
    """The statistics a stats record holds, of a finite tensor, computed here in float64 as the reference."""
    x = t.detach().double().reshape(-1)
    return {
        "mean": x.mean().item(),
        "std": x.std(correction=0).item(),
        "min": x.min().item(),
        "max": x.max().item(),
        "norm": x.norm().item(),
        "zero_fraction": (x == 0).double().mean().item(),
        "nan": 0,
        "inf": 0,
        "numel": x.numel(),
    }


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
    ex.attach("0.weight", "grad", action="stats")  # a DTensor parameter autograd sees itself: its gradient, sharded
    other = Explorer(partial, collective=collective)
    other.attach("0", "forward", action="stats")
    full, grads = [], []
    with counted() as explored:
        for step in range(STEPS):
            out = model(torch.randn(3, 4, generator=torch.Generator().manual_seed(step)))  # the same input everywhere
            full.append(tensor_stats(out.full_tensor()))
            model.zero_grad(set_to_none=True)
            out.to_local().pow(2).sum().backward()
            grads.append(tensor_stats(model[0].weight.grad.full_tensor()))
            partial(torch.full((2,), float(rank + 1)))
        synced = ex.sync_stats() if collective else None
        if collective:
            other.sync_stats()
    records = [(r.step, r.stats, r.scope) for r in ex.captures["1"]["forward"]]
    grad_records = [(r.step, r.stats, r.scope) for r in ex.captures["0.weight"]["grad"]]
    partial_scopes = sorted({r.scope or "" for r in other.captures["0"]["forward"]})
    ex.close()
    other.close()
    return {
        "records": records,
        "full": full,
        "grad_records": grad_records,
        "grads": grads,
        "synced": synced,
        "explored": explored,
        "partial": partial_scopes,
    }


def all_runs(rank: int, world: int) -> dict[str, Any]:
    """Every scenario above in one pair of processes (spawning ranks costs more than the runs)."""
    return {
        "fsdp": fsdp_grad_stats(rank, world),
        "one_rank": fsdp_one_rank_explorer(rank, world),
        "tensor_parallel": tensor_parallel_stats(rank, world, collective=True),
    }


def _plain_grads(rank: int, step: int) -> dict[str, torch.Tensor]:
    """This rank's gradients of the unsharded model on its batch of ``step``: FSDP2's before the reduce-scatter."""
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    plain(_batch(rank, step)).pow(2).mean().backward()
    return {name: p.grad for name, p in plain.named_parameters()}


def _tensor_hooks(model: nn.Module) -> list[Any]:
    """The tensor and post-accumulate hooks on every sharded parameter and on FSDP2's unsharded ones."""
    found = []
    for name, p in model.named_parameters():
        found.append(
            (name, list((p._backward_hooks or {}).items()), list((p._post_accumulate_grad_hooks or {}).items()))
        )
    for module in (model, model[0]):
        for state in module._get_fsdp_state()._fsdp_param_group.fsdp_params:
            unsharded = getattr(state, "_unsharded_param", None)
            if unsharded is not None:
                found.append((state._param_fqn, list((unsharded._backward_hooks or {}).items())))
    return found


def fsdp_param_hooks(rank: int, world: int) -> dict[str, Any]:
    """grad and post_accumulate hooks on FSDP2-sharded parameters: what they saw against the unsharded gradients and the
    reduced shards, their notes, a backward without gradient sync, and the hooks left as found after close()."""
    from tests.conftest import hook_state

    model = fsdp_model()
    ex = Explorer(model)
    ex.attach("0.weight", "grad")  # before any forward: FSDP2 has made no unsharded Parameter yet
    ex.attach("2.weight", "post_accumulate")
    shards: list[torch.Tensor] = []
    _train(model, rank, lambda step: shards.append(model.get_parameter("2.weight").grad.to_local().clone()))
    grads = [r.tensor for r in ex.captures["0.weight"]["grad"]]
    posts = [r.tensor for r in ex.captures["2.weight"]["post_accumulate"]]
    expected = [_plain_grads(rank, step) for step in range(STEPS)]
    model.zero_grad(set_to_none=True)
    model.set_requires_gradient_sync(False)  # gradient accumulation: no reduce-scatter, so no post_accumulate
    model(_batch(rank, 0)).pow(2).mean().backward()
    model.set_requires_gradient_sync(True)
    counts = {"grad": len(ex.captures["0.weight"]["grad"]), "post": len(ex.captures["2.weight"]["post_accumulate"])}
    notes = {h.path: h.note for h in ex.hooks}
    ex.close()
    first_left = _tensor_hooks(model)
    ours_left = [
        (path, name)
        for (path, name), hooks in hook_state(model).items()
        if isinstance(hooks, list) and any(getattr(fn, "__module__", "").startswith("hookwidgets") for _, fn in hooks)
    ]
    # FSDP2 has made its unsharded Parameters and state-dict hooks now: a second explorer leaves everything as found
    before = hook_state(model)
    again = Explorer(model)
    again.attach("2.bias", "grad")  # placed on the unsharded Parameter at once
    armed = [entry[0] for entry in _tensor_hooks(model) if len(entry) == 2 and entry[1]]
    model.zero_grad(set_to_none=True)
    model(_batch(rank, 0)).pow(2).mean().backward()
    bias = [r.tensor for r in again.captures["2.bias"]["grad"]]
    again.close()
    return {
        "grads_match": [torch.equal(g, e["0.weight"]) for g, e in zip(grads, expected, strict=True)],
        "grad_types": sorted({type(g).__name__ for g in grads}),
        "post_types": sorted({type(p).__name__ for p in posts}),
        "posts_match": [torch.equal(p.to_local(), s) for p, s in zip(posts, shards, strict=True)],
        "counts": counts,
        "notes": notes,
        "first_left": [entry for entry in first_left if any(entry[1:])],
        "ours_left": ours_left,
        "armed": armed,
        "bias_match": [torch.equal(b, expected[0]["2.bias"]) for b in bias],
        "hooks_as_found": hook_state(model) == before,
        "tensor_hooks_left": [entry for entry in _tensor_hooks(model) if any(entry[1:])],
    }


def fsdp1_refusals(rank: int, world: int) -> dict[str, str]:
    """What attaching grad and post_accumulate to an FSDP1 original parameter (use_orig_params=True) raises."""
    import warnings

    from torch.distributed.fsdp import FullyShardedDataParallel

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FSDP1's deprecation
        model = FullyShardedDataParallel(
            nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)),
            use_orig_params=True,
            device_id=torch.device("cpu"),
        )
    ex = Explorer(model)
    refused = {}
    for kind in ("grad", "post_accumulate"):
        try:
            ex.attach("_fsdp_wrapped_module.0.weight", kind)
        except ValueError as exc:
            refused[kind] = str(exc)
    ex.close()
    return refused


def param_runs(rank: int, world: int) -> dict[str, Any]:
    """The sharded-parameter scenarios in one pair of processes."""
    return {"fsdp2": fsdp_param_hooks(rank, world), "fsdp1": fsdp1_refusals(rank, world)}
