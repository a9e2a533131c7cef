"""An import path kept for existing code: the compiled statistics kernel and its status().

Defined in ``hookwidgets.core.capture.native``.
"""

from .capture.native import fused_sums, load_in_background, status

__all__ = ["fused_sums", "load_in_background", "status"]
