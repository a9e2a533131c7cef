"""An import path kept for existing code: the hook kinds: KINDS and the families they apply to.

Defined in ``hookwidgets.core.hooks.kinds``.
"""

from .hooks.kinds import GLOBAL_KINDS, KINDS, MODULE_KINDS, NODE_KINDS, PARAM_KINDS, Kind, resolve_kind, valid_kinds

__all__ = ["GLOBAL_KINDS", "KINDS", "MODULE_KINDS", "NODE_KINDS", "PARAM_KINDS", "Kind", "resolve_kind", "valid_kinds"]
