"""Hooks on op nodes (AddmmBackward0, ...), made anew by every forward: found by scope and ordinal and placed
on each forward of the model. The generator adds the two lines that register ``_scope_pre`` and ``_scope_post``
as torch's global module hooks."""

import bisect
import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import Node

from .paths import model, paths

node_hooks: list[tuple[str, str, int, str, Callable[..., Any]]]  # the hook goes to getattr(node, method)
_scope_stack: list[str]
_scope_log: list[tuple[int, str | None]]  # (sequence number, scope from it on)
_next_sequence_nr: Callable[[], int]

# --- generated code ---

# Op nodes (AddmmBackward0, AddBackward0, ...) are made anew by every forward, so their hooks are placed
# on every forward. A node's address "<scope>/<op>#<n>" is the n-th node of that op, in creation order,
# that the module at <scope> made itself (not its submodules). Two global hooks log from which autograd
# sequence number on each module of the model was running; when the model's forward returns, its graph
# is walked from the outputs and each addressed node gets its hook. One thread at a time.
node_hooks = []  # (scope, op, ordinal, method, hook) placed on every forward
_scope_stack, _scope_log, _forward_start = [], [], [0]
_hiding = [0]  # above 0 while a hook's edit runs (_edit_hidden): its nodes get scope None and no address


def _probe_sequence_nr() -> int:
    # For a torch without the private reader below: make one node and read its number.
    with torch.enable_grad():
        node = (torch.zeros((), requires_grad=True) * 1).grad_fn
    return node._sequence_nr() + 1 if node is not None else 0


# The number autograd gives the next node made on this thread (a private torch function, free to call).
_next_sequence_nr = getattr(torch._C._autograd, "_get_sequence_nr", _probe_sequence_nr)


def _note_scope() -> None:
    seq = _next_sequence_nr()
    scope = None if _hiding[0] else _scope_stack[-1] if _scope_stack else ""
    if _scope_log and _scope_log[-1][0] == seq:
        _scope_log[-1] = (seq, scope)  # no node was made since the last entry
    elif not _scope_log or _scope_log[-1][1] != scope:
        _scope_log.append((seq, scope))


def _scope_pre(module: nn.Module, args: Any) -> None:
    path = paths.get(id(module))
    if path is None:
        return  # a module of another model
    if module is model:  # a new forward of the model
        _scope_stack.clear()
        _scope_log.clear()
        _forward_start[0] = _next_sequence_nr()
    elif not _scope_stack:
        return  # a submodule called on its own
    _scope_stack.append(path)
    _note_scope()


def _scope_post(module: nn.Module, args: Any, output: Any) -> None:
    path = paths.get(id(module))
    if path is None or not _scope_stack:
        return
    while _scope_stack and _scope_stack.pop() != path:
        pass
    _note_scope()
    if module is model and not _scope_stack and node_hooks:
        _place_node_hooks(output, _forward_start[0], _next_sequence_nr())


def _output_nodes(output: object) -> list[Node]:
    todo, nodes = [output], []
    while todo:
        item = todo.pop()
        if isinstance(item, torch.Tensor):
            if item.grad_fn is not None:
                nodes.append(item.grad_fn)
        elif isinstance(item, (tuple, list)):
            todo.extend(reversed(item))
        elif isinstance(item, dict):
            todo.extend(reversed(list(item.values())))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            todo.extend(reversed([getattr(item, f.name, None) for f in dataclasses.fields(item)]))
    return nodes


def _place_node_hooks(output: object, start: int, end: int) -> None:
    # Walk this forward's graph, give each node its scope and ordinal, and hook the addressed ones.
    order, scope_of, todo = [], {}, list(reversed(_output_nodes(output)))
    seen = set()
    while todo:  # iterative: a deep graph would exceed Python's recursion limit
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.name().endswith("AccumulateGrad") or node._sequence_nr() < start:
            continue  # a leaf's gradient sink, or the inputs' own history
        order.append(node)
        todo.extend(n for n, _ in node.next_functions if n is not None)
    starts = [seq for seq, _ in _scope_log]
    for node in order:
        seq = node._sequence_nr()
        if seq < end:
            i = bisect.bisect_right(starts, seq) - 1
            scope_of[node] = _scope_log[i][1] if i >= 0 else ""
    for node in order:  # a view autograd rebuilt after the forward takes the scope of its first user
        for n, _ in node.next_functions:
            if n in seen and n not in scope_of and node in scope_of:
                scope_of[n] = scope_of[node]
    counts: dict[tuple[str | None, str], int]
    wanted: dict[tuple[str | None, str, int], list[tuple[str, Callable[..., Any]]]]
    scope: str | None  # as the node's key has it (None, for a hook's edit, is skipped)
    counts, wanted, found = {}, {}, set()
    for scope, op, ordinal, method, hook in node_hooks:
        wanted.setdefault((scope, op, ordinal), []).append((method, hook))
    for node in sorted(order, key=lambda n: n._sequence_nr()):
        op = node.name().removeprefix("torch::autograd::")
        key = (scope_of.get(node, ""), op)
        if op == "BackwardHookFunctionBackward" or key[0] is None:
            continue  # added by full backward hooks or by a hook's edit: not one of the model's ops
        ordinal = counts.get(key, 0)
        counts[key] = ordinal + 1
        for method, hook in wanted.get((*key, ordinal), ()):
            getattr(node, method)(hook)  # the graph keeps the node, and its hook, until backward frees it
            found.add((*key, ordinal))
    for scope, op, ordinal in wanted.keys() - found:
        message = f"node {scope}/{op}#{ordinal} is not in this forward's graph: its hook did not fire"
        warnings.warn(message, stacklevel=2)
