"""In-place collisions: which full backward hooks an in-place op broke, and the texts that say why.

A full backward hook makes torch wrap its module's outputs in a view; an in-place op on that view fails
(``BackwardHookFunction is a view and is being modified inplace``). The forward hooks of modules with such
hooks note the outputs each call made, so the error's modified view names the module it came from.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable

import torch
from torch import nn

from ..diagnostics.notes import explain_collision, explain_foreign_collision, modified_view
from ..kind_table import has
from .info import HookInfo


class Collisions:
    """The outputs each module with a full backward hook last made, and the explanations of collisions so far."""

    def __init__(self) -> None:
        self._outputs: dict[str, list[weakref.ref]] = {}  # module path -> its last call's output tensors
        self.explanations: deque[str] = deque(maxlen=100)
        """Why hooks were detached (or, for others' hooks, what collided), newest last."""

    def note_outputs(self, target: str, tensors: list[torch.Tensor]) -> None:
        """``tensors``, the output of the latest call of ``target``: each by the tensor it views, if a view
        (torch's wrapper is a view of that one too)."""
        self._outputs[target] = [weakref.ref(t if t._base is None else t._base) for t in tensors]

    def colliding(
        self,
        exc: BaseException,
        culprit: str | None,
        full: list[HookInfo],
        foreign_full_backward: Callable[[], list[tuple[str, str, str]]],
    ) -> list[HookInfo]:
        """Which of ``full`` (one registry's full backward hooks) the in-place op of ``exc`` collided with;
        ``culprit``: the in-place module's path; ``foreign_full_backward()``: the ones others attached.

        The tensor the op modified is a view torch made of a hooked module's output: when a frame of the
        traceback holds it, the module whose last output it views is the one (with the hooks on the in-place
        module itself and the global ones). Otherwise every hook is a suspect, unless only others' can be.
        """
        view = modified_view(exc)
        base = view._base if view is not None else None
        # a hook on the in-place module itself wraps its input, and a global hook is on every module
        always = [info for info in full if has(info.spec, family="global") or info.target == culprit]
        outputs = self._outputs
        matched = [info for info in full if any(ref() is base for ref in outputs.get(info.target, ()))]
        if base is not None and matched:
            return [info for info in full if info in matched or info in always]
        if base is not None and not always and foreign_full_backward():
            return []
        return full

    def explain(self, info: HookInfo, culprit: str | None, model: nn.Module | None) -> str:
        """Why ``info`` was detached after a collision: set as its ``last_error`` and kept; returns the text."""
        text = explain_collision(info.kind, info.target, culprit, model)
        info.last_error = text
        self.explanations.append(text)
        return text

    def explain_foreign(self, culprit: str | None, model: nn.Module, hooks: list[tuple[str, str, str]]) -> str:
        """What collided when none of the registry's hooks did: the in-place module and others' ``hooks``."""
        text = explain_foreign_collision(culprit, model, hooks)
        self.explanations.append(text)
        return text
