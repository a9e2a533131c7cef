"""``no_gc()``: the cyclic garbage collector paused around bursts of allocation that make no cycles."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: a walk or a read of a model's names makes tens of thousands of
    small containers and no cycles, and the collections they would trigger cost more than the work itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
