"""Monitors built on the engine, beside it: the optimizer's update ratios, the summary's statistics logged to
TensorBoard, and what a ``torch.package`` export makes of each module.

Internal: the public names are ``hookwidgets.core``'s; what is here may change without notice.
"""

from .optim import UpdateRatioMonitor
from .packaging import PackageReport, default_intern, package_report
from .scalar_log import ScalarLog

__all__ = ["PackageReport", "ScalarLog", "UpdateRatioMonitor", "default_intern", "package_report"]
