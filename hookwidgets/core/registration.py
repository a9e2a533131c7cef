"""How each hook kind is registered with torch: one method per kind family, mixed into HookRegistry."""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.modules.module as module_globals
from torch import nn
from torch.utils.hooks import RemovableHandle

from .actions import Firing, named_tensors
from .compiled import is_compiled
from .diagnostics import NO_INPUT_GRAD, backward_output_note, no_input_grad_note
from .kinds import Kind
from .nested import is_dataclass_value, tensors_in

if TYPE_CHECKING:
    from .hooks import HookInfo
    from .nodehooks import NodeHooks


class KindRegistrations:
    """Registration of every kind; relies on the registry's ``_fire``, ``_next_call`` and ``step``."""

    step: int
    _root: nn.Module
    _paths: dict[int, str]
    _suspended: bool
    _full_flags: dict[nn.Module, tuple[bool | None, set[nn.Module]]]  # flag owner -> (flag found, hook holders)
    _node_hooks: NodeHooks
    _hooked_outputs: dict[str, list[weakref.ref]]  # module path -> its last outputs, for explain_collision

    # HookRegistry provides _next_call(target, kind), _backward_firing(target, kind), _note_call_start(target),
    # _begin_step(args) and _fire(info, phase, firing, ...).

    def _register(self, spec: Kind, obj: Any, info: HookInfo, with_kwargs: bool) -> list[RemovableHandle]:
        if spec.family == "global":
            return [self._register_global(spec, info)]
        if spec.family == "param":
            return [self._register_param(spec, obj, info)]
        if spec.family == "node":
            self._node_hooks.add(info, self._root)  # placed on each forward's graph, by id
            return []
        handles = [self._register_module(spec, obj, info, info.target, with_kwargs)]
        if spec.name in ("backward", "backward_pre"):
            handles.append(obj.register_forward_hook(self._eager(self._check_backward_output(info))))
        if spec.name in ("backward", "backward_pre", "legacy_backward"):  # their firings name the forward call
            target = info.target
            handles.append(obj.register_forward_pre_hook(self._eager(lambda m, args: self._note_call_start(target))))
        return handles

    def _eager(self, hook: Callable) -> Callable:
        """``hook``, run by Python as written even inside a compiled model.

        Dynamo would otherwise trace the forward hooks into the compiled graph, bookkeeping included,
        and fail on it (the explorer's weak reference to the model, its counters and records).
        """
        return torch.compiler.disable(hook, recursive=True) if is_compiled(self._root) else hook

    def _check_backward_output(self, info: HookInfo) -> Callable:
        """A forward hook telling why a full backward hook cannot fire (dict output, no grad)."""
        target, kind = info.target, info.kind

        def check(mod: nn.Module, args: Any, output: Any) -> None:
            # Kept even while suspended (the attach-time check runs so): the tensor an in-place op breaks is a
            # view of one of these, which tells whose full backward hook it collided with.
            # (each by the tensor it views, if a view: torch's wrapper is a view of that one too)
            self._hooked_outputs[target] = [weakref.ref(t if t._base is None else t._base) for t in tensors_in(output)]
            if self._suspended:
                return
            info.note = backward_output_note(kind, output)
            if kind == "backward_pre" and (isinstance(output, dict) or is_dataclass_value(output)):
                # torch's full backward hooks see only a Tensor or a tuple of them: fall back to tensor
                # hooks so the output gradients are still recorded.
                firing_call = self._next_call(target, kind)
                for name, tensor in named_tensors("grad_output", output).items():
                    if tensor.requires_grad:
                        firing = Firing(target, kind, self.step, firing_call)
                        tensor.register_hook(self._tensor_hook(info, firing, name, module=mod))

        return check

    def _register_module(
        self, spec: Kind, module: nn.Module, info: HookInfo, target: str, with_kwargs: bool
    ) -> RemovableHandle:
        kind, user = info.kind, info.action
        if spec.name in ("backward_pre", "backward", "legacy_backward"):
            owner = flag_owner(module)  # where torch's write of the flag lands
            self._full_flags.setdefault(owner, (owner._is_full_backward_hook, set()))[1].add(module)
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

            return module.register_forward_pre_hook(self._eager(forward_pre), with_kwargs=with_kwargs)
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
            return module.register_forward_hook(self._eager(forward), with_kwargs=with_kwargs, always_call=True)
        if spec.name == "backward_pre":

            def backward_pre(mod, grad_output):
                if not info.active:  # detached after the forward: torch still runs what that forward armed
                    return None
                firing = Firing(target, kind, *self._backward_firing(target, kind))
                call_user = (lambda g: user(mod, g)) if callable(user) else None
                return self._fire(info, "backward", firing, grad_output, _grad_outputs, call_user)

            return module.register_full_backward_pre_hook(backward_pre)
        if spec.name in ("backward", "legacy_backward"):

            def backward(mod, grad_input, grad_output):
                if not info.active:  # detached after the forward: torch still runs what that forward armed
                    return None
                firing = Firing(target, kind, *self._backward_firing(target, kind))
                call_user = (lambda g: user(mod, g, grad_output)) if callable(user) else None
                result = self._fire(
                    info, "backward", firing, grad_input, lambda g: _grads_both(g, grad_output), call_user
                )
                if all(g is None for g in grad_input):
                    # torch refuses a changed grad_input here (and warns): say what that means
                    info.note = NO_INPUT_GRAD if result is not None else no_input_grad_note(target)
                    return None
                return result

            if spec.name == "legacy_backward":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    return module.register_backward_hook(backward)
            return module.register_full_backward_hook(backward)
        if spec.name == "grad":
            return module.register_forward_hook(self._eager(self._arm_tensor_hooks(info, target)))
        raise AssertionError(f"unhandled module kind {spec.name}")

    def _arm_tensor_hooks(self, info: HookInfo, target: str) -> Callable:
        def arm(mod: nn.Module, args: Any, output: Any) -> None:
            self._arm_outputs(info, target, output)

        return arm

    def _arm_outputs(self, info: HookInfo, target: str, output: Any) -> None:
        """Put a tensor hook on every output tensor of one call of ``target`` that requires grad."""
        kind = info.kind
        step, call = self.step, self._next_call(target, kind)
        armed = 0
        for name, tensor in named_tensors("output", output).items():
            if tensor.requires_grad:
                tensor.register_hook(self._tensor_hook(info, Firing(target, kind, step, call), "grad_" + name))
                armed += 1
        if not armed and info.kind == "grad":  # a global hook also meets modules that output no tensor
            info.note = (
                "not armed: no output tensor required grad (forward under torch.no_grad / inference_mode, "
                "or nothing upstream requires grad), so no gradient will come for this call"
            )
        elif armed:
            info.note = None

    def _tensor_hook(
        self, info: HookInfo, firing: Firing, name: str, module: nn.Module | None = None
    ) -> Callable[[torch.Tensor], Any]:
        """A tensor hook for ``info``; with ``module``, a backward_pre stand-in calling ``user(module, (grad,))``."""
        user = info.action

        def tensor_hook(grad: torch.Tensor) -> Any:
            if not info.active:
                return None
            call_user = user if callable(user) else None
            if call_user is not None and module is not None:  # torch's backward_pre signature, one grad at a time
                call_user = lambda g: _first(user(module, (g,)))  # noqa: E731
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
        self._paths = {id(m): p for p, m in self._root.named_modules()}  # a shared module goes by its first path
        paths, kind, user = self._paths, info.kind, info.action
        if spec.name == "global_grad":

            def arm(module: nn.Module, args: Any, output: Any) -> None:
                path = paths.get(id(module))
                if path is not None and info.active and not self._suspended:
                    self._arm_outputs(info, path, output)

            return module_globals.register_module_forward_hook(self._eager(arm))

        def dispatch(module: nn.Module, *values: Any) -> Any:
            path = paths.get(id(module))
            if path is None or not info.active:
                return None  # a module of another model: global hooks are process-wide in torch
            if module is self._root and spec.phase == "forward" and spec.name.endswith("_pre"):
                self._begin_step(values[0])
            if spec.phase == "forward":
                firing = Firing(path, kind, self.step, self._next_call(path, kind))
            else:
                firing = Firing(path, kind, *self._backward_firing(path, kind))
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
            if all(g is None for g in grad_input):
                info.note = NO_INPUT_GRAD if result is not None else no_input_grad_note(path)
                return None
            return result

        if spec.phase == "backward":
            # Backward firings name their step and forward call (_backward_firing): note where each call of the
            # model's modules begins; the handle goes with the hook's own.
            def note_start(module: nn.Module, args: Any) -> None:
                path = paths.get(id(module))
                if path is not None and info.active:
                    if module is self._root:  # global pre-hooks run before the step tracker: the root's call starts it
                        self._begin_step(args)
                    self._note_call_start(path)

            info._handles.append(module_globals.register_module_forward_pre_hook(self._eager(note_start)))
        register = {
            "global_forward_pre": module_globals.register_module_forward_pre_hook,
            "global_forward": lambda h: module_globals.register_module_forward_hook(h, always_call=True),
            "global_backward_pre": module_globals.register_module_full_backward_pre_hook,
            "global_backward": module_globals.register_module_full_backward_hook,
        }[spec.name]
        return register(self._eager(dispatch) if spec.phase == "forward" else dispatch)


def _first(result: Any) -> Any:
    """A backward_pre return value (None or a tuple replacing grad_output) for one tensor hook."""
    return result[0] if isinstance(result, (tuple, list)) else result


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


def flag_owner(module: nn.Module) -> nn.Module:
    """The module whose ``_is_full_backward_hook`` torch sets when ``module`` gets a backward hook.

    A ``torch.compile`` wrapper (OptimizedModule) reads its own attribute but forwards every write to
    the module it wraps, so the flag to save and put back is the wrapped one's.
    """
    while type(module).__name__ == "OptimizedModule" and isinstance(module._modules.get("_orig_mod"), nn.Module):
        module = module._modules["_orig_mod"]
    return module
