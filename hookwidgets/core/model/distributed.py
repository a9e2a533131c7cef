"""Whether a model is part of a job across ranks: the distributed wrapper it holds, where, and over how many ranks.

A forward of such a model issues collectives (FSDP's all-gathers, DDP's buffer broadcast, a DTensor's
redistribution) that pair with the other ranks' own: a forward one rank runs alone hangs or aborts the job. Found
by type (torch's public classes), never by name; a class whose module was never imported cannot be in the model.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import torch
from torch import nn

from ..display import quoted


class Distributed(NamedTuple):
    """A distributed wrapper in a model whose process group spans more than one rank, as plain data."""

    wrapper: str
    """What it is: ``"FSDP2 (fully_shard)"``, ``"FSDP (FullyShardedDataParallel)"``, ``"DDP
    (DistributedDataParallel)"`` or ``"DTensor"``."""
    path: str
    """Where: the module's path (``""`` the model itself), or the DTensor parameter's or buffer's name."""
    world: int
    """How many ranks its process group (or device mesh) spans."""


def find_distributed(model: nn.Module) -> Distributed | None:
    """The first distributed wrapper of ``model`` (in module order) spanning more than one rank, or None."""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return None  # no process group: no wrapper can issue a collective (the common case, at no cost)
    kinds = _wrapper_types()
    dtensor = imported_class("torch.distributed.tensor", "DTensor")
    if not kinds and dtensor is None:
        return None
    for path, module in model.named_modules(remove_duplicate=True):
        for kind, name in kinds:
            if isinstance(module, kind):
                world = _world(module)
                if world > 1:
                    return Distributed(name, path, world)
        if dtensor is None:
            continue
        for name, tensor in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]:
            if isinstance(tensor, dtensor) and tensor.device_mesh.size() > 1:
                return Distributed("DTensor", f"{path}.{name}" if path else name, tensor.device_mesh.size())
    return None


def view_averse(model: nn.Module) -> list[nn.Module]:
    """The modules of ``model`` whose own forward hook warns at every forward when their output is a view: FSDP2's
    (``fully_shard``), whose post-forward hook says an in-place op on a view would drop its pre-backward hook."""
    kind = imported_class("torch.distributed.fsdp", "FSDPModule")
    return [] if kind is None else [module for module in model.modules() if isinstance(module, kind)]


def refusal(found: Distributed, what: str) -> str:
    """Why ``what`` (an explorer run the user asked for) does not run on this model, and the fix."""
    return (
        f"{what} would run {_where(found)} alone: its collectives would not pair with the other ranks' and hang or "
        "abort the job; if every rank makes the same explorer calls in the same order, create the explorer with "
        "collective=True on every rank"
    )


def skipped(found: Distributed, what: str) -> str:
    """Why ``what`` (a run the explorer makes for itself) was skipped on this model, and the fix."""
    return (
        f"{what} was skipped: it would run {_where(found)} alone, and its collectives would not pair with the "
        "other ranks'; with collective=True on every rank (each making the same explorer calls) it runs"
    )


def _where(found: Distributed) -> str:
    at = "the model itself" if not found.path else quoted(found.path)
    return f"a forward of a model whose {found.wrapper} at {at} spans {found.world} ranks on this rank"


_NAMES = (
    ("torch.distributed.fsdp", "FSDPModule", "FSDP2 (fully_shard)"),
    ("torch.distributed.fsdp", "FullyShardedDataParallel", "FSDP (FullyShardedDataParallel)"),
    ("torch.nn.parallel", "DistributedDataParallel", "DDP (DistributedDataParallel)"),
)


def _wrapper_types() -> list[tuple[type[Any], str]]:
    """The wrapper classes whose modules are imported (a model cannot hold one whose module never was)."""
    found = []
    for module, name, label in _NAMES:
        kind = imported_class(module, name)
        if kind is not None:
            found.append((kind, label))
    return found


def imported_class(module: str, name: str) -> type[Any] | None:
    """Class ``name`` of ``module`` if that module was imported, else None (no object of it can exist then); never
    imports it (``torch.distributed.tensor`` alone takes ~0.8 s)."""
    kind = getattr(sys.modules.get(module), name, None)
    return kind if isinstance(kind, type) else None


def _world(module: nn.Module) -> int:
    """How many ranks ``module``'s wrapper spans: its process group's, else its sharded parameters' mesh."""
    group: Any = getattr(module, "process_group", None)  # DDP's and FullyShardedDataParallel's public attribute
    if group is not None:
        try:
            return int(torch.distributed.get_world_size(group))
        except (RuntimeError, ValueError):  # a group destroyed: no collective can be issued on it
            return 1
    for param in module.parameters():  # FSDP2: its parameters are DTensors between steps
        mesh = getattr(param, "device_mesh", None)
        if mesh is not None:
            return int(mesh.size())
    # unsharded now (reshard_after_forward=False, mid-step) or holding no parameter: the default group's size
    return int(torch.distributed.get_world_size()) if torch.distributed.is_initialized() else 1


class DistributedRunError(RuntimeError):
    """An explorer run refused on a model sharded across ranks: it names the wrapper, where, the ranks and the fix."""

    def __init__(self, found: Distributed, what: str) -> None:
        super().__init__(refusal(found, what))
        self.found = found
        """``(wrapper, path, world)``: what the wrapper is, its module path (or the DTensor's name), how many ranks."""
