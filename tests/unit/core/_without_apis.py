"""One explorer's whole life on a torch without the APIs named on the command line, printed as JSON.

Run in a fresh process by ``test_torch_absent.py``: each API is deleted from torch before hookwidgets is imported,
so hookwidgets finds this torch as it would find an older one.
"""

from __future__ import annotations

import functools
import json
import sys

import torch
import torch.nn.modules.module as module_globals
from torch import nn

from tests.conftest import GLOBAL_DICTS, hook_state

FLAG = "_is_full_backward_hook"


def owner(dotted: str) -> tuple[object, str]:
    """``(module, name)`` of ``torch.a.b.name``."""
    owner_path, _, name = dotted.rpartition(".")
    return functools.reduce(getattr, owner_path.split(".")[1:], torch), name


def present(dotted: str) -> bool:
    return hasattr(*owner(dotted))


def hook_dicts(model: nn.Module) -> list:
    """Every module's hook dicts and torch's process-wide ones, keys and hooks in order."""
    modules = [entry for key, entry in hook_state(model).items() if key[1] != FLAG]
    return modules + [list(getattr(module_globals, n, {}).items()) for n in GLOBAL_DICTS]  # a torch may lack one


def flags(model: nn.Module) -> list:
    """The full-backward mark of every module and torch's process-wide one."""
    return [module.__dict__.get(FLAG) for module in model.modules()] + [module_globals._global_is_full_backward_hook]


def life() -> dict:
    """Attach every module kind and a parameter hook, run forward and backward, record a graph, close."""
    from hookwidgets.core import Explorer

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    dicts, marks = hook_dicts(model), flags(model)
    buffers = [b.clone() for b in model.buffers()]
    with Explorer(model, x) as ex:
        ex.attach("0", ["forward_pre", "forward", "backward_pre", "backward", "grad"])
        ex.attach("3.weight", "post_accumulate")
        ex.run(x, target=0, train=True)  # BatchNorm updates its statistics: the run puts them back
        try:
            nodes, graph_error = [node["id"] for node in ex.graph()["nodes"]], None
        except RuntimeError as exc:  # the graph is a feature that may be off
            nodes, graph_error = [], str(exc)
        captured = {f"{h.target}:{h.kind}": len(ex.captures[h.target][h.kind]) for h in ex.hooks}
        errors = [h.last_error for h in ex.hooks if h.last_error]
        diagnostics = ex.diagnostics
    return {
        "captured": captured,
        "errors": errors,
        "nodes": nodes,
        "graph_error": graph_error,
        "diagnostics": diagnostics,
        "hook_dicts_as_found": hook_dicts(model) == dicts,
        "flags_as_found": flags(model) == marks,
        "buffers_as_found": all(torch.equal(b, kept) for b, kept in zip(model.buffers(), buffers, strict=True)),
    }


if __name__ == "__main__":
    assert "hookwidgets" not in sys.modules  # its probes must first see torch without the APIs
    apis = sys.argv[1:]
    removed = [api for api in apis if present(api)]  # an older torch may lack some already
    for api in removed:
        delattr(*owner(api))
    result = life()
    result["removed"] = removed
    result["still_absent"] = not any(present(api) for api in apis)
    print(json.dumps(result))
