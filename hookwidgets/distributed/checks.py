"""Refusals with the fix: not a DDP model, no process group, a DDP model that already has a comm hook."""

from __future__ import annotations

import weakref
from typing import Any

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

# DDP models that have an inspector's comm hook, so a second inspector can say where the first came from.
INSPECTED: weakref.WeakSet[DistributedDataParallel] = weakref.WeakSet()

WRAP_FIX = (
    "call torch.distributed.init_process_group('gloo' or 'nccl', rank=..., world_size=...) in every process, "
    "then ddp = torch.nn.parallel.DistributedDataParallel(model)"
)


def require_ddp(model: Any, who: str = "DDPInspector", then: str = "pass ddp") -> DistributedDataParallel:
    """``model`` itself if it is a DistributedDataParallel; otherwise a TypeError naming it and the fix."""
    if isinstance(model, DistributedDataParallel):
        return model
    if not dist.is_available():
        raise RuntimeError(
            f"{who} needs torch.distributed, which this torch build lacks (torch.distributed.is_available() is False)"
        )
    raise TypeError(
        f"{who} needs a torch.nn.parallel.DistributedDataParallel model, got {type(model).__name__}: {WRAP_FIX} "
        f"and {then}"
    )


def require_process_group(who: str = "DDPInspector") -> None:
    """A RuntimeError with the fix when no default process group exists (never created, or destroyed)."""
    if not dist.is_initialized():
        raise RuntimeError(
            f"{who} found no torch.distributed process group (never initialised, or already destroyed): "
            "call torch.distributed.init_process_group(...) in every rank before it, and "
            "torch.distributed.destroy_process_group() only after training"
        )


def require_no_comm_hook(ddp: DistributedDataParallel) -> None:
    """A RuntimeError when ``ddp`` already has a communication hook: DDP allows one and cannot remove it."""
    if ddp in INSPECTED:
        existing = "the comm hook of an earlier DDPInspector (ex.watch_ddp() makes one too)"
    elif ddp._comm_hooks:
        existing = f"the comm hook {getattr(ddp._comm_hooks[0][0], '__qualname__', ddp._comm_hooks[0][0])!r}"
    else:
        builtin = ddp._get_ddp_logging_data().get("comm_hook")
        if not builtin:
            return
        existing = f"the built-in comm hook {builtin}"
    raise RuntimeError(
        f"this DistributedDataParallel model already has {existing}, and DDP allows one communication "
        "hook per model and cannot remove it. Keep using the first inspector (its close() only stops "
        "recording), or wrap the module in a new DistributedDataParallel and pass your hook as "
        "DDPInspector(ddp, hook=your_hook) instead of registering it yourself."
    )
