"""The explorer's hooks: kinds, actions and edits, the registry that owns them and the handles it gives, the optimizer
monitor, and the log of statistics to TensorBoard."""

from .actions import BUILTIN_ACTIONS
from .clock import Clock
from .edits import EDIT_NAMES
from .info import HookGroup, HookInfo, TimelineEvent
from .kinds import GLOBAL_KINDS, KINDS, MODULE_KINDS, NODE_KINDS, PARAM_KINDS, Kind, resolve_kind, valid_kinds
from .optim import UpdateRatioMonitor
from .packaging import PackageReport, default_intern, package_report
from .registry import HookRegistry
from .scalar_log import ScalarLog

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
    "PackageReport",
    "ScalarLog",
    "TimelineEvent",
    "UpdateRatioMonitor",
    "default_intern",
    "package_report",
    "resolve_kind",
    "valid_kinds",
]
