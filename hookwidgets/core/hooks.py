"""The hook registry: attaches every kind of hook, owns every handle, and removes them all exactly."""

from __future__ import annotations

import threading
import traceback
import warnings
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
import torch.nn.modules.module as module_globals
from torch import nn
from torch.utils.hooks import RemovableHandle

from .actions import Firing, check_action, named_tensors, perform
from .capture import CaptureStore
from .edits import normalize_edits
from .foreign import foreign_hooks
from .kinds import MODULE_KINDS, Kind, check_callable

ON_ERROR = ("record", "raise")
TIMELINE_CAP = 10_000

__all__ = ["MODULE_KINDS", "HookInfo", "HookRegistry", "TimelineEvent", "named_tensors"]


class TimelineEvent(NamedTuple):
    """One hook firing, in the order it happened."""

    step: int
    phase: str
    target: str
    kind: str
    call: int


@dataclass
class HookInfo:
    """A live hook the explorer attached: what it does and how it fared."""

    target: str
    kind: str
    action: str | Callable = "capture"
    edit: tuple = ()
    copy: bool = False
    fired: int = 0
    last_error: str | None = None
    note: str | None = None
    foreign: bool = False
    active: bool = True
    _handles: list[RemovableHandle] = field(default_factory=list, repr=False)

    @property
    def action_name(self) -> str:
        """The action as text: a built-in name or the callable's name."""
        return self.action if isinstance(self.action, str) else getattr(self.action, "__name__", "callable")

    def __repr__(self) -> str:
        if self.foreign:
            return f"<foreign hook {self.kind} on {self.target!r}: {self.action_name} (not the explorer's; left alone)>"
        edit = f" + edit {list(self.edit)}" if self.edit else ""
        error = ", last error: " + self.last_error.splitlines()[-1] if self.last_error else ""
        note = f", note: {self.note}" if self.note else ""
        return f"<hook {self.kind} on {self.target!r}: {self.action_name}{edit}, fired {self.fired}{error}{note}>"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for display and export."""
        return {
            "target": self.target,
            "kind": self.kind,
            "action": self.action_name,
            "edit": [list(e) for e in self.edit],
            "fired": self.fired,
            "error": self.last_error,
            "note": self.note,
            "foreign": self.foreign,
        }


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
        self.timeline: deque[TimelineEvent] = deque(maxlen=TIMELINE_CAP)
        self._root = root
        self._hooks: dict[tuple[str, str], HookInfo] = {}
        self._calls: Counter[tuple[str, str]] = Counter()
        self._step_handles: list[RemovableHandle] = []
        self._root_args: Any = None
        self._paths: dict[int, str] = {}
        self._full_flags: dict[nn.Module, bool | None] = {}
        self._global_full_flag = module_globals._global_is_full_backward_hook
        self._lock = threading.Lock()

    @property
    def hooks(self) -> list[HookInfo]:
        """The registry's live hooks in attach order, then hooks others attached (``foreign=True``)."""
        own_ids = {h.id for info in self._hooks.values() for h in info._handles}
        own_ids.update(h.id for h in self._step_handles)
        others = [
            HookInfo(target, kind, name, foreign=True, active=False)
            for target, kind, name in foreign_hooks(self._root, own_ids)
        ]
        return list(self._hooks.values()) + others

    def attach(
        self,
        target: str,
        obj: nn.Module | torch.Tensor,
        spec: Kind,
        kind: str,
        action: str | Callable = "capture",
        edit: Any = None,
        copy: bool = False,
        with_kwargs: bool = False,
    ) -> HookInfo:
        """Attach one hook; attaching ``(target, kind)`` again replaces it rather than stacking."""
        check_action(action)
        edits = normalize_edits(edit)
        if callable(action):
            check_callable(action, spec, with_kwargs)
            if edits:
                raise ValueError("edit= applies to the built-in actions; a callable action can change values itself")
        if edits and spec.name in ("post_accumulate", "legacy_backward"):
            raise ValueError(
                f"{kind!r} hooks cannot change values, so edit= is not allowed there; "
                "use kind 'grad' (on the parameter or module) to edit gradients"
            )
        self.detach(target, kind)
        info = HookInfo(target, kind, action, edits, copy)
        info._handles.extend(self._register(spec, obj, info, with_kwargs))
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
                # torch's handle does not cover the global with_kwargs dict (a stale entry otherwise)
                module_globals._global_forward_hooks_with_kwargs.pop(handle.id, None)
            info._handles.clear()
            del self._hooks[(info.target, info.kind)]
        self._restore_backward_flags()
        if not self._hooks:
            for handle in self._step_handles:
                handle.remove()
            self._step_handles.clear()
        return removed

    def close(self) -> None:
        """Remove every hook this registry added. Safe to call more than once."""
        self.detach()

    # Steps: one call of the root module; the first pre-hook to see a root call starts the step.
    def _ensure_step_tracker(self) -> None:
        if not self._step_handles:
            self._step_handles = [
                self._root.register_forward_pre_hook(lambda m, args: self._begin_step(args), prepend=True),
                self._root.register_forward_hook(self._end_step, prepend=True, always_call=True),
            ]

    def _begin_step(self, args: Any) -> None:
        with self._lock:
            if self._root_args is args:
                return
            self._root_args = args
            self.step += 1
            self._calls.clear()

    def _end_step(self, module: nn.Module, args: Any, output: Any) -> None:
        self._root_args = None

    def _next_call(self, target: str, kind: str) -> int:
        with self._lock:
            key = (target, kind)
            call = self._calls[key]
            self._calls[key] = call + 1
            return call

    def _fire(self, info: HookInfo, phase: str, firing: Firing, editable: Any, tensors_of, call_user=None) -> Any:
        """Count, log and perform one firing; a failing action follows the ``on_error`` policy."""
        info.fired += 1
        self.timeline.append(TimelineEvent(firing.step, phase, firing.target, firing.kind, firing.call))
        try:
            return perform(self.store, info.action, info.edit, info.copy, firing, editable, tensors_of, call_user)
        except Exception as exc:  # a failing hook must not break the user's forward or backward
            info.last_error = "".join(traceback.format_exception(exc)).rstrip()
            if self.on_error == "raise":
                raise
            warnings.warn(
                f"hook {info.kind!r} on {firing.target!r} failed: {exc!r} (recorded on ex.hooks)", stacklevel=2
            )
            return None

    # Registration, one function per kind family.
    def _register(self, spec: Kind, obj: Any, info: HookInfo, with_kwargs: bool) -> list[RemovableHandle]:
        if spec.family == "global":
            return [self._register_global(spec, info)]
        if spec.family == "param":
            return [self._register_param(spec, obj, info)]
        return [self._register_module(spec, obj, info, info.target, with_kwargs)]

    def _register_module(
        self, spec: Kind, module: nn.Module, info: HookInfo, target: str, with_kwargs: bool
    ) -> RemovableHandle:
        kind, user = info.kind, info.action
        if spec.name in ("backward_pre", "backward", "legacy_backward"):
            self._full_flags.setdefault(module, module._is_full_backward_hook)
        if spec.name == "forward_pre":

            def forward_pre(mod, args, kwargs=None):
                firing = Firing(target, kind, self.step, self._next_call(target, kind))
                call_user = None
                if callable(user):
                    call_user = (lambda a: user(mod, a, kwargs)) if with_kwargs else (lambda a: user(mod, a))
                result = self._fire(info, "forward", firing, args, lambda a: _forward_inputs(a, kwargs), call_user)
                if with_kwargs and result is not None and not callable(user):
                    return (result, kwargs)  # an edit replaced args; torch wants (args, kwargs) here
                return result

            return module.register_forward_pre_hook(forward_pre, with_kwargs=with_kwargs)
        if spec.name == "forward":

            def forward(mod, args, *rest):
                kwargs, output = rest if with_kwargs else (None, rest[0])
                firing = Firing(target, kind, self.step, self._next_call(target, kind))
                call_user = None
                if callable(user):
                    call_user = (
                        (lambda o: user(mod, args, kwargs, o)) if with_kwargs else (lambda o: user(mod, args, o))
                    )
                return self._fire(info, "forward", firing, output, lambda o: named_tensors("output", o), call_user)

            # always_call: a forward that raises still reports (with output None) instead of vanishing.
            return module.register_forward_hook(forward, with_kwargs=with_kwargs, always_call=True)
        if spec.name == "backward_pre":

            def backward_pre(mod, grad_output):
                firing = Firing(target, kind, self.step, self._next_call(target, kind))
                call_user = (lambda g: user(mod, g)) if callable(user) else None
                return self._fire(info, "backward", firing, grad_output, _grad_outputs, call_user)

            return module.register_full_backward_pre_hook(backward_pre)
        if spec.name in ("backward", "legacy_backward"):

            def backward(mod, grad_input, grad_output):
                firing = Firing(target, kind, self.step, self._next_call(target, kind))
                call_user = (lambda g: user(mod, g, grad_output)) if callable(user) else None
                result = self._fire(
                    info, "backward", firing, grad_input, lambda g: _grads_both(g, grad_output), call_user
                )
                if result is not None and all(g is None for g in grad_input):
                    return None  # torch refuses a value when no input requires grad (first layer)
                return result

            if spec.name == "legacy_backward":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    return module.register_backward_hook(backward)
            return module.register_full_backward_hook(backward)
        if spec.name == "grad":
            return module.register_forward_hook(self._arm_tensor_hooks(info, target))
        raise AssertionError(f"unhandled module kind {spec.name}")

    def _arm_tensor_hooks(self, info: HookInfo, target: str) -> Callable:
        kind = info.kind

        def arm(mod: nn.Module, args: Any, output: Any) -> None:
            step, call = self.step, self._next_call(target, kind)
            armed = 0
            for name, tensor in named_tensors("output", output).items():
                if tensor.requires_grad:
                    tensor.register_hook(self._tensor_hook(info, Firing(target, kind, step, call), "grad_" + name))
                    armed += 1
            info.note = (
                None
                if armed
                else (
                    "not armed: no output tensor required grad (forward under torch.no_grad / inference_mode, "
                    "or nothing upstream requires grad), so no gradient will come for this call"
                )
            )

        return arm

    def _tensor_hook(self, info: HookInfo, firing: Firing, name: str) -> Callable[[torch.Tensor], Any]:
        user = info.action

        def tensor_hook(grad: torch.Tensor) -> Any:
            if not info.active:
                return None
            call_user = user if callable(user) else None
            return self._fire(info, "backward", firing, grad, lambda g: {name: g}, call_user)

        return tensor_hook

    def _register_param(self, spec: Kind, param: torch.Tensor, info: HookInfo) -> RemovableHandle:
        target, kind, user = info.target, info.kind, info.action
        if spec.name == "param_grad":

            def param_grad(grad):
                firing = Firing(target, kind, self.step, 0)
                return self._fire(
                    info, "backward", firing, grad, lambda g: {"grad": g}, user if callable(user) else None
                )

            return param.register_hook(param_grad)

        def post_accumulate(p):
            firing = Firing(target, kind, self.step, 0)
            call_user = (lambda _: user(p)) if callable(user) else None
            self._fire(info, "backward", firing, p.grad, lambda g: {"grad": g} if g is not None else {}, call_user)

        return param.register_post_accumulate_grad_hook(post_accumulate)

    def _register_global(self, spec: Kind, info: HookInfo) -> RemovableHandle:
        self._paths = {id(m): p for p, m in self._root.named_modules(remove_duplicate=False)}
        paths, kind, user = self._paths, info.kind, info.action

        def dispatch(module: nn.Module, *values: Any) -> Any:
            path = paths.get(id(module))
            if path is None or not info.active:
                return None  # a module of another model: global hooks are process-wide in torch
            if module is self._root and spec.phase == "forward" and spec.name.endswith("_pre"):
                self._begin_step(values[0])
            firing = Firing(path, kind, self.step, self._next_call(path, kind))
            call_user = (lambda v: user(module, *values[:-1], v)) if callable(user) else None
            if spec.name == "global_forward_pre":
                return self._fire(info, "forward", firing, values[0], lambda a: named_tensors("args", a), call_user)
            if spec.name == "global_forward":
                return self._fire(info, "forward", firing, values[1], lambda o: named_tensors("output", o), call_user)
            if spec.name == "global_backward_pre":
                return self._fire(info, "backward", firing, values[0], _grad_outputs, call_user)
            grad_input, grad_output = values
            call_user = (lambda g: user(module, g, grad_output)) if callable(user) else None
            result = self._fire(info, "backward", firing, grad_input, lambda g: _grads_both(g, grad_output), call_user)
            return None if all(g is None for g in grad_input) else result

        register = {
            "global_forward_pre": module_globals.register_module_forward_pre_hook,
            "global_forward": lambda h: module_globals.register_module_forward_hook(h, always_call=True),
            "global_backward_pre": module_globals.register_module_full_backward_pre_hook,
            "global_backward": module_globals.register_module_full_backward_hook,
        }[spec.name]
        return register(dispatch)

    def _restore_backward_flags(self) -> None:
        """Put back the private full/legacy backward flags once no backward hook of ours needs them."""
        for module, flag in list(self._full_flags.items()):
            if not module._backward_hooks and not module._backward_pre_hooks:
                module._is_full_backward_hook = flag
                del self._full_flags[module]
        if not module_globals._global_backward_hooks and not module_globals._global_backward_pre_hooks:
            module_globals._global_is_full_backward_hook = self._global_full_flag


def _forward_inputs(args: Any, kwargs: dict | None) -> dict[str, torch.Tensor]:
    tensors = named_tensors("args", args)
    if kwargs:
        tensors.update(named_tensors("kwargs", kwargs))
    return tensors


def _grad_outputs(grad_output: Any) -> dict[str, torch.Tensor]:
    return named_tensors("grad_output", grad_output)


def _grads_both(grad_input: Any, grad_output: Any) -> dict[str, torch.Tensor]:
    """Output-side gradients first, so a backward record's primary tensor is grad_output.0."""
    return {**named_tensors("grad_output", grad_output), **named_tensors("grad_input", grad_input)}
