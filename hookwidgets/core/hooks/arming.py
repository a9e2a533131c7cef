"""A full backward hook set aside while its module returns a dict or dataclass, which torch cannot hook.

torch wraps every call of a module with a full backward (pre-)hook; when the output is neither a Tensor nor a
tuple (a transformers ``ModelOutput``) the hook never fires, and torch warns at every forward. A forward hook of
ours sees the output first: from then on the hook leaves the module's hook dict, so torch neither wraps the call
nor warns (the hook's note says why once), and goes back the first time the module returns a Tensor or a tuple.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from .info import HookInfo


class BackwardArming:
    """Follows one module's outputs for the full backward (pre-)hook of ``handle``: out while torch cannot hook them."""

    __slots__ = ("fn", "handle", "info", "prepend")

    def __init__(self, handle: RemovableHandle, info: HookInfo, prepend: bool = False) -> None:
        self.handle, self.info, self.prepend = handle, info, prepend
        self.fn: Any = None  # the hook while it is out of the dict

    def follow(self, output: Any) -> bool:
        """Set the hook aside for an ``output`` torch cannot hook, put it back for a Tensor or a tuple; returns
        whether it is aside."""
        unhookable = not isinstance(output, (torch.Tensor, tuple))  # torch's own test before it warns
        hooks = self.handle.hooks_dict_ref()
        if hooks is None:
            return unhookable
        if unhookable and self.fn is None:
            self.fn = hooks.pop(self.handle.id, None)
        elif not unhookable and self.fn is not None:
            fn, self.fn = self.fn, None
            if self.info.active:  # a hook detached while aside stays removed
                hooks[self.handle.id] = fn
                if self.prepend:
                    hooks.move_to_end(self.handle.id, last=False)
        return unhookable
