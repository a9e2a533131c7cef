"""Snapshots of everything the explorer must leave as found: hook dicts, flags, parameters, buffers."""

from __future__ import annotations

import gc
from typing import Any

import torch
import torch.nn.modules.module as module_globals
from torch import nn

from ..conftest import GLOBAL_DICTS, hook_state


def global_hook_state() -> dict[str, Any]:
    """Torch's global module hook dicts and flag, ``nn.Module.__call__``, the torch-function mode stack and
    saved-tensor hooks."""
    gc.disable()  # a collection here could run some dropped explorer's finalizer while the dicts are read
    try:
        state: dict[str, Any] = {name: list(getattr(module_globals, name, {}).items()) for name in GLOBAL_DICTS}
    finally:
        gc.enable()
    state["_global_is_full_backward_hook"] = module_globals._global_is_full_backward_hook
    state["module_call"] = nn.Module.__call__  # graph recorders wrap it while they follow forwards
    state["function_modes"] = torch._C._len_torch_function_stack()
    state["saved_tensor_hooks"] = torch._C._autograd._top_saved_tensors_default_hooks(False)
    return state


def all_hook_state(model: nn.Module) -> dict[Any, Any]:
    """Module hook dicts, backward flags and attribute names, parameter tensor and post-accumulate hooks, and
    the globals (torch's global backward flag among them)."""
    state: dict[Any, Any] = dict(hook_state(model))
    for path, module in model.named_modules():
        state[(path, "__dict__")] = sorted(vars(module))  # nothing of an explorer left on the instance
    for name, param in model.named_parameters():
        state[(name, "_backward_hooks")] = list((param._backward_hooks or {}).items())
        state[(name, "_post_accumulate_grad_hooks")] = list((param._post_accumulate_grad_hooks or {}).items())
    state["globals"] = global_hook_state()
    return state


def model_values(model: nn.Module) -> dict[str, Any]:
    """Copies of parameters, ``.grad`` (with the identity of each grad object), buffers and train flags."""
    return {
        "params": {n: p.detach().clone() for n, p in model.named_parameters()},
        "grads": {n: (id(p.grad), None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()},
        "buffers": {n: b.clone() for n, b in model.named_buffers()},
        "training": {n: m.training for n, m in model.named_modules()},
    }


def assert_same_values(before: dict[str, Any], after: dict[str, Any], what: str) -> None:
    """Parameters, grads, buffers and train flags equal, exactly (an explorer run must change nothing)."""
    assert before["training"] == after["training"], f"{what}: train/eval flags changed"
    for group in ("params", "buffers"):
        for name, value in before[group].items():
            assert torch.equal(value, after[group][name]), f"{what}: {group[:-1]} {name} changed"
    for name, (ident, value) in before["grads"].items():
        ident_after, value_after = after["grads"][name]
        assert ident == ident_after, f"{what}: .grad object of {name} replaced"
        same = (value is None and value_after is None) or (value is not None and torch.equal(value, value_after))
        assert same, f"{what}: .grad of {name} changed"


def diff_keys(before: dict[Any, Any], after: dict[Any, Any]) -> list[Any]:
    """Keys whose values differ (for a readable failure)."""
    return [key for key in before.keys() | after.keys() if before.get(key) != after.get(key)]
