"""Gradient hooks on parameters FSDP shards.

FSDP2 (``fully_shard``) shows each parameter as a sharded DTensor between steps, and puts a full-shape Parameter in the
module during forward and backward: autograd sees only that one, so a ``grad`` hook goes on it (found through FSDP2's
state, ``_torch.fsdp2_param_state``) and fires with this rank's gradient before the reduce-scatter. ``post_accumulate``
stays on the DTensor: FSDP2 calls it after the reduce-scatter, with the reduced shard as ``.grad``. FSDP1's original
parameters (``use_orig_params=True``) take neither: their gradients come through the flat parameter, so both refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from .._torch import fsdp2_param_state, fsdp2_unsharded_param
from ..capture.dtensor import is_dtensor
from ..display import quoted
from ..kind_table import Kind
from ..model.distributed import imported_class
from .owned import OwnedHandle, own

FSDP2_GRAD_NOTE = (
    "FSDP2 shards this parameter: autograd never sees the sharded DTensor, so the hook is on the full-shape Parameter "
    "FSDP2 puts in the module for forward and backward, and fires with this rank's gradient before the reduce-scatter "
    "(not yet averaged over ranks); 'post_accumulate' sees the reduced shard after it"
)
FSDP2_POST_NOTE = (
    "FSDP2 shards this parameter: the hook fires after the reduce-scatter, with this rank's reduced shard of the "
    "gradient (the DTensor's .grad; its full_tensor() is the mean over ranks), called by FSDP2 itself; backwards under "
    "set_requires_gradient_sync(False) reduce nothing and fire it not, until the backward that syncs; 'grad' sees this "
    "rank's gradient before the reduce-scatter"
)


def fsdp2_state(root: nn.Module, param: torch.Tensor) -> Any | None:
    """FSDP2's state of ``param`` when ``fully_shard`` shards it (a DTensor); else None."""
    return fsdp2_param_state(root, param) if is_dtensor(param) else None


def refusal(root: nn.Module, path: str, param: torch.Tensor, specs: Sequence[Kind]) -> str | None:
    """Why a gradient kind cannot be attached to parameter ``param`` at ``path`` of a model FSDP shards; None when
    it can."""
    gradient = [s for s in specs if s.gradient]
    # Looked up, never imported: a model holding FSDP was made after its module was imported (and that import is slow).
    fsdp1 = imported_class("torch.distributed.fsdp", "FullyShardedDataParallel")
    fsdp2 = imported_class("torch.distributed.fsdp", "FSDPModule")
    flat = imported_class("torch.distributed.fsdp", "FlatParameter")
    if not gradient or (fsdp1 is None and fsdp2 is None):
        return None
    owner = path.rpartition(".")[0]
    ancestors = _ancestors(root, owner)
    is_flat = flat is not None and isinstance(param, flat)
    if fsdp1 is not None and not is_flat and any(isinstance(m, fsdp1) for m in ancestors):
        return (
            f"parameter {quoted(path)} is an original parameter of FSDP1 (FullyShardedDataParallel, "
            "use_orig_params=True), whose gradient is computed through its flat parameter, so no 'grad' or "
            f"'post_accumulate' hook on it ever fires; hook the module's gradients instead (kind 'backward' on "
            f"{quoted(owner)}), or shard with FSDP2 (torch.distributed.fsdp.fully_shard), whose sharded parameters "
            "take both"
        )
    grad = any(s.name == "param_grad" for s in gradient) and is_dtensor(param)
    under_fsdp2 = fsdp2 is not None and any(isinstance(m, fsdp2) for m in ancestors)
    if grad and under_fsdp2 and fsdp2_param_state(root, param) is None:
        return (
            f"parameter {quoted(path)} is sharded by FSDP2, and this torch keeps the full-shape Parameter that "
            "autograd sees where hookwidgets cannot reach it, so a 'grad' hook on the sharded DTensor would never "
            "fire; attach 'post_accumulate', which FSDP2 calls after the reduce-scatter"
        )
    return None


def _ancestors(root: nn.Module, path: str) -> list[nn.Module]:
    """The model and each module on the way to the module at ``path`` (``""``: the model), that one included."""
    found = [root]
    for name in path.split(".") if path else ():
        child = getattr(found[-1], name, None)
        if not isinstance(child, nn.Module):
            break
        found.append(child)
    return found


class UnshardedGrad(RemovableHandle):
    """The handle of a ``grad`` hook on a parameter FSDP2 shards: a tensor hook on its unsharded Parameter, placed
    once FSDP2 made that (now, or at the end of the model's forward that made it) and moved should FSDP2 make another.

    Its id and dict are those of its forward hook on the model (which places the tensor hook); ``remove()`` takes both.
    """

    def __init__(self, root: nn.Module, state: Any, hook: Callable[[torch.Tensor], Any], eager: Callable[..., Any]):
        self._state = state
        self._hook = hook
        self._on: torch.Tensor | None = None  # the Parameter the tensor hook is on
        self._tensor_handle: RemovableHandle | None = None
        self._arming: OwnedHandle = own(root, root.register_forward_hook(eager(self._arm)))
        self.hooks_dict_ref = self._arming.hooks_dict_ref
        self.id = self._arming.id
        self.extra_dict_ref = self._arming.extra_dict_ref
        self._arm()

    def _arm(self, *unused: Any) -> None:
        unsharded = fsdp2_unsharded_param(self._state)
        if unsharded is None or unsharded is self._on:
            return
        if self._tensor_handle is not None:
            self._tensor_handle.remove()
        self._tensor_handle = unsharded.register_hook(self._hook)  # type: ignore[no-untyped-call]  # unannotated in torch
        self._on = unsharded

    def remove(self) -> None:
        self._arming.remove()
        if self._tensor_handle is not None:
            self._tensor_handle.remove()
            self._tensor_handle = None
        self._on = None
