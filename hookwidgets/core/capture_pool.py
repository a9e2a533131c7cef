"""Deprecated, kept importable for one release: the pool of mapped memory that captures once moved into is gone
(captures stay references to the model's own tensors). ``SHARED.clear()`` does nothing."""

from __future__ import annotations

import warnings


class _NoPool:
    """What ``SHARED`` was, with nothing left to hold: no blocks, no free bytes."""

    free_bytes = 0
    blocks = 0

    def clear(self) -> None:
        """Deprecated: does nothing (there are no blocks to unmap); it goes in the next release."""
        warnings.warn(
            "hookwidgets.core.capture_pool.SHARED.clear() does nothing any more and goes in the next release: "
            "captures are no longer moved into a pool; remove the call",
            DeprecationWarning,
            stacklevel=2,
        )


SHARED = _NoPool()

__all__ = ["SHARED"]
