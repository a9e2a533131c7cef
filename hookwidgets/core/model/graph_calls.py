"""Modules that no forward calls because a torch.fx GraphModule above them runs their ops itself.

A GraphModule's forward is its graph: it calls a submodule only through a ``call_module`` node. torch.export's
``ExportedProgram.module()`` keeps the original modules as holders of parameters that its graph reads with
``get_attr``, so their forwards, and the hooks on them, never run. Found from the graphs, for any GraphModule.
"""

from __future__ import annotations

from torch import fx, nn

from .modules import modules_of


def never_called(model: nn.Module) -> dict[str, str]:
    """``{path: path of the GraphModule whose graph calls neither it nor a module between them}`` for every module of
    ``model`` that no forward can call; ``{}`` for a model without GraphModules."""
    if not any(isinstance(m, fx.GraphModule) for m in modules_of(model)):
        return {}
    found: dict[str, str] = {}
    # (path, module, whether a forward can call it); GraphModules above it: (path, module paths its graph calls)
    todo: list[tuple[str, nn.Module, bool, tuple[tuple[str, frozenset[str]], ...]]] = [("", model, True, ())]
    while todo:
        path, module, called, graphs = todo.pop()
        if not called:
            found[path] = next(owner for owner, _ in reversed(graphs))
        if isinstance(module, fx.GraphModule) and called:
            calls = frozenset(n.target for n in module.graph.nodes if n.op == "call_module")
            graphs = (*graphs, (path, calls))
        for name, child in module.named_children():
            child_path = f"{path}.{name}" if path else name
            # a plain module's forward may call its children; a GraphModule's only what its graph calls, at any depth
            by_parent = called and not isinstance(module, fx.GraphModule)
            by_graph = any(_relative(child_path, owner) in calls for owner, calls in graphs)
            todo.append((child_path, child, by_parent or by_graph, graphs))
    return found


def _relative(path: str, owner: str) -> str:
    """``path`` as seen from the module at ``owner`` (a call_module target)."""
    return path[len(owner) + 1 :] if owner else path
