"""An independent count of autograd ops: a plain walk of ``grad_fn.next_functions`` from the outputs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

_PREFIX = "torch::autograd::"
HOOK_OPS = {"BackwardHookFunctionBackward"}  # nodes torch adds for full backward hooks; graphs hide them


def op_counts(output: Any) -> Counter[str]:
    """How many nodes of each op the graph behind ``output`` holds (AccumulateGrad included)."""
    todo = [t.grad_fn for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    seen: set[Any] = set()
    counts: Counter[str] = Counter()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        name = node.name().removeprefix(_PREFIX)
        if name not in HOOK_OPS:
            counts[name] += 1
        todo.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return counts


def graph_counts(graph: dict[str, Any]) -> Counter[str]:
    """How many nodes of each op the explorer's plain-data graph lists."""
    return Counter(node["op"] for node in graph["nodes"])


def graph_params(output: Any, model: torch.nn.Module) -> set[str]:
    """Names of the parameters of ``model`` whose AccumulateGrad node the graph behind ``output`` reaches."""
    names = {id(p): n for n, p in model.named_parameters()}
    todo = [t.grad_fn for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    seen: set[Any] = set()
    found: set[str] = set()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if variable is not None and id(variable) in names:
            found.add(names[id(variable)])
        todo.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return found
