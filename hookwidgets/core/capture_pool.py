"""An import path kept for existing code: the blocks captures move into once only the store holds them.

Defined in ``hookwidgets.core.capture.pool``.
"""

from .capture.pool import SHARED

__all__ = ["SHARED"]
