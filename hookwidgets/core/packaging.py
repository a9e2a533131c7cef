"""An import path kept for existing code: package_report, what torch.package's hooks saw while a model was exported.

Defined in ``hookwidgets.core.monitors.packaging``.
"""

from .monitors.packaging import PackageReport, default_intern, package_report

__all__ = ["PackageReport", "default_intern", "package_report"]
