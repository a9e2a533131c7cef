"""The model's own full backward hooks, with the model's output left a tensor the user may change in place.

torch wraps the outputs of a module with full backward (pre-)hooks in views (``BackwardHookFunction``) after its
forward hooks ran, so the model's output is such a view, or a submodule's (its last layer's output returned as
is), and an in-place op on it in the user's own code (``out = model(x); out.mul_(2)``) raises. Here the explorer's
full backward kinds on the model itself run as torch's would, but its output goes through an alias that is no view
(its backward gives grad_output); its inputs go through an identity function as torch's do (its backward gives
grad_input). While any full backward hook of the explorer is attached, the alias also takes the views such hooks
made that reach the model's output. Values, order and gradients are torch's; only in-place ops on the output work.

The same alias keeps those views out of the output of a module whose own forward hook warns at a view (FSDP2's, which
would say at every forward that an in-place op drops its pre-backward hook): a forward hook of ours runs before it.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol, cast

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from .._torch import is_view
from ..model.distributed import view_averse
from ..model.nested import map_tensors, tensors_in
from .owned import own

HOOK_VIEW = "BackwardHookFunctionBackward"
"""The node of a view a full backward hook made (torch's, or the twin below on the model's inputs)."""


class BackwardHookFunction(torch.autograd.Function):
    """The identity on the model's tensor inputs, as torch's own (same name: an in-place op on one inside the model
    meets torch's collision, and is explained and the hook detached the same way); its backward gives grad_input."""

    @staticmethod
    def forward(ctx: Any, call: _Call, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.call = call
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        return (None, *ctx.call.inputs_done(grads))


class OutputAlias(torch.autograd.Function):
    """The model's output tensors again, sharing their storage but no view: its backward gives grad_output."""

    @staticmethod
    def forward(ctx: Any, call: _Call, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.call = call
        ctx.set_materialize_grads(False)  # an output the loss does not reach gives None, as torch's hooks see
        return tuple(t.detach() for t in tensors)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        return (None, *ctx.call.outputs_done(grads))


class _Call:
    """One call of the model: its hooks as the call began, where its tensors are, the grad_output between."""

    __slots__ = ("grad_outputs", "hooks", "inputs", "module", "n_args", "n_out", "outputs", "pre_hooks")

    def __init__(
        self, module: nn.Module, hooks: list[Callable[..., Any]], pre_hooks: list[Callable[..., Any]], n_args: int
    ) -> None:
        self.module, self.hooks, self.pre_hooks, self.n_args = module, hooks, pre_hooks, n_args
        self.inputs: list[int] | None = None  # positions of the args wrapped (None: no input required grad)
        self.outputs: list[int] = []  # positions of the output's tensors the hooks see
        self.n_out = 0
        self.grad_outputs: tuple[Any, ...] | None = None

    def outputs_done(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        """The backward pre-hooks on the output gradients; the full hooks too when no input required grad."""
        own = len(self.outputs)
        if not own:
            return grads  # only views of submodules' outputs went through the alias
        grad_outputs = _packed(self.outputs, grads[:own], self.n_out)
        for hook in self.pre_hooks:
            result = hook(self.module, grad_outputs)
            if result is None:
                continue
            if len(result) != len(grad_outputs):
                raise RuntimeError(
                    f"Backward pre hook returned an invalid number of grad_output, got {len(result)}, "
                    f"but expected {len(grad_outputs)}"
                )
            grad_outputs = tuple(result)
        if self.inputs is None:
            nothing = (None,) * self.n_args
            for hook in self.hooks:
                result = hook(self.module, nothing, grad_outputs)
                if result is not None and not all(r is None for r in result):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should always return None or None "
                        "for all gradients."
                    )
        else:
            self.grad_outputs = grad_outputs
        return tuple(grad_outputs[i] for i in self.outputs) + grads[own:]

    def inputs_done(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        """The full backward hooks, once the input gradients are there (after ``outputs_done``, as torch's)."""
        if self.grad_outputs is None or self.inputs is None:
            return grads
        grad_input = _packed(self.inputs, grads, self.n_args)
        for hook in self.hooks:
            result = hook(self.module, grad_input, self.grad_outputs)
            if result is None:
                continue
            if len(result) != len(grad_input):
                raise RuntimeError(
                    f"Backward hook returned an invalid number of grad_input, got {len(result)}, but expected "
                    f"{len(grad_input)}"
                )
            grad_input = tuple(result)
        self.grad_outputs = None
        return tuple(grad_input[i] for i in self.inputs)


def _packed(positions: list[int], values: tuple[Any, ...], length: int) -> tuple[Any, ...]:
    """``values`` at ``positions`` of a tuple of ``length``, None elsewhere."""
    packed: list[Any] = [None] * length
    for i, value in zip(positions, values, strict=True):
        packed[i] = value
    return tuple(packed)


def _hook_view(t: torch.Tensor) -> bool:
    return is_view(t) and type(t.grad_fn).__name__ == HOOK_VIEW


class Removable(Protocol):
    """What a list of pending removals holds: a torch handle, or a removal of ``RootBackward``'s own hooks."""

    def remove(self) -> None: ...


class RootBackward:
    """The explorer's full backward (pre-)hooks on the model itself, and the alias of the model's output.

    ``register()`` stands for torch's ``register_full_backward_hook`` / ``..._pre_hook`` on the model; ``need()`` /
    ``release()`` say which hooks of the explorer (anywhere in the model) want the output aliased. Its own hooks on
    the model are there only while one does. ``eager`` wraps them as the registry's other forward hooks.
    """

    def __init__(self, root: nn.Module, eager: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        self._root = weakref.ref(root)
        self._eager = eager
        self.hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self.pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._needed: set[int] = set()
        self._handles: list[RemovableHandle] = []
        self._local = threading.local()

    def register(self, hook: Callable[..., Any], pre: bool, prepend: bool = False) -> RemovableHandle:
        """Add a full backward hook (``pre``: a backward pre-hook) of the model; its handle removes it."""
        hooks = self.pre_hooks if pre else self.hooks
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def need(self, key: int) -> None:
        """A full backward hook ``key`` of the explorer is attached: the model's output is aliased from now on."""
        self._needed.add(key)
        root = self._root()
        if self._handles or root is None:
            return
        pre = root.register_forward_pre_hook(self._eager(self._begin))
        alias = root.register_forward_hook(self._eager(self._alias), always_call=True)  # keeps _calls balanced
        self._handles = [own(root, pre), own(root, alias)]
        unview = self._eager(_unviewed)
        for module in view_averse(root):  # before its own forward hooks, which would see the views
            self._handles.append(own(module, module.register_forward_hook(unview, prepend=True)))

    def release(self, key: int, later: list[Removable] | None = None) -> None:
        """The hook ``key`` went: once none is left, the model's hooks for the alias go too (``later``: put in that
        list of pending removals, while torch runs the model's forward hooks)."""
        self._needed.discard(key)
        if not self._needed:
            if later is None:
                self._drop()
            else:
                later.append(_Drop(self))

    def _drop(self) -> None:
        if not self._needed:  # none came back meanwhile
            for handle in self._handles:
                handle.remove()
            self._handles = []
            self._local = threading.local()

    def _begin(self, module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Note the model's hooks as its call begins (as torch does), and wrap its tensor args when one requires grad
        and a full backward hook will want their gradients."""
        root = self._root()
        if root is not None and self._handles:  # last among the forward hooks, as torch wraps after them all
            # torch keeps a module's hooks in an OrderedDict (its stubs say dict)
            cast("OrderedDict[int, Callable[..., Any]]", root._forward_hooks).move_to_end(self._handles[1].id)
        calls = self._calls()
        if not (self.hooks or self.pre_hooks) or not torch.is_grad_enabled():
            calls.append(None)
            return None
        call = _Call(module, list(self.hooks.values()), list(self.pre_hooks.values()), len(args))
        calls.append(call)
        slots = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        if not call.hooks or not any(args[i].requires_grad for i in slots):
            return None
        call.inputs = slots
        wrapped = BackwardHookFunction.apply(call, *(args[i] for i in slots))  # type: ignore[no-untyped-call]  # torch's Function.apply is unannotated
        new_args = list(args)
        for i, tensor in zip(slots, wrapped, strict=True):
            new_args[i] = tensor
        return tuple(new_args)

    def _alias(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        """The output with the model's tensors (for its own hooks) and the hooks' views in it aliased."""
        calls = self._calls()
        call = calls.pop() if calls else None
        if output is None or not torch.is_grad_enabled():  # the forward raised (an always-called hook), or no graph
            return None
        top: tuple[Any, ...] = (
            (output,) if isinstance(output, torch.Tensor) else output if isinstance(output, tuple) else ()
        )
        slots = []
        if call is not None:  # torch hooks a Tensor or a tuple's tensors, nothing else
            slots = [i for i, v in enumerate(top) if isinstance(v, torch.Tensor) and v.requires_grad]
        views = _unique_views(output, {id(top[i]) for i in slots})
        if not slots and not views:
            return None
        if call is None:
            call = _Call(module, [], [], len(args))
        call.outputs, call.n_out = slots, len(top) if slots else 0
        originals = [top[i] for i in slots] + views
        aliases = OutputAlias.apply(call, *originals)  # type: ignore[no-untyped-call]  # torch's Function.apply is unannotated
        by_id = {id(t): a for t, a in zip(originals, aliases, strict=True)}
        return map_tensors(output, lambda t: by_id.get(id(t), t))

    def _calls(self) -> list[_Call | None]:
        """This thread's calls of the model begun and not yet ended (a model may call itself)."""
        calls = getattr(self._local, "calls", None)
        if calls is None:
            calls = self._local.calls = []
        return calls


class _Drop:
    """A pending removal of ``RootBackward``'s hooks (the registry removes what it holds once torch's loop is over)."""

    def __init__(self, owner: RootBackward) -> None:
        self._owner = owner

    def remove(self) -> None:
        self._owner._drop()


def _unviewed(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
    """``module``'s output with the views full backward hooks made in it aliased (no view), or None if none."""
    views = _unique_views(output, set()) if torch.is_grad_enabled() else []
    if not views:
        return None
    aliases = OutputAlias.apply(_Call(module, [], [], len(args)), *views)  # type: ignore[no-untyped-call]  # torch's Function.apply is unannotated
    by_id = {id(t): a for t, a in zip(views, aliases, strict=True)}
    return map_tensors(output, lambda t: by_id.get(id(t), t))


def _unique_views(output: Any, taken: set[int]) -> list[torch.Tensor]:
    """The views full backward hooks made inside ``output`` that require grad, each once, not among ``taken``."""
    found: dict[int, torch.Tensor] = {}
    for t in tensors_in(output):
        if id(t) not in taken and id(t) not in found and t.requires_grad and _hook_view(t):
            found[id(t)] = t
    return list(found.values())
