"""Telling a DTensor (``torch.distributed.tensor``) and reading its local shard without any collective."""

from __future__ import annotations

from typing import Any

import torch

from ..model.distributed import imported_class


def is_dtensor(t: Any) -> bool:
    """Whether ``t`` is a ``torch.distributed.tensor.DTensor`` (on every stats firing: a lookup, never an import)."""
    dtensor = imported_class("torch.distributed.tensor", "DTensor")
    return dtensor is not None and isinstance(t, dtensor)


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This rank's local tensor of DTensor ``t`` (its shard, replica or partial value), as it is: no collective,
    no autograd node."""
    with torch.no_grad():  # with grad, to_local() makes a differentiable view
        local: torch.Tensor = t.to_local()  # type: ignore[attr-defined]  # a DTensor's
    return local
