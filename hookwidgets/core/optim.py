"""An import path kept for existing code: UpdateRatioMonitor, the size of each optimizer step against its weights.

Defined in ``hookwidgets.core.monitors.optim``.
"""

from .monitors.optim import UpdateRatioMonitor

__all__ = ["UpdateRatioMonitor"]
