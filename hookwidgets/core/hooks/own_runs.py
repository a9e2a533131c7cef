"""The explorers' own runs (shape probe, graph recording, attributions, checks): silent for every explorer.

While any explorer runs a forward of its own on a thread, no explorer's hooks record, count calls or
begin steps on that thread; a user's loop on another thread goes on recording. An analysis of the model the user
studies (logit lens, attention, patching, attributions) runs with the user's edits: there the hooks that carry an
edit apply it, and only that (``silent``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch


class _OwnRun(threading.local):
    depth = 0  # own runs open on this thread (they nest: an attribution may record a graph)
    edits = False  # every open own run applies the hooks' edits
    failed: list[Any] | None = None  # the edit hooks (HookInfo) that failed in the outermost edits run


OWN_RUN = _OwnRun()
"""This thread's state; hooks read it through ``silent`` on every firing."""


def silent(edit: tuple[Any, ...]) -> bool:
    """Whether a hook carrying ``edit`` (its ``HookInfo.edit``, ``()`` for none) does nothing here: inside an own
    run, unless that run applies the user's edits and the hook carries one. Every explorer hook asks this."""
    return bool(OWN_RUN.depth) and not (OWN_RUN.edits and edit)


def editing() -> bool:
    """Inside an own run that applies the user's edits: a hook that is not ``silent`` applies its edit only."""
    return bool(OWN_RUN.depth) and OWN_RUN.edits


def edit_failed(info: Any) -> None:
    """Note that ``info``'s edit failed in this edits run (its result then says the edit was left out)."""
    if OWN_RUN.failed is not None and info not in OWN_RUN.failed:
        OWN_RUN.failed.append(info)


@contextlib.contextmanager
def own_run(edits: bool = False, failed: list[Any] | None = None) -> Iterator[None]:
    """Silence every explorer's hooks on this thread inside the block; ``edits``: the hooks that carry an edit apply
    it (only where every enclosing own run applies edits too); ``failed`` collects those whose edit failed.

    The run's backward stays on this thread too: on an accelerator autograd would run it on a device
    thread of its own, where this thread's state is not seen.
    """
    state = OWN_RUN
    outer_edits, outer_failed = state.edits, state.failed
    state.edits = edits and (outer_edits or not state.depth)
    if failed is not None and outer_failed is None:
        state.failed = failed
    state.depth += 1
    try:
        with torch.autograd.set_multithreading_enabled(False):
            yield
    finally:
        state.depth -= 1
        state.edits, state.failed = outer_edits, outer_failed
