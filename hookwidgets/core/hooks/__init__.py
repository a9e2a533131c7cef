"""The engine: hook kinds, actions and edits, the registry that owns every hook and the handles it gives, the step
clock, events, notes and in-place collisions, and the runner of the explorer's own runs.

Internal: the public names are ``hookwidgets.core``'s; what is here may change without notice.
"""

from ..kind_table import KINDS, Kind
from .actions import BUILTIN_ACTIONS
from .clock import Clock
from .info import HookGroup, HookInfo, TimelineEvent
from .kinds import GLOBAL_KINDS, MODULE_KINDS, NODE_KINDS, PARAM_KINDS, resolve_kind, valid_kinds
from .registry import HookRegistry
from .tensor_edits import EDIT_NAMES

__all__ = [
    "BUILTIN_ACTIONS",
    "EDIT_NAMES",
    "GLOBAL_KINDS",
    "KINDS",
    "MODULE_KINDS",
    "NODE_KINDS",
    "PARAM_KINDS",
    "Clock",
    "HookGroup",
    "HookInfo",
    "HookRegistry",
    "Kind",
    "TimelineEvent",
    "resolve_kind",
    "valid_kinds",
]
