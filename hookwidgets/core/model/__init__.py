"""The model as the explorer sees it: its tree, hook paths and inputs, nested values, lazy modules, scopes and state.

Internal: the public names are ``hookwidgets.core``'s; what is here may change without notice.
"""

from ..._warnings import MaterializedWarning
from .compiled import is_compiled, run_eagerly
from .inputs import Inputs, Target, call_model
from .lazy import has_lazy, lazy_modules
from .names import ParamNames
from .nested import first_tensor, map_tensors, named_tensors, output_tensors, tensors_in
from .paths import resolve_module, resolve_path
from .preserved_state import preserved_state
from .scope import ScopeTracker, hidden_ops, node_id, op_name, parse_node_id
from .scores import Score, backward_score, class_scores, output_summary, resolve_score
from .tokens import Sequences, read_sequences
from .tree import ProbeResult, TreeNode, build_tree, describe_shape, probe

__all__ = [
    "Inputs",
    "MaterializedWarning",
    "ParamNames",
    "ProbeResult",
    "ScopeTracker",
    "Score",
    "Sequences",
    "Target",
    "TreeNode",
    "backward_score",
    "build_tree",
    "call_model",
    "class_scores",
    "describe_shape",
    "first_tensor",
    "has_lazy",
    "hidden_ops",
    "is_compiled",
    "lazy_modules",
    "map_tensors",
    "named_tensors",
    "node_id",
    "op_name",
    "output_summary",
    "output_tensors",
    "parse_node_id",
    "preserved_state",
    "probe",
    "read_sequences",
    "resolve_module",
    "resolve_path",
    "resolve_score",
    "run_eagerly",
    "tensors_in",
]
