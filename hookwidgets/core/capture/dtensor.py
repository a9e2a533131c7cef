"""Telling a DTensor (``torch.distributed.tensor``) and reading its local shard without any collective."""

from __future__ import annotations

from typing import Any

import torch


def is_dtensor(t: Any) -> bool:
    """Whether ``t`` is a ``torch.distributed.tensor.DTensor``."""
    dtensor = _dtensor_type()
    return dtensor is not None and isinstance(t, dtensor)


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This rank's local tensor of DTensor ``t`` (its shard, replica or partial value), as it is: no collective,
    no autograd node."""
    with torch.no_grad():  # with grad, to_local() makes a differentiable view
        local: torch.Tensor = t.to_local()  # type: ignore[attr-defined]  # a DTensor's
    return local


def _dtensor_type() -> type | None:
    if not torch.distributed.is_available():
        return None
    from torch.distributed.tensor import DTensor  # imported once torch.distributed is known to exist

    return DTensor
