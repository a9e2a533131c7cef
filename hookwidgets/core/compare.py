"""An import path kept for existing code: compare_backward, the legacy and the full backward hook side by side.

Defined in ``hookwidgets.core.diagnostics.compare``.
"""

from .diagnostics.compare import BackwardComparison, compare_backward

__all__ = ["BackwardComparison", "compare_backward"]
