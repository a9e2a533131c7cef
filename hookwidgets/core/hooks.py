"""The hook registry: attaches hooks of each kind to modules, owns every handle, removes them all."""

from __future__ import annotations

import threading
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from .capture import CaptureStore, make_record

MODULE_KINDS = ("forward_pre", "forward", "grad")
ACTIONS = ("capture",)
ON_ERROR = ("record", "raise")


@dataclass
class HookInfo:
    """A live hook the explorer attached: what it does and how it fared."""

    target: str
    kind: str
    action: str = "capture"
    copy: bool = False
    fired: int = 0
    last_error: str | None = None
    note: str | None = None
    active: bool = True
    _handles: list[RemovableHandle] = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        error = ", last error: " + self.last_error.splitlines()[-1] if self.last_error else ""
        note = f", note: {self.note}" if self.note else ""
        return f"<hook {self.kind} on {self.target!r}: {self.action}, fired {self.fired}{error}{note}>"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for display and export."""
        return {
            "target": self.target,
            "kind": self.kind,
            "action": self.action,
            "fired": self.fired,
            "error": self.last_error,
            "note": self.note,
        }


def named_tensors(prefix: str, value: Any) -> dict[str, torch.Tensor]:
    """Tensors inside a (nested) tuple, list or dict, named ``prefix``, ``prefix.0``, ``prefix.key``…"""
    if isinstance(value, torch.Tensor):
        return {prefix: value}
    found: dict[str, torch.Tensor] = {}
    if isinstance(value, (tuple, list)):
        items = enumerate(value)
    elif isinstance(value, dict):
        items = value.items()
    else:
        return found
    for key, item in items:
        found.update(named_tensors(f"{prefix}.{key}", item))
    return found


class HookRegistry:
    """Owns every hook the explorer adds to one model; ``close()`` removes them all.

    Holds no reference to the explorer, so a finalizer on the explorer can call ``close()``.
    """

    def __init__(self, root: nn.Module, store: CaptureStore, on_error: str = "record") -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.store = store
        self.on_error = on_error
        self.step = 0
        self._root = root
        self._hooks: dict[tuple[str, str], HookInfo] = {}
        self._calls: Counter[tuple[str, str]] = Counter()
        self._step_handle: RemovableHandle | None = None
        self._lock = threading.Lock()

    @property
    def hooks(self) -> list[HookInfo]:
        """Live hooks in attach order."""
        return list(self._hooks.values())

    def get(self, target: str, kind: str) -> HookInfo | None:
        """The live hook on ``(target, kind)``, if any."""
        return self._hooks.get((target, kind))

    def attach(
        self, target: str, module: nn.Module, kind: str, action: str = "capture", copy: bool = False
    ) -> HookInfo:
        """Attach one hook; attaching ``(target, kind)`` again replaces it rather than stacking."""
        if kind not in MODULE_KINDS:
            raise ValueError(
                f"unknown hook kind {kind!r} for module {target!r}; choose one of {', '.join(MODULE_KINDS)}"
            )
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; choose one of {', '.join(ACTIONS)}")
        self.detach(target, kind)
        info = HookInfo(target, kind, action, copy)
        register = {"forward_pre": self._attach_forward_pre, "forward": self._attach_forward, "grad": self._attach_grad}
        info._handles.append(register[kind](module, info))
        self._hooks[(target, kind)] = info
        self._ensure_step_tracker()
        return info

    def detach(self, target: str | None = None, kind: str | None = None) -> list[HookInfo]:
        """Remove the hooks matching ``target`` and ``kind`` (None matches all); returns them."""
        removed = [
            info
            for (t, k), info in list(self._hooks.items())
            if (target is None or t == target) and (kind is None or k == kind)
        ]
        for info in removed:
            info.active = False  # tensor hooks already set on live tensors check this flag
            for handle in info._handles:
                handle.remove()
            info._handles.clear()
            del self._hooks[(info.target, info.kind)]
        if not self._hooks and self._step_handle is not None:
            self._step_handle.remove()
            self._step_handle = None
        return removed

    def close(self) -> None:
        """Remove every hook this registry added. Safe to call more than once."""
        self.detach()

    # Steps: one call of the root module. The tracker runs before any other local pre-hook on it.
    def _ensure_step_tracker(self) -> None:
        if self._step_handle is None:
            self._step_handle = self._root.register_forward_pre_hook(self._next_step, prepend=True)

    def _next_step(self, module: nn.Module, args: Any) -> None:
        with self._lock:
            self.step += 1
            self._calls.clear()

    def _next_call(self, info: HookInfo) -> int:
        with self._lock:
            key = (info.target, info.kind)
            call = self._calls[key]
            self._calls[key] = call + 1
            return call

    def _record(self, info: HookInfo, step: int, call: int, tensors: dict[str, torch.Tensor]) -> None:
        """Run the hook's action on what it saw; errors follow the registry's ``on_error`` policy."""
        info.fired += 1
        try:
            self.store.add(make_record(info.target, info.kind, step, call, tensors, info.copy))
        except Exception as exc:  # a failing action must not break the user's forward or backward
            self._failed(info, exc)

    def _failed(self, info: HookInfo, exc: BaseException) -> None:
        info.last_error = "".join(traceback.format_exception(exc)).rstrip()
        if self.on_error == "raise":
            raise exc
        warnings.warn(f"hook {info.kind!r} on {info.target!r} failed: {exc!r} (recorded on ex.hooks)", stacklevel=2)

    def _attach_forward_pre(self, module: nn.Module, info: HookInfo) -> RemovableHandle:
        def forward_pre_hook(mod: nn.Module, args: tuple) -> None:
            self._record(info, self.step, self._next_call(info), named_tensors("args", args))

        return module.register_forward_pre_hook(forward_pre_hook)

    def _attach_forward(self, module: nn.Module, info: HookInfo) -> RemovableHandle:
        def forward_hook(mod: nn.Module, args: tuple, output: Any) -> None:
            self._record(info, self.step, self._next_call(info), named_tensors("output", output))

        # always_call: a forward that raises still reports (with output None) instead of vanishing.
        return module.register_forward_hook(forward_hook, always_call=True)

    def _attach_grad(self, module: nn.Module, info: HookInfo) -> RemovableHandle:
        def arm_tensor_hooks(mod: nn.Module, args: tuple, output: Any) -> None:
            step, call = self.step, self._next_call(info)
            armed = 0
            for name, tensor in named_tensors("output", output).items():
                if tensor.requires_grad:
                    tensor.register_hook(self._grad_hook(info, step, call, "grad_" + name))
                    armed += 1
            if armed:
                info.note = None
            else:
                info.note = (
                    "no output tensor required grad (forward under torch.no_grad / inference_mode, "
                    "or nothing upstream requires grad), so no gradient will come for this call"
                )

        return module.register_forward_hook(arm_tensor_hooks)

    def _grad_hook(self, info: HookInfo, step: int, call: int, name: str) -> Callable[[torch.Tensor], None]:
        def grad_hook(grad: torch.Tensor) -> None:
            if info.active:
                self._record(info, step, call, {name: grad})

        return grad_hook
