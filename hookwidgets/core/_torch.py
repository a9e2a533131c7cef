"""The private torch APIs hookwidgets relies on, and public ones newer than its torch floor (pyproject.toml), in one
place, each guarded by capability.

Each is looked up once, with a fallback where this torch lacks it: a fact ``HAS_...`` says whether it is
there, and where a feature turns off without it, ``off()`` says which and why (``Explorer.diagnostics``
lists them). Readers on a hot path are handed out as plain callables (``autograd_node_reader()``…), so a
firing pays no extra Python call for the guard.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.modules.module as _module_globals
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin

_C = torch._C
_autograd = getattr(_C, "_autograd", None)


def _probe_node() -> Any:
    """A fresh autograd node (MulBackward0) of a leaf that requires grad, made with grad on whatever the mode."""
    with torch.inference_mode(False), torch.enable_grad():
        leaf = torch.zeros((), requires_grad=True)
        return (leaf * leaf).grad_fn


# --- The autograd node running on this thread, and its graph task ---------------------------------------------
_current_node = getattr(_C, "_current_autograd_node", None)
HAS_CURRENT_NODE = _current_node is not None
"""A hook can ask which autograd node runs it: backward firings find their forward call, recomputes are told."""
CURRENT_NODE_OFF = (
    "backward firings are numbered in firing order and a checkpoint's recompute counts as new calls: this torch "
    "has no torch._C._current_autograd_node, so a hook cannot tell which forward call its gradient belongs to"
)


def _no_node() -> None:
    return None


def autograd_node_reader() -> Callable[[], Any]:
    """A callable giving the autograd node running on this thread (None outside a backward, or without the API)."""
    return _current_node if HAS_CURRENT_NODE and _current_node is not None else _no_node


graph_task_id: Callable[[], int] = getattr(_C, "_current_graph_task_id", lambda: -1)
"""The id of the backward running on this thread (-1 outside one): each backward through a kept graph differs."""
forward_grad_enabled: Callable[[], bool] = getattr(_C, "_is_fwd_grad_enabled", lambda: False)
"""False inside an autograd.Function's forward (where a reentrant checkpoint runs its segment)."""
_top_saved_hooks = getattr(_autograd, "_top_saved_tensors_default_hooks", None)
HAS_SAVED_TENSOR_HOOKS = _top_saved_hooks is not None
"""A hook can read the saved-tensor hooks around it: which non-reentrant checkpoint segment runs it."""
SAVED_TENSOR_HOOKS_OFF = (
    "a forward firing that a non-reentrant torch.utils.checkpoint recomputes in the backward is numbered as call 0 "
    "of its step, whichever call it repeats: this torch has no torch._C._autograd._top_saved_tensors_default_hooks "
    "to tell which checkpoint segment runs a hook"
)


def top_saved_tensor_hooks() -> tuple[Any, Any] | None:
    """The innermost saved-tensor hooks (pack, unpack): a non-reentrant checkpoint's inside one of its segments."""
    return _top_saved_hooks(False) if HAS_SAVED_TENSOR_HOOKS and _top_saved_hooks is not None else None


# --- Autograd's numbering of the nodes of a thread --------------------------------------------------------------
_node = _probe_node()
HAS_NODE_NUMBERS = hasattr(_node, "_sequence_nr")
"""Each node tells its number in its thread's creation order: the graph's module scopes and ids need it."""
NODE_NUMBERS_OFF = (
    "the autograd graph (ex.graph(), node hooks) is off: this torch's autograd nodes have no _sequence_nr(), "
    "so the module that made each node cannot be told"
)
sequence_nr: Callable[[Any], int] = operator.methodcaller("_sequence_nr") if HAS_NODE_NUMBERS else (lambda node: 0)
"""``node``'s number in its thread's creation order (0 for every node without ``HAS_NODE_NUMBERS``)."""


def _probe_sequence_nr() -> int:
    """The next sequence number, by making one node (when torch lacks the reader of the counter)."""
    with torch.enable_grad():
        node = (torch.zeros((), requires_grad=True) * 1).grad_fn
    return sequence_nr(node) + 1 if node is not None else 0  # None under inference mode: no nodes are made


next_sequence_nr: Callable[[], int] = getattr(_autograd, "_get_sequence_nr", None) or _probe_sequence_nr
"""The number the next node made on this thread gets (free with torch's reader, one node made without it)."""
ACCUMULATE_GRAD: type = type(_node.next_functions[0][0])
"""The node type of a leaf tensor's gradient sink (found from a node, not by its private name)."""


# --- What nodes saved for backward --------------------------------------------------------------------------------
SAVED_TENSOR: type | None = getattr(_autograd, "SavedTensor", None)
"""What ``node._raw_saved_<name>`` gives for one saved tensor (None: unknown here, read by its ``data``)."""
_RAW_SAVED = "_raw_saved_"
# Read on the probe node (leaf * leaf saves both): torch 2.3 has the attributes but no ``data`` on what they give.
HAS_SAVED_TENSORS = isinstance(getattr(getattr(_node, f"{_RAW_SAVED}self", None), "data", None), torch.Tensor)
"""Nodes show what they saved without unpacking it: the graph's saved-tensor details need it."""
SAVED_TENSORS_OFF = (
    "the graph shows no saved tensors (ex.graph()'s 'saved', ex.saved_memory()): this torch cannot read what an "
    "autograd node saved without unpacking it (node._raw_saved_<name>.data)"
)


def saved_tensors_readable() -> bool:
    """Whether what nodes saved can be read (``HAS_SAVED_TENSORS``, read when called)."""
    return HAS_SAVED_TENSORS


def raw_saved_attrs(node_type: type) -> tuple[tuple[str, str], ...]:
    """``(name, attribute)`` for each tensor nodes of ``node_type`` save, read without unpacking."""
    return tuple((a[len(_RAW_SAVED) :], a) for a in dir(node_type) if a.startswith(_RAW_SAVED))


# --- torch's process-wide module hooks ------------------------------------------------------------------------------
GLOBAL_HOOK_DICTS = {
    "_global_forward_pre_hooks": "global_forward_pre",
    "_global_forward_hooks": "global_forward",
    "_global_backward_pre_hooks": "global_backward_pre",
    "_global_backward_hooks": "global_backward",
}
"""torch's dicts of process-wide module hooks (``register_module_*_hook``) -> the kind each is listed as."""
HAS_GLOBAL_HOOKS = all(isinstance(getattr(_module_globals, name, None), dict) for name in GLOBAL_HOOK_DICTS)
"""torch keeps process-wide module hooks where they can be read: ex.hooks lists those others registered."""
GLOBAL_HOOKS_OFF = (
    "process-wide module hooks others registered (torch.nn.modules.module.register_module_*_hook) are not listed "
    "on ex.hooks nor considered by compare_backward: this torch keeps them elsewhere"
)


def global_module_hooks() -> dict[str, dict[int, Callable[..., Any]]]:
    """The process-wide module hooks others registered, by the kind each is listed as (empty if off)."""
    if not HAS_GLOBAL_HOOKS:
        return {}
    return {kind: getattr(_module_globals, name) for name, kind in GLOBAL_HOOK_DICTS.items()}


# --- The mark torch leaves on a module with a backward hook ---------------------------------------------------------
_FULL_FLAG = "_is_full_backward_hook"
HAS_FULL_BACKWARD_FLAG = _FULL_FLAG in nn.Module().__dict__
"""A module says whether its backward hooks are full (True), legacy (False) or none yet (None)."""
FULL_BACKWARD_FLAG_OFF = (
    "the mark of full or legacy backward hooks on modules is not read nor put back: this torch's modules have no "
    "_is_full_backward_hook"
)


def full_backward_flag(module: nn.Module) -> bool | None:
    """True once ``module`` had a full backward hook, False a legacy one, None neither (or unknown here)."""
    return getattr(module, _FULL_FLAG, None) if HAS_FULL_BACKWARD_FLAG else None


def set_full_backward_flag(module: nn.Module, value: bool | None) -> None:
    """Put ``module``'s full/legacy backward-hook mark to ``value`` (nothing where torch has none)."""
    if HAS_FULL_BACKWARD_FLAG:
        setattr(module, _FULL_FLAG, value)


FULL_BACKWARD_FLAG = _FULL_FLAG
"""The mark's attribute name, for state saved from a module's ``__dict__`` (a copy, a pickle)."""


# --- torch.compile's markers ----------------------------------------------------------------------------------------
COMPILED_INNER = "_orig_mod"
"""Where torch.compile's wrapper (OptimizedModule) keeps the module it compiles: a step of its submodules' paths."""


def is_compile_wrapper(module: object) -> bool:
    """Whether ``module`` is torch.compile's wrapper (OptimizedModule), by its class name: importing dynamo's
    class would cost the import of the compiler."""
    return type(module).__name__ == "OptimizedModule"


def compiled_inner(module: nn.Module) -> nn.Module | None:
    """The module a torch.compile wrapper compiles; None for any other module."""
    inner = module._modules.get(COMPILED_INNER) if is_compile_wrapper(module) else None
    return inner if isinstance(inner, nn.Module) else None


def forwards_writes(wrapper: nn.Module) -> bool:
    """Whether a torch.compile wrapper sends writes of its attributes to the module it wraps (by having a
    ``__setattr__`` of its own: torch 2.3's has none, so a write stays on the wrapper)."""
    return type(wrapper).__setattr__ is not nn.Module.__setattr__


def compiled_in_place(module: nn.Module) -> bool:
    """Whether ``module.compile()`` compiled the module in place (its calls go through compiled code)."""
    return getattr(module, "_compiled_call_impl", None) is not None


_set_stance = getattr(torch.compiler, "set_stance", None)
HAS_COMPILER_STANCE = _set_stance is not None
"""torch can run compiled code's Python for a while (``torch.compiler.set_stance``, torch 2.6): the explorer's own
runs of a compiled model compile nothing and leave the user's compiled code as it was."""
COMPILER_STANCE_OFF = (
    "the explorer's own runs of a compiled model (shape probe, attach-time checks, graph(), attributions) go through "
    "its compiled code, where each may cost a compilation and leave compiled code that the model's next calls pick "
    "up: this torch has no torch.compiler.set_stance (torch 2.6) to run them eagerly"
)


def eager_stance() -> contextlib.AbstractContextManager[Any]:
    """A context in which every compiled function of the process runs its Python code (nothing without the API)."""
    if HAS_COMPILER_STANCE and _set_stance is not None:
        stance: contextlib.AbstractContextManager[Any] = _set_stance("force_eager")
        return stance
    return contextlib.nullcontext()


# --- Other internals ------------------------------------------------------------------------------------------------
LAZY_INIT_HOOK = getattr(LazyModuleMixin, "_infer_parameters", None)
"""The pre-hook a lazy module registers on itself to materialize at its first forward (None: unknown here)."""

_tree_leaves: Callable[[Any], list[Any]] | None
try:
    from torch.utils._pytree import tree_leaves as _tree_leaves
except ImportError:  # pragma: no cover - every torch hookwidgets supports has it
    _tree_leaves = None


def _plain_leaves(value: Any) -> list[Any]:
    """Leaves of tuples, lists and dicts, as pytree gives them for those (its registered types aside)."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _plain_leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _plain_leaves(item)]
    return [value]


tree_leaves: Callable[[Any], list[Any]] = _tree_leaves or _plain_leaves
"""The leaves of a nested output, through every container type torch's pytree knows (deque, registered nodes)."""

reparametrized: Callable[[nn.Module, dict[str, torch.Tensor]], contextlib.AbstractContextManager[None]] | None
try:  # the context torch.func.functional_call swaps a module's parameters in
    from torch.nn.utils.stateless import _reparametrize_module as reparametrized
except ImportError:  # pragma: no cover - every torch hookwidgets supports has it
    reparametrized = None
"""``reparametrized(module, {name: tensor})``: a context in which ``module`` uses those tensors as its parameters
(None where this torch lacks it: ablate_heads on nn.MultiheadAttention is then refused)."""

# --- Copies of many tensors in one call -----------------------------------------------------------------------------
_foreach_copy = getattr(torch, "_foreach_copy_", None)
HAS_FOREACH_COPY = _foreach_copy is not None
"""torch copies lists of tensors in one call: putting a model's buffers back costs one call, not one per buffer."""


def copy_each(targets: list[torch.Tensor], sources: list[torch.Tensor]) -> None:
    """``target.copy_(source)`` for each pair (same shapes): one fused call where torch has it, a loop otherwise."""
    if HAS_FOREACH_COPY and _foreach_copy is not None:
        if targets:  # torch refuses an empty list
            _foreach_copy(targets, sources)
        return
    for target, source in zip(targets, sources, strict=True):
        target.copy_(source)


del _node  # its graph is not kept


# --- autograd views ---------------------------------------------------------------------------------------------------
_is_view = getattr(torch.Tensor, "_is_view", None)
HAS_VIEW_TEST = _is_view is not None
"""torch tells whether autograd sees a tensor as a view (``Tensor._is_view``): the model's output is aliased when a
full backward hook of a submodule made it one, so an in-place op on it works."""
VIEW_TEST_OFF = (
    "an in-place op on the model's output still raises torch's view error when the full backward hook of the submodule "
    "that made it (global_backward, or backward on the last layer) wrapped it: this torch does not say which tensors "
    "are views (Tensor._is_view)"
)


def is_view(tensor: torch.Tensor) -> bool:
    """Whether autograd sees ``tensor`` as a view of another; False where this torch cannot tell."""
    return HAS_VIEW_TEST and _is_view is not None and bool(_is_view(tensor))


# --- FSDP2's state of a parameter it shards: the full-shape Parameter autograd sees ---------------------------
# fully_shard keeps, per parameter, an FSDPParam (torch/distributed/fsdp/_fully_shard/_fsdp_param.py) holding the
# sharded DTensor Parameter the module shows between steps (``sharded_param``) and the full-shape Parameter it puts in
# the module during forward and backward (``_unsharded_param``, made at the first all-gather, the same object after).
_FSDP_STATE = "_get_fsdp_state"


def fsdp2_param_state(root: nn.Module, param: torch.Tensor) -> Any | None:
    """FSDP2's state of ``param``, a sharded parameter of a module of ``root`` that ``fully_shard`` wrapped; None
    where FSDP2 does not shard it, or where this torch keeps that state elsewhere."""
    for module in root.modules():
        get_state = getattr(module, _FSDP_STATE, None)
        if not callable(get_state):
            continue
        try:
            group = getattr(get_state(), "_fsdp_param_group", None)
        except Exception:  # a private API whose failure only means: not found here
            continue
        for state in getattr(group, "fsdp_params", None) or ():
            if getattr(state, "sharded_param", None) is param:
                return state
    return None


def fsdp2_unsharded_param(state: Any) -> torch.Tensor | None:
    """The full-shape Parameter FSDP2 puts in the module for forward and backward (``fsdp2_param_state``); None before
    the first all-gather made it."""
    unsharded = getattr(state, "_unsharded_param", None)
    return unsharded if isinstance(unsharded, torch.Tensor) else None


def off() -> dict[str, str]:
    """Each feature this torch turns off, and why (empty on a torch with every API above)."""
    facts = (
        (HAS_CURRENT_NODE, "current_node", CURRENT_NODE_OFF),
        (HAS_SAVED_TENSOR_HOOKS, "saved_tensor_hooks", SAVED_TENSOR_HOOKS_OFF),
        (HAS_NODE_NUMBERS, "node_numbers", NODE_NUMBERS_OFF),
        (HAS_SAVED_TENSORS, "saved_tensors", SAVED_TENSORS_OFF),
        (HAS_GLOBAL_HOOKS, "global_hooks", GLOBAL_HOOKS_OFF),
        (HAS_FULL_BACKWARD_FLAG, "full_backward_flag", FULL_BACKWARD_FLAG_OFF),
        (HAS_COMPILER_STANCE, "compiler_stance", COMPILER_STANCE_OFF),
        (HAS_VIEW_TEST, "view_test", VIEW_TEST_OFF),
    )
    return {name: why for has, name, why in facts if not has}
