"""In-place collisions, in one place: which full backward hooks an in-place op broke, why, and detaching them.

A full backward hook makes torch wrap its module's outputs in a view; an in-place op on that view fails
(``BackwardHookFunction is a view and is being modified inplace``). The forward hooks of modules with such
hooks note the outputs each call made, so the error's modified view names the module it came from.
``Collisions.without_colliding`` runs an explorer operation with the hooks it breaks detached: every caller
(the attach-time check, ``graph()``, the attributions, each analysis) goes through it.
"""

from __future__ import annotations

import re
import types
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterable
from typing import TypeGuard, TypeVar

import torch
from torch import nn

from ..._warnings import InplaceCollisionWarning
from ..display import display_name, quoted
from ..kind_table import has
from .events import Events
from .info import HookInfo

T = TypeVar("T")

# torch 2.13 names the node by its Function (BackwardHookFunction); torch 2.11 by its backward node's class
# (BackwardHookFunctionBackward), as seen on a CUDA machine.
_INPLACE_VIEW_ERROR = re.compile(r"BackwardHookFunction(?:Backward)? is a view and is being modified inplace")


class Collisions:
    """One registry's collisions: the outputs each module with a full backward hook last made, the hooks an in-place
    op broke, the explanations so far, and the hooks detached for them.

    ``hooks()``: the registry's live hooks; ``root()``: the model or None; ``foreign()``: ``(path, kind, name)`` of
    the full backward hooks others attached; ``remove(info, in_forward)``: the registry's removal of one hook.
    """

    def __init__(
        self,
        hooks: Callable[[], Iterable[HookInfo]],
        root: Callable[[], nn.Module | None],
        foreign: Callable[[], list[tuple[str, str, str]]],
        remove: Callable[[HookInfo, bool], None],
        events: Events,
    ) -> None:
        self._hooks, self._root, self._foreign, self._remove, self._events = hooks, root, foreign, remove, events
        self._outputs: dict[str, list[weakref.ref[torch.Tensor]]] = {}  # module path -> its last call's output tensors
        self.explanations: deque[str] = deque(maxlen=100)
        """Why hooks were detached (or, for others' hooks, what collided), newest last."""

    def note_outputs(self, path: str, tensors: list[torch.Tensor]) -> None:
        """``tensors``, the output of the latest call of ``path``: each by the tensor it views, if a view
        (torch's wrapper is a view of that one too)."""
        self._outputs[path] = [weakref.ref(t if t._base is None else t._base) for t in tensors]

    def colliding(self, exc: BaseException) -> list[HookInfo]:
        """The registry's full backward hooks that the in-place op of ``exc`` collided with (none: not ours).

        The tensor the op modified is a view torch made of a hooked module's output: when a frame of the
        traceback holds it, the module whose last output it views is the one. Otherwise every full backward
        hook of the explorer is a suspect, unless only hooks others attached can be: then none is, and the
        caller explains theirs. (A hook on the in-place module itself breaks on its own input, and a global
        hook is on every module: those stay suspects.)
        """
        root = self._root()
        return self._colliding(exc, inplace_culprit(exc, root) if root is not None else None)

    def _colliding(self, exc: BaseException, culprit: str | None) -> list[HookInfo]:
        full = [info for info in self._hooks() if has(info.spec, full_backward=True)]
        if not full or self._root() is None:
            return full
        view = modified_view(exc)
        base = view._base if view is not None else None
        always = [info for info in full if has(info.spec, family="global") or info.path == culprit]
        matched = [info for info in full if any(ref() is base for ref in self._outputs.get(info.path, ()))]
        if base is not None and matched:
            return [info for info in full if info in matched or info in always]
        if base is not None and not always and self._foreign():
            return []
        return full

    def detach(self, exc: BaseException, in_forward: bool = False) -> list[HookInfo]:
        """Detach the full backward hooks the in-place op of ``exc`` collided with, say why on each (its
        ``last_error``, a warning, ``explanations``, events); returns them. None of ours: others' hook is explained
        and left alone. ``in_forward``: called from the root's forward hook, whose dict torch is iterating over."""
        root = self._root()
        culprit = inplace_culprit(exc, root) if root is not None else None
        colliding = self._colliding(exc, culprit)
        texts = []
        if not colliding and root is not None:
            texts.append(explain_foreign_collision(culprit, root, self._foreign()))
        for info in colliding:
            info.last_error = explain_collision(info.kind, info.path, culprit, root)
            self._remove(info, in_forward)
            texts.append(info.last_error)
        for text in texts:
            self.explanations.append(text)
            warnings.warn(text, InplaceCollisionWarning, stacklevel=3)
        self._events.collided(colliding, texts)
        return colliding

    def without_colliding(
        self,
        op: Callable[[], T],
        *,
        reported: Callable[[T], BaseException | None] | None = None,
        attaching: Collection[HookInfo] = (),
    ) -> T:
        """Run ``op``, an operation of the explorer; while it fails on an in-place collision with full backward hooks
        of ours, detach them (each explained) and run it again. ``reported(result)``: the error an operation that
        keeps its failure (a partial graph) reports instead of raising. ``attaching``: the hooks attach() is adding,
        which are refused instead (a ValueError saying why); a collision of others is left to the run that meets it.
        """
        while True:  # ends: each round detaches at least one hook, or returns, or raises
            try:
                result = op()
            except RuntimeError as exc:
                if not is_inplace_collision(exc):
                    raise
                if attaching:
                    self._refuse(exc, attaching)
                    raise
                if not self.detach(exc):
                    raise
                continue
            failure = reported(result) if reported is not None else None
            if not is_inplace_collision(failure) or attaching or not self.detach(failure):
                return result

    def _refuse(self, exc: BaseException, attaching: Collection[HookInfo]) -> None:
        """A ValueError when the collision of ``exc`` broke one of the hooks being attached."""
        refused = [info for info in self.colliding(exc) if info in attaching]
        if refused:
            root = self._root()
            culprit = inplace_culprit(exc, root) if root is not None else None
            raise ValueError(explain_collision(refused[0].kind, refused[0].path, culprit, root)) from None


def is_inplace_collision(exc: BaseException | None) -> TypeGuard[RuntimeError]:
    """True for torch's error when an in-place op modifies the output a full backward hook wrapped."""
    return isinstance(exc, RuntimeError) and _INPLACE_VIEW_ERROR.search(str(exc)) is not None


def inplace_culprit(exc: BaseException, model: nn.Module) -> str | None:
    """Path of the innermost module of ``model`` running when ``exc`` was raised (the in-place one)."""
    paths = {id(m): p for p, m in model.named_modules()}
    culprit = None
    tb: types.TracebackType | None = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, nn.Module) and id(owner) in paths:
            culprit = paths[id(owner)]
        tb = tb.tb_next
    return culprit


def modified_view(exc: BaseException) -> torch.Tensor | None:
    """The tensor the in-place op of a collision tried to modify, when the traceback shows it for sure: the one
    view a full backward hook's ``BackwardHookFunction`` made (its ``_base`` is the hooked module's output)
    among the locals of the innermost frame, a function such as ``F.relu(input, inplace=True)``.

    None when that frame is a module's own code (``out.add_(x)`` in a forward: the tensor modified may be a
    temporary, and another local a view of some other hooked output) or holds no such view, or several.
    """
    tb: types.TracebackType | None = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    local_values = tb.tb_frame.f_locals.values()
    if any(isinstance(value, nn.Module) for value in local_values):
        return None
    views = [
        value
        for value in local_values
        if isinstance(value, torch.Tensor) and type(value.grad_fn).__name__ == "BackwardHookFunctionBackward"
    ]
    return views[0] if len(views) == 1 else None


def explain_collision(kind: str, path: str, culprit: str | None, model: nn.Module | None) -> str:
    """What went wrong when a full backward hook met an in-place op, and the two ways out."""
    where, fix = _where_and_fix(culprit, model)
    return (
        f"the full backward hook {kind!r} on {quoted(path)} collides with {where}: torch wraps the hooked "
        "module's output in a view for the backward hook, and modifying that view in place makes the "
        f"forward raise. The hook was detached so the next forward works. Attach 'grad' instead (tensor "
        f"hooks are robust to in-place ops), or {fix}."
    )


def explain_foreign_collision(culprit: str | None, model: nn.Module, hooks: list[tuple[str, str, str]]) -> str:
    """What went wrong when an in-place op met a full backward hook that the explorer did not attach."""
    where, fix = _where_and_fix(culprit, model)
    owners = ", ".join(f"{kind} {display_name(name)} on {quoted(path or '(model)')}" for path, kind, name in hooks)
    whose = f" ({owners})" if owners else ""
    return (
        f"{where} modifies the output of a module with a full backward hook that the explorer did not "
        f"attach{whose}: torch wraps the hooked module's output in a view for the backward hook, and modifying "
        "that view in place makes the forward raise. The explorer leaves hooks others attached alone: remove "
        f"that hook (its handle's .remove()), register a tensor hook instead, or {fix}."
    )


def _where_and_fix(culprit: str | None, model: nn.Module | None) -> tuple[str, str]:
    """The in-place module as words, and how to make it out of place."""
    where, fix = "an in-place op", "make the in-place op out of place"
    if culprit is not None and model is not None:
        module = model.get_submodule(culprit)
        where = f"the in-place module {quoted(culprit)} ({display_name(type(module).__name__)})"
        if hasattr(module, "inplace"):
            fix = f"set model.get_submodule({quoted(culprit)}).inplace = False"
    return where, fix
