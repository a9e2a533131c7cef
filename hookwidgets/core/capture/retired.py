"""Names kept one release after the capture pool went: they do nothing but say so (see CHANGELOG.md)."""

from __future__ import annotations

import warnings

from ..._warnings import HookwidgetsDeprecationWarning


def warn_retired(name: str, why: str, stacklevel: int = 3) -> None:
    """Warn that ``name`` does nothing any more and goes in the next release, saying ``why``."""
    warnings.warn(
        f"{name} does nothing any more and goes in the next release: {why}; remove the call",
        HookwidgetsDeprecationWarning,
        stacklevel=stacklevel,
    )


class RetiredPool:
    """What ``hookwidgets.core.capture_pool.SHARED`` was, with nothing left to hold: no blocks, no free bytes."""

    free_bytes = 0
    blocks = 0

    def clear(self) -> None:
        """Deprecated: does nothing (there are no blocks to unmap); it goes in the next release."""
        warn_retired("hookwidgets.core.capture_pool.SHARED.clear()", "captures are no longer moved into a pool")


SHARED = RetiredPool()
