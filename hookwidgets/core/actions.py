"""An import path kept for existing code: the built-in actions of a hook.

Defined in ``hookwidgets.core.hooks.actions``.
"""

from .hooks.actions import BUILTIN_ACTIONS, Firing, perform

__all__ = ["BUILTIN_ACTIONS", "Firing", "perform"]
