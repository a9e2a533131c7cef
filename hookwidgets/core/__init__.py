"""Torch-only engine of hookwidgets: targets, hooks, captures, module tree. No display code."""

from .capture import CaptureStore, Record
from .explorer import Explorer
from .hooks import HookInfo, HookRegistry, TimelineEvent
from .kinds import GLOBAL_KINDS, KINDS, MODULE_KINDS, PARAM_KINDS
from .targets import resolve_module, resolve_target
from .tree import build_tree, probe

__all__ = [
    "GLOBAL_KINDS",
    "KINDS",
    "MODULE_KINDS",
    "PARAM_KINDS",
    "CaptureStore",
    "Explorer",
    "HookInfo",
    "HookRegistry",
    "Record",
    "TimelineEvent",
    "build_tree",
    "probe",
    "resolve_module",
    "resolve_target",
]
