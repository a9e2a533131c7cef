"""An import path kept for existing code: the edits a hook may apply before its action.

Defined in ``hookwidgets.core.hooks.edits``.
"""

from .hooks.edits import EDIT_NAMES, apply_edits, normalize_edits

__all__ = ["EDIT_NAMES", "apply_edits", "normalize_edits"]
