"""What a hook-free twin shows in one step, seen through plain torch hooks: the fuzzer's independent oracle.

Per module path and call: the inputs (cloned before the module runs), the outputs (cloned when the
module returns), the gradients of its outputs, and whether any output required grad; and the
parameters the step's graph reaches (a walk of ``grad_fn``). Names follow the engine's records
(``args.0``, ``output``, ``output.0``, ``grad_output.0`` …).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from hookwidgets.core.hooks.actions import named_tensors

from ._walk import graph_params

Key = tuple[str, int]  # module path, call


@dataclass
class Observed:
    """One step of the twin: tensors by (path, call) and name, output requires_grad by path, params in the graph."""

    args: dict[Key, dict[str, torch.Tensor]] = field(default_factory=dict)
    outputs: dict[Key, dict[str, torch.Tensor]] = field(default_factory=dict)
    grads: dict[Key, dict[str, torch.Tensor]] = field(default_factory=lambda: defaultdict(dict))
    requires_grad: dict[str, bool] = field(default_factory=lambda: defaultdict(bool))
    params_in_graph: set[str] = field(default_factory=set)


def observe(model: nn.Module, step: Callable[[], Any]) -> tuple[Any, Observed]:
    """Run ``step`` (a forward and backward of ``model``) with plain observing hooks; they are removed after."""
    seen = Observed()
    calls: Counter[str] = Counter()
    handles = []

    def pre(path: str):
        def hook(module: nn.Module, args: Any) -> None:
            seen.args[(path, calls[path])] = {n: t.detach().clone() for n, t in named_tensors("args", args).items()}

        return hook

    def post(path: str):
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            key = (path, calls[path])
            calls[path] += 1
            tensors = named_tensors("output", output)
            seen.outputs[key] = {n: t.detach().clone() for n, t in tensors.items()}
            for name, tensor in tensors.items():
                if tensor.requires_grad:
                    seen.requires_grad[path] = True
                    tensor.register_hook(grad_of(key, "grad_" + name))

        return hook

    def grad_of(key: Key, name: str):
        def hook(grad: torch.Tensor) -> None:
            seen.grads[key][name] = grad.detach().clone()

        return hook

    for path, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(pre(path)))
        handles.append(module.register_forward_hook(post(path)))
    try:
        output = step()
    finally:
        for handle in handles:
            handle.remove()
    seen.params_in_graph = graph_params(output, model)
    return output, seen
