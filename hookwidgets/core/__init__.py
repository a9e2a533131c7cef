"""Torch-only engine of hookwidgets: paths, hooks, captures, module tree. No display code: it never imports
ipywidgets, IPython or matplotlib.

These are the engine's public names. Its subpackages (``model``, ``hooks``, ``capture``, ``graph``, ``attribution``,
``diagnostics``, ``monitors``, ``codegen``) and modules are internal: what they hold may change without notice.
"""

from .._warnings import (
    AliasWarning,
    BlankMapWarning,
    CompiledModelWarning,
    FixedModeWarning,
    HookFailedWarning,
    HookwidgetsWarning,
    InplaceCollisionWarning,
    MaterializedWarning,
    PartialGraphWarning,
    PatchSkippedWarning,
    ProbeFailedWarning,
    RunLogWarning,
    SubscriberWarning,
    UnwatchedModulesWarning,
    ViewUpdateWarning,
)
from .attribution import (
    CAM_METHODS,
    METHOD_WORDS,
    METHODS,
    PIXEL_METHODS,
    ROLLOUT_METHODS,
    TOKEN_METHODS,
    Attribution,
    as_grid,
    attribute,
    check_method,
    default_layer,
    method_name,
    spatial_layers,
    token_grid,
)
from .capture.export import load_captures
from .capture.native import status as native_status
from .capture.store import CaptureStore, Generation, Record
from .diagnostics.compare import BackwardComparison, compare_backward
from .diagnostics.lens import LogitLens
from .explorer import Explorer
from .graph.plain import (
    Dataflow,
    DataflowEdge,
    DataflowNode,
    GraphCluster,
    GraphData,
    GraphEdge,
    GraphNode,
    SavedTensor,
)
from .hooks.actions import BUILTIN_ACTIONS
from .hooks.edit_notes import edits_note
from .hooks.kinds import GLOBAL_KINDS, MODULE_KINDS, NODE_KINDS, PARAM_KINDS
from .hooks.registry import HookGroup, HookInfo, HookRegistry, TimelineEvent
from .hooks.tensor_edits import EDIT_NAMES
from .kind_table import KINDS, Kind
from .model.distributed import DistributedRunError
from .model.paths import resolve_module, resolve_path
from .model.scores import Score
from .model.tree import TreeNode, build_tree, probe
from .monitors.optim import UpdateRatioMonitor
from .monitors.packaging import PackageReport, default_intern, package_report
from .monitors.scalar_log import ScalarLog

__all__ = [
    "BUILTIN_ACTIONS",
    "CAM_METHODS",
    "EDIT_NAMES",
    "GLOBAL_KINDS",
    "KINDS",
    "METHODS",
    "METHOD_WORDS",
    "MODULE_KINDS",
    "NODE_KINDS",
    "PARAM_KINDS",
    "PIXEL_METHODS",
    "ROLLOUT_METHODS",
    "TOKEN_METHODS",
    "AliasWarning",
    "Attribution",
    "BackwardComparison",
    "BlankMapWarning",
    "CaptureStore",
    "CompiledModelWarning",
    "Dataflow",
    "DataflowEdge",
    "DataflowNode",
    "DistributedRunError",
    "Explorer",
    "FixedModeWarning",
    "Generation",
    "GraphCluster",
    "GraphData",
    "GraphEdge",
    "GraphNode",
    "HookFailedWarning",
    "HookGroup",
    "HookInfo",
    "HookRegistry",
    "HookwidgetsWarning",
    "InplaceCollisionWarning",
    "Kind",
    "LogitLens",
    "MaterializedWarning",
    "PackageReport",
    "PartialGraphWarning",
    "PatchSkippedWarning",
    "ProbeFailedWarning",
    "Record",
    "RunLogWarning",
    "SavedTensor",
    "ScalarLog",
    "Score",
    "SubscriberWarning",
    "TimelineEvent",
    "TreeNode",
    "UnwatchedModulesWarning",
    "UpdateRatioMonitor",
    "ViewUpdateWarning",
    "as_grid",
    "attribute",
    "build_tree",
    "check_method",
    "compare_backward",
    "default_intern",
    "default_layer",
    "edits_note",
    "load_captures",
    "method_name",
    "native_status",
    "package_report",
    "probe",
    "resolve_module",
    "resolve_path",
    "spatial_layers",
    "token_grid",
]
