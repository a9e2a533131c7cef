"""Notes a whole step puts on hooks: a capture budget that holds less than one step, and "not armed" after a
forward whose output needs no grad."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

from ..capture.short_steps import with_note
from ..capture.store import CaptureStore
from ..diagnostics.notes import STEP_NOT_ARMED
from ..display import quoted
from ..kind_table import has
from ..model.nested import tensors_in

if TYPE_CHECKING:
    from .info import HookInfo


def note_short_steps(hooks: Iterable[HookInfo], store: CaptureStore) -> None:
    """Say on each hook whose records the store evicted before their own step ended that the budget holds less
    than one step (a global kind: naming the modules); drop the note once a later step was kept whole."""
    short = store.short_steps()
    for info in hooks:
        note = short.get((info.target, info.kind))
        if has(info.spec, family="global"):  # its records are each module's
            modules = [target for target, kind in short if kind == info.kind]
            more = f" and {len(modules) - 1} more modules" if len(modules) > 1 else ""
            note = f"{short[(modules[0], info.kind)]} (on {quoted(modules[0] or '(model)')}{more})" if modules else None
        info.note = with_note(info.note, note)


def note_armed(hooks: Iterable[HookInfo], output: Any) -> None:
    """Say "not armed" on ``hooks`` (of the kinds a step arms: ``Kind.armed_by_step``) after a forward whose
    ``output`` needs no grad (under no_grad or inference_mode, or nothing upstream requires grad); clear it after one
    that does."""
    if torch.is_grad_enabled():
        tensors = tensors_in(output)
        if not tensors:
            return  # no output tensor to tell (a forward that runs its own backward): the notes stay
        armed = any(t.requires_grad for t in tensors)
    else:
        armed = False
    for info in hooks:
        if armed:
            if info.note is not None and info.note.startswith(STEP_NOT_ARMED):
                info.note = None
        elif info.note is None or info.note.startswith(STEP_NOT_ARMED):
            info.note = STEP_NOT_ARMED  # (a note saying more, such as a compiled model's, is left)
