"""The usual debugging questions answered: where a NaN began, why a hook did not fire, legacy against full hooks.

Internal: the public names are ``hookwidgets.core``'s; what is here may change without notice.
"""

from .compare import BackwardComparison, compare_backward
from .nonfinite import SUMMARY_FIELDS, first_nonfinite, first_nonfinite_row, summary_rows

__all__ = [
    "SUMMARY_FIELDS",
    "BackwardComparison",
    "compare_backward",
    "first_nonfinite",
    "first_nonfinite_row",
    "summary_rows",
]
