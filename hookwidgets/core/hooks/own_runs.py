"""The explorers' own runs (shape probe, graph recording, attributions, checks): silent for every explorer.

While any explorer runs a forward of its own on a thread, no explorer's hooks record, count calls or
begin steps on that thread; a user's loop on another thread goes on recording.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch


class _OwnRun(threading.local):
    depth = 0  # own runs open on this thread (they nest: an attribution may record a graph)


OWN_RUN = _OwnRun()
"""This thread's state; hooks read ``OWN_RUN.depth`` (non-zero: inside an own run) on every firing."""


@contextlib.contextmanager
def own_run() -> Iterator[None]:
    """Silence every explorer's hooks on this thread inside the block.

    The run's backward stays on this thread too: on an accelerator autograd would run it on a device
    thread of its own, where this thread's state is not seen.
    """
    OWN_RUN.depth += 1
    try:
        with torch.autograd.set_multithreading_enabled(False):
            yield
    finally:
        OWN_RUN.depth -= 1
