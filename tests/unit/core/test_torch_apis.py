"""Without a private torch API it relies on, the explorer still works: the feature it served turns off and says why."""

from __future__ import annotations

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn

from hookwidgets.core import _torch
from hookwidgets.core.explorer import Explorer


class Twice(nn.Module):
    """Calls ``lin`` twice per forward: its backward firings come in the reverse order of its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.relu(self.lin(x)))


def backward_calls(model: nn.Module, x: torch.Tensor) -> tuple[list[int], list[int], list[str]]:
    """Forward and backward call numbers of ``lin`` over one step, and the explorer's diagnostics."""
    with Explorer(model) as ex:
        ex.attach("lin", ["forward", "backward"])
        model(x).sum().backward()
        forward = [r.call for r in ex.captures["lin"]["forward"]]
        backward = [r.call for r in ex.captures["lin"]["backward"]]
        assert ex.step == 1 and all(info.last_error is None for info in ex.hooks)
        return forward, backward, ex.diagnostics


def test_without_the_running_node_backward_firings_are_numbered_in_firing_order(monkeypatch):
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    assert backward_calls(model, x) == ([0, 1], [1, 0], [])  # each backward firing named after its forward call
    monkeypatch.setattr(_torch, "HAS_CURRENT_NODE", False)
    forward, backward, diagnostics = backward_calls(model, x)
    assert forward == [0, 1] and len(backward) == 2 and backward[0] < backward[1]  # recorded, counted as they fire
    assert diagnostics == [_torch.CURRENT_NODE_OFF]
    assert "_current_autograd_node" in diagnostics[0] and "firing order" in diagnostics[0]


def test_without_torchs_global_hook_dicts_others_global_hooks_go_unlisted(monkeypatch):
    def their_global_hook(module, args, output):
        return None

    model, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU()), torch.randn(2, 4)
    handle = module_globals.register_module_forward_hook(their_global_hook)
    try:
        with Explorer(model) as ex:
            ex.attach("0", "forward")
            theirs = [(h.target, h.kind) for h in ex.hooks if h.foreign]
            assert theirs == [("", "global_forward")] and ex.diagnostics == []
        monkeypatch.setattr(_torch, "HAS_GLOBAL_HOOKS", False)
        with Explorer(model) as ex:
            ex.attach("0", "forward")
            model(x)
            assert [(h.target, h.kind, h.foreign) for h in ex.hooks] == [("0", "forward", False)]
            assert len(ex.captures["0"]["forward"]) == 1
            assert ex.diagnostics == [_torch.GLOBAL_HOOKS_OFF]
            assert "not listed on ex.hooks" in ex.diagnostics[0]
    finally:
        handle.remove()


def test_without_raw_saved_tensors_the_graph_shows_none_saved(monkeypatch):
    model, x = nn.Sequential(nn.Linear(4, 4), nn.Tanh()), torch.randn(2, 4)
    with Explorer(model) as ex:
        assert any(node["saved"] for node in ex.graph(x)["nodes"]) and ex.saved_memory()
    monkeypatch.setattr(_torch, "HAS_SAVED_TENSORS", False)
    with Explorer(model) as ex:
        graph = ex.graph(x)
        assert [node["op"] for node in graph["nodes"]]  # the graph itself is recorded
        assert not any(node["saved"] for node in graph["nodes"]) and ex.saved_memory() == {}
        assert ex.diagnostics == [_torch.SAVED_TENSORS_OFF]
        assert "_raw_saved_" in ex.diagnostics[0]


@pytest.mark.parametrize("fact", ["HAS_CURRENT_NODE", "HAS_NODE_NUMBERS", "HAS_SAVED_TENSORS"])
def test_each_fact_holds_on_the_torch_tested_with_and_says_why_when_off(fact, monkeypatch):
    model = nn.Linear(4, 4)
    with Explorer(model) as ex:
        assert getattr(_torch, fact) is True and ex.diagnostics == []
    monkeypatch.setattr(_torch, fact, False)
    with Explorer(model) as ex:
        (why,) = ex.diagnostics
    assert "this torch" in why
