"""How each hook kind is registered with torch: one method per kind family.

The hooks number their firings with the registry's ``Clock``, perform them through its ``Dispatch``, note
the outputs its ``Collisions`` need, and leave global kinds to ``ModelWideHooks`` and node kinds to
``NodeHooks``. Each hook binds what it calls when it is registered: a firing looks nothing up.

A full backward hook is set aside while its module returns a dict or dataclass, which torch cannot hook
(``BackwardArming``): torch would wrap every call and warn at every forward while the hook never fires. A forward
hook of ours sees the output first: from then on the hook leaves the module's hook dict (its note says why once),
and goes back the first time the module returns a Tensor or a tuple.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from .._torch import full_backward_flag, is_compile_wrapper
from ..display import quoted
from ..kind_table import Kind
from ..model.compiled import is_compiled
from ..model.nested import tensors_in
from . import notes
from .actions import Firing, named_tensors
from .clock import Clock
from .collisions import Collisions
from .dispatch import Dispatch
from .info import HookInfo
from .model_wide import ModelWideHooks
from .node_hooks import NodeHooks
from .notes import GRAD_NOT_ARMED, NoteKind, backward_output_note, input_grad_note
from .own_runs import silent
from .owned import flag_owner, own, own_backward
from .root_backward import RootBackward
from .sharded_params import UnshardedGrad, fsdp2_state


class Registrar:
    """Registers the hooks of one registry with torch, kind family by kind family.

    ``begin_step(args)``: the registry's beginning of a step, for a global pre-hook that sees the model's call
    before the step tracker does.
    """

    def __init__(
        self,
        root: nn.Module,
        clock: Clock,
        dispatch: Dispatch,
        collisions: Collisions,
        model_wide: ModelWideHooks,
        node_hooks: NodeHooks,
        begin_step: Callable[[Any], None],
    ) -> None:
        self._root_ref = weakref.ref(root)
        self._clock = clock
        self._fire = dispatch.fire
        self._collisions = collisions
        self._model_wide = model_wide
        self._node_hooks = node_hooks
        self._begin_step = begin_step
        self.root_backward = RootBackward(root, self.eager)
        """The full backward hooks on the model itself, run so that its output stays no view (``root_backward``)."""

    def register(self, spec: Kind, obj: Any, info: HookInfo, with_kwargs: bool) -> list[RemovableHandle]:
        """Register ``info``'s hooks on ``obj`` (module, parameter or node id); returns the handles to hold
        (global and node kinds add theirs to ``info._handles`` as they are placed)."""
        if spec.family == "global":
            self._register_global(spec, info, with_kwargs)  # handles join info._handles, one set per module
            return []
        if spec.family == "param":
            return [self._register_param(spec, obj, info)]
        if spec.family == "node":
            root = self._root_ref()
            if root is None:
                raise ReferenceError("the model of this explorer was garbage collected")
            self._node_hooks.add(info, root)  # placed on each forward's graph, by id
            return []
        handles = [self._register_module(spec, obj, info, info.path, with_kwargs)]
        if spec.full_backward:  # their firings name the forward call that tagged its nodes
            arming = BackwardArming(handles[0], info)
            handles.append(own(obj, obj.register_forward_hook(self.eager(self._check_backward_output(info, arming)))))
        if spec.name == "legacy_backward":
            path, kind, tag_legacy_call = info.path, info.kind, self._clock.tag_legacy_call
            tag = lambda m, args, output: tag_legacy_call(path, kind, args, output)  # noqa: E731
            handles.append(own(obj, obj.register_forward_hook(self.eager(tag))))
        return handles

    def eager(self, hook: Callable[..., Any]) -> Callable[..., Any]:
        """``hook``, run by Python as written even inside a compiled model.

        Dynamo would otherwise trace the forward hooks into the compiled graph, bookkeeping included,
        and fail on it (the explorer's weak reference to the model, its counters and records).
        """
        root = self._root_ref()
        if root is not None and is_compiled(root):
            disabled: Callable[..., Any] = torch.compiler.disable(hook, recursive=True)  # type: ignore[no-untyped-call]  # unannotated in torch
            return disabled
        return hook

    def _on_root(self, module: nn.Module) -> bool:
        """Whether ``module``'s full backward hooks run through ``root_backward``: the model itself (not torch.compile's
        wrapper, whose backward hooks torch never runs)."""
        return module is self._root_ref() and not is_compile_wrapper(module)

    def _check_backward_output(self, info: HookInfo, arming: BackwardArming) -> Callable[..., Any]:
        """A forward hook tagging the call's nodes for its backward firings, telling why a full backward hook
        cannot fire (dict output, no grad), and setting it aside while it cannot (``BackwardArming``)."""
        path, kind = info.path, info.kind
        slots = callable(info.action)  # a callable's return value is checked against the tensors' positions
        note_outputs, tag_call = self._collisions.note_outputs, self._clock.tag_call

        def check(mod: nn.Module, args: Any, output: Any) -> None:
            # Kept even in own runs (the attach-time check is one): the tensor an in-place op breaks is a
            # view of one of these, which tells whose full backward hook it collided with.
            aside = arming.follow(output)
            tensors = tensors_in(output)
            note_outputs(path, tensors)
            firing = tag_call(path, kind, args, output, slots, tensors)
            if firing is None:
                if aside:  # an own run, such as the attach-time check: the note is known from now on
                    notes.add(info, backward_output_note(kind, output), NoteKind.BACKWARD_OUTPUT)
                return
            notes.add(info, backward_output_note(kind, output), NoteKind.BACKWARD_OUTPUT)
            if kind == "backward_pre" and not isinstance(output, (torch.Tensor, tuple)):
                # torch's full backward hooks see only a Tensor or a tuple of them: fall back to tensor
                # hooks so the output gradients are still recorded.
                firing = Firing(path, kind, firing.step, firing.call)
                for name, tensor in named_tensors("grad_output", output).items():
                    if tensor.requires_grad:
                        tensor.register_hook(self._tensor_hook(info, firing, name, module=mod))  # type: ignore[no-untyped-call]  # unannotated in torch

        return check

    def _register_module(
        self, spec: Kind, module: nn.Module, info: HookInfo, path: str, with_kwargs: bool
    ) -> RemovableHandle:
        kind, user = info.kind, info.action
        fire, forward_firing, backward_firing = self._fire, self._clock.forward_firing, self._clock.backward_firing
        if spec.name == "forward_pre":
            returns = "forward_pre_with_kwargs" if with_kwargs else None

            def forward_pre(mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> Any:
                firing = forward_firing(path, kind, edit=info.edit)
                if firing is None:
                    return None
                call_user = None
                if callable(user):
                    call_user = (lambda a: user(mod, a, kwargs)) if with_kwargs else (lambda a: user(mod, a))
                result = fire(info, "forward", firing, args, lambda a: _forward_inputs(a, kwargs), call_user, returns)
                if with_kwargs and result is not None and not callable(user):
                    return (result, kwargs)  # an edit replaced args; torch wants (args, kwargs) here
                return result

            return own(module, module.register_forward_pre_hook(self.eager(forward_pre), with_kwargs=with_kwargs))
        if spec.name == "forward":

            def forward(mod: nn.Module, args: tuple[Any, ...], *rest: Any) -> Any:
                kwargs, output = rest if with_kwargs else (None, rest[0])
                firing = forward_firing(path, kind, args, info.edit)
                if firing is None or _stopped_recompute(firing, output):
                    return None
                call_user = None
                if callable(user):
                    call_user = (
                        (lambda o: user(mod, args, kwargs, o)) if with_kwargs else (lambda o: user(mod, args, o))
                    )
                return fire(info, "forward", firing, output, lambda o: named_tensors("output", o), call_user)

            # always_call: a forward that raises still reports (with output None) instead of vanishing.
            return own(
                module, module.register_forward_hook(self.eager(forward), with_kwargs=with_kwargs, always_call=True)
            )
        if spec.name == "backward_pre":

            def backward_pre(mod: nn.Module, grad_output: tuple[Any, ...]) -> Any:
                # detached (torch still runs what a forward armed), or an own run that leaves this hook out
                if not info.active or silent(info.edit):
                    return None
                firing = backward_firing(path, kind)
                call_user = (lambda g: user(mod, g)) if callable(user) else None
                return fire(info, "backward", firing, grad_output, _grad_outputs, call_user)

            if self._on_root(module):
                return self.root_backward.register(backward_pre, pre=True)
            return own(module, module.register_full_backward_pre_hook(backward_pre))
        if spec.name in ("backward", "legacy_backward"):

            def backward(mod: nn.Module, grad_input: tuple[Any, ...], grad_output: tuple[Any, ...]) -> Any:
                # detached (torch still runs what a forward armed), or an own run that leaves this hook out
                if not info.active or silent(info.edit):
                    return None
                firing = backward_firing(path, kind)
                call_user = (lambda g: user(mod, g, grad_output)) if callable(user) else None
                return _fire_full_backward(fire, info, firing, path, grad_input, grad_output, call_user)

            if spec.name == "legacy_backward":
                if full_backward_flag(flag_owner(module)) is True:  # torch's own error names neither
                    raise ValueError(FULL_REFUSES_LEGACY.format(path=quoted(path)))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    return own_backward(module, lambda: module.register_backward_hook(backward))
            if self._on_root(module):
                return self.root_backward.register(backward, pre=False)
            return own_backward(module, lambda: module.register_full_backward_hook(backward))
        if spec.name == "grad":
            return own(module, module.register_forward_hook(self.eager(self._arm_tensor_hooks(info, path))))
        raise AssertionError(f"unhandled module kind {spec.name}")

    def _arm_tensor_hooks(self, info: HookInfo, path: str) -> Callable[..., Any]:
        def arm(mod: nn.Module, args: Any, output: Any) -> None:
            self._arm_outputs(info, path, args, output)

        return arm

    def _arm_outputs(self, info: HookInfo, path: str, args: Any, output: Any) -> None:
        """Put a tensor hook on every output tensor of one call of ``path`` that requires grad."""
        kind = info.kind
        firing = self._clock.forward_firing(path, kind, args, info.edit)
        if firing is None:
            return
        firing = Firing(path, kind, firing.step, firing.call)  # its gradients are no recompute
        armed = 0
        for name, tensor in named_tensors("output", output).items():
            if tensor.requires_grad:
                tensor.register_hook(self._tensor_hook(info, firing, "grad_" + name))  # type: ignore[no-untyped-call]  # unannotated in torch
                armed += 1
        if not armed and info.kind == "grad":  # a global hook also meets modules that output no tensor
            notes.add(info, GRAD_NOT_ARMED, NoteKind.GRAD_NOT_ARMED)
        elif armed:
            notes.drop(info, NoteKind.GRAD_NOT_ARMED)

    def _tensor_hook(
        self, info: HookInfo, firing: Firing, name: str, module: nn.Module | None = None
    ) -> Callable[[torch.Tensor], Any]:
        """A tensor hook for ``info``; with ``module``, a backward_pre stand-in calling ``user(module, (grad,))``."""
        user, fire = info.action, self._fire

        def tensor_hook(grad: torch.Tensor) -> Any:
            if not info.active:
                return None
            call_user = user if callable(user) else None
            if callable(user) and module is not None:  # torch's backward_pre signature, one grad at a time
                call_user = lambda g: _first(user(module, (g,)))  # noqa: E731
            return fire(info, "backward", firing, grad, lambda g: {name: g}, call_user, "grad")

        return tensor_hook

    def _register_param(self, spec: Kind, param: torch.Tensor, info: HookInfo) -> RemovableHandle:
        path, kind, user = info.path, info.kind, info.action
        fire, clock = self._fire, self._clock
        if spec.name == "param_grad":

            def param_grad(grad: torch.Tensor) -> Any:
                firing = Firing(path, kind, clock.step, 0)
                return fire(info, "backward", firing, grad, lambda g: {"grad": g}, user if callable(user) else None)

            root = self._root_ref()
            state = fsdp2_state(root, param) if root is not None else None
            if state is not None and root is not None:  # autograd sees FSDP2's unsharded Parameter, never the DTensor
                return UnshardedGrad(root, state, param_grad, self.eager)
            handle: RemovableHandle = param.register_hook(param_grad)  # type: ignore[no-untyped-call]  # unannotated in torch
            return handle

        def post_accumulate(p: torch.Tensor) -> None:
            firing = Firing(path, kind, clock.step, 0)
            call_user = (lambda _: user(p)) if callable(user) else None
            fire(info, "backward", firing, p.grad, lambda g: {"grad": g} if g is not None else {}, call_user)

        handle = param.register_post_accumulate_grad_hook(post_accumulate)  # type: ignore[no-untyped-call]  # unannotated in torch
        return handle

    def _register_global(self, spec: Kind, info: HookInfo, with_kwargs: bool) -> None:
        """The global kind's hook on every module of the model, first among the module's own (see ModelWideHooks)."""
        paths, kind, user = self._model_wide.paths, info.kind, info.action
        fire, clock, root_ref, begin_step = self._fire, self._clock, self._root_ref, self._begin_step
        if spec.name == "global_grad":

            def arm(module: nn.Module, args: Any, output: Any) -> None:
                path = paths.get(id(module))
                if path is not None and info.active:
                    self._arm_outputs(info, path, args, output)

            eager_arm = self.eager(arm)
            self._model_wide.add(
                info, lambda m, handles: handles.append(own(m, m.register_forward_hook(eager_arm, prepend=True)))
            )
            return

        def dispatch(module: nn.Module, *values: Any) -> Any:
            path = paths.get(id(module))
            if path is None or not info.active or silent(info.edit):
                return None  # a module that left the model (its hook goes at the next step's begin), or an own run
            if module is root_ref() and spec.phase == "forward" and spec.pre:
                begin_step(values[0])
            firing: Firing | None
            if spec.phase == "backward":
                firing = clock.backward_firing(path, kind)
            else:  # a forward hook fires at the end of the call whose args it gets: values = (args, output)
                firing = clock.forward_firing(
                    path, kind, values[0] if spec.name == "global_forward" else None, info.edit
                )
                if firing is None:  # an own run (returned above already)
                    return None
                if spec.name == "global_forward" and _stopped_recompute(firing, values[1]):
                    return None
            call_user = (lambda v: user(module, *values[:-1], v)) if callable(user) else None
            if spec.name == "global_forward_pre":
                kwargs = values[1] if with_kwargs else None
                result = fire(info, "forward", firing, values[0], lambda a: _forward_inputs(a, kwargs), call_user)
                return result if kwargs is None or result is None else (result, kwargs)  # torch wants both back
            if spec.name == "global_forward":
                return fire(info, "forward", firing, values[1], lambda o: named_tensors("output", o), call_user)
            if spec.name == "global_backward_pre":
                return fire(info, "backward", firing, values[0], _grad_outputs, call_user)
            grad_input, grad_output = values
            call_user = (lambda g: user(module, g, grad_output)) if callable(user) else None
            return _fire_full_backward(fire, info, firing, path, grad_input, grad_output, call_user)

        # Backward firings name their step and forward call (Clock.backward_firing): each call of the model's
        # modules tags the nodes its backward runs.
        slots = callable(user)  # a callable's return value is checked against the tensors' positions

        def tagger(arming: BackwardArming) -> Callable[..., Any]:
            def tag(module: nn.Module, args: Any, output: Any) -> None:
                arming.follow(output)
                path = paths.get(id(module))
                if path is not None and info.active:
                    clock.tag_call(path, kind, args, output, slots)

            return self.eager(tag)

        hook = self.eager(dispatch) if spec.phase == "forward" else dispatch

        def place(module: nn.Module, handles: list[RemovableHandle]) -> str | None:
            if spec.name == "global_forward_pre":
                pre = module.register_forward_pre_hook(hook, prepend=True, with_kwargs=with_kwargs)
                handles.append(own(module, pre))
                return None
            if spec.name == "global_forward":
                handles.append(own(module, module.register_forward_hook(hook, prepend=True, always_call=True)))
                return None
            if self._on_root(module):
                handle = self.root_backward.register(hook, pre=spec.name == "global_backward_pre", prepend=True)
            elif spec.name == "global_backward_pre":
                handle = own(module, module.register_full_backward_pre_hook(hook, prepend=True))
            elif full_backward_flag(flag_owner(module)) is False:
                return LEGACY_REFUSES_FULL
            else:
                handle = own_backward(module, lambda: module.register_full_backward_hook(hook, prepend=True))
            tag = tagger(BackwardArming(handle, info, prepend=True))
            handles += [handle, own(module, module.register_forward_hook(tag, prepend=True))]
            return None

        self._model_wide.add(info, place)


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


FULL_REFUSES_LEGACY = (
    "module {path} has a full backward hook (kind 'backward' or 'global_backward', or one attached by "
    "others; torch keeps the mark of a removed one), and torch refuses a legacy backward hook beside one; "
    "detach those first, or compare the two with ex.compare_backward({path}), which runs each on a copy"
)
LEGACY_REFUSES_FULL = (
    "it has a legacy backward hook (register_backward_hook, or one removed since: torch keeps its mark), and torch "
    "refuses a full backward hook beside one; hook it with 'grad' instead"
)


def _stopped_recompute(firing: Firing, output: Any) -> bool:
    """A recompute that torch stopped inside this call, once it had every tensor it needed (a checkpoint's early
    stop): an always-called forward hook then fires with no output, for a forward that did not finish."""
    return firing.recompute and output is None and sys.exc_info()[1] is not None


def _first(result: Any) -> Any:
    """A backward_pre return value (None or a tuple replacing grad_output) for one tensor hook."""
    return result[0] if isinstance(result, (tuple, list)) else result


def _forward_inputs(args: Any, kwargs: dict[str, Any] | None) -> dict[str, torch.Tensor]:
    tensors = named_tensors("args", args)
    if kwargs:
        tensors.update(named_tensors("kwargs", kwargs))
    return tensors


def _grad_outputs(grad_output: Any) -> dict[str, torch.Tensor]:
    return named_tensors("grad_output", grad_output)


def _fire_full_backward(
    fire: Callable[..., Any],
    info: HookInfo,
    firing: Firing,
    path: str,
    grad_input: Any,
    grad_output: Any,
    call_user: Any,
) -> Any:
    """Fire a full backward hook on ``path``; when every input gradient is None, note why an edit cannot apply."""
    result = fire(info, "backward", firing, grad_input, lambda g: _grads_both(g, grad_output), call_user)
    if all(g is None for g in grad_input):
        # torch refuses a changed grad_input here (and warns): say what that means
        edited = result is not None and call_user is None  # a callable's Nones are no edit
        notes.add(info, input_grad_note(path, grad_input, edited=edited), NoteKind.INPUT_GRAD)
        return None
    if not info.kind.startswith("global_"):  # a global hook's note stays: another module may still lack them
        notes.drop(info, NoteKind.INPUT_GRAD)
    return result


def _grads_both(grad_input: Any, grad_output: Any) -> dict[str, torch.Tensor]:
    """Output-side gradients first, so a backward record's primary tensor is grad_output.0."""
    return {**named_tensors("grad_output", grad_output), **named_tensors("grad_input", grad_input)}
