"""Torch-only engine of hookwidgets: paths, hooks, captures, module tree. No display code: it never imports
ipywidgets, IPython or matplotlib."""

from .._warnings import (
    AliasWarning,
    BlankMapWarning,
    CompiledModelWarning,
    FixedModeWarning,
    HookFailedWarning,
    HookwidgetsDeprecationWarning,
    HookwidgetsWarning,
    InplaceCollisionWarning,
    MaterializedWarning,
    PartialGraphWarning,
    PatchSkippedWarning,
    ProbeFailedWarning,
    SubscriberWarning,
    UnwatchedModulesWarning,
    ViewUpdateWarning,
)
from .capture.store import CaptureStore, Generation, Record
from .explorer import Explorer
from .hooks.kinds import GLOBAL_KINDS, KINDS, MODULE_KINDS, PARAM_KINDS
from .hooks.registry import HookGroup, HookInfo, HookRegistry, TimelineEvent
from .model.paths import resolve_module, resolve_path
from .model.scores import Score
from .model.tree import build_tree, probe
from .monitors.scalar_log import ScalarLog

__all__ = [
    "GLOBAL_KINDS",
    "KINDS",
    "MODULE_KINDS",
    "PARAM_KINDS",
    "AliasWarning",
    "BlankMapWarning",
    "CaptureStore",
    "CompiledModelWarning",
    "Explorer",
    "FixedModeWarning",
    "Generation",
    "HookFailedWarning",
    "HookGroup",
    "HookInfo",
    "HookRegistry",
    "HookwidgetsDeprecationWarning",
    "HookwidgetsWarning",
    "InplaceCollisionWarning",
    "MaterializedWarning",
    "PartialGraphWarning",
    "PatchSkippedWarning",
    "ProbeFailedWarning",
    "Record",
    "ScalarLog",
    "Score",
    "SubscriberWarning",
    "TimelineEvent",
    "UnwatchedModulesWarning",
    "ViewUpdateWarning",
    "build_tree",
    "probe",
    "resolve_module",
    "resolve_path",
]
