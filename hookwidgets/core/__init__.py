"""Torch-only engine of hookwidgets: targets, hooks, captures, module tree. No display code."""

from .capture import CaptureStore, Record
from .explorer import Explorer
from .hooks import MODULE_KINDS, HookInfo, HookRegistry
from .targets import resolve_module
from .tree import build_tree, probe

__all__ = [
    "MODULE_KINDS",
    "CaptureStore",
    "Explorer",
    "HookInfo",
    "HookRegistry",
    "Record",
    "build_tree",
    "probe",
    "resolve_module",
]
