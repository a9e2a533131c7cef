"""Without a private torch API it relies on, the explorer still works: the feature it served turns off and says why."""

from __future__ import annotations

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from hookwidgets.core import Explorer, _torch
from tests.conftest import hook_state
from tests.unit.core._without_apis import life

ALREADY_OFF = list(_torch.off().values())
"""What the torch tested with turns off as it is: nothing from torch 2.6 on (torch 2.3 lacks a few APIs)."""


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
    assert backward_calls(model, x) == ([0, 1], [1, 0], ALREADY_OFF)  # each backward firing named after its call
    monkeypatch.setattr(_torch, "HAS_CURRENT_NODE", False)
    forward, backward, diagnostics = backward_calls(model, x)
    assert forward == [0, 1] and len(backward) == 2 and backward[0] < backward[1]  # recorded, counted as they fire
    assert diagnostics == [_torch.CURRENT_NODE_OFF, *ALREADY_OFF]
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
            assert theirs == [("", "global_forward")] and ex.diagnostics == ALREADY_OFF
        monkeypatch.setattr(_torch, "HAS_GLOBAL_HOOKS", False)
        with Explorer(model) as ex:
            ex.attach("0", "forward")
            model(x)
            assert [(h.target, h.kind, h.foreign) for h in ex.hooks] == [("0", "forward", False)]
            assert len(ex.captures["0"]["forward"]) == 1
            assert set(ex.diagnostics) == {_torch.GLOBAL_HOOKS_OFF, *ALREADY_OFF}
            assert "not listed on ex.hooks" in _torch.GLOBAL_HOOKS_OFF
    finally:
        handle.remove()


def test_without_raw_saved_tensors_the_graph_shows_none_saved(monkeypatch):
    model, x = nn.Sequential(nn.Linear(4, 4), nn.Tanh()), torch.randn(2, 4)
    with Explorer(model) as ex:
        shown = any(node["saved"] for node in ex.graph(x)["nodes"]) and bool(ex.saved_memory())
        assert shown is _torch.HAS_SAVED_TENSORS  # torch 2.3 cannot read them
    monkeypatch.setattr(_torch, "HAS_SAVED_TENSORS", False)
    with Explorer(model) as ex:
        graph = ex.graph(x)
        assert [node["op"] for node in graph["nodes"]]  # the graph itself is recorded
        assert not any(node["saved"] for node in graph["nodes"]) and ex.saved_memory() == {}
        assert set(ex.diagnostics) == {_torch.SAVED_TENSORS_OFF, *ALREADY_OFF}
        assert "_raw_saved_" in _torch.SAVED_TENSORS_OFF


FACTS_SAID = {
    "HAS_CURRENT_NODE": "CURRENT_NODE_OFF",
    "HAS_NODE_NUMBERS": "NODE_NUMBERS_OFF",
    "HAS_SAVED_TENSORS": "SAVED_TENSORS_OFF",
    "HAS_GLOBAL_HOOKS": "GLOBAL_HOOKS_OFF",
    "HAS_FULL_BACKWARD_FLAG": "FULL_BACKWARD_FLAG_OFF",
    "HAS_COMPILER_STANCE": "COMPILER_STANCE_OFF",
    "HAS_SAVED_TENSOR_HOOKS": "SAVED_TENSOR_HOOKS_OFF",
    "HAS_VIEW_TEST": "VIEW_TEST_OFF",
}
"""Each fact whose absence turns a feature off -> the reason ``Explorer.diagnostics`` then gives."""
FACTS_WITH_THE_SAME_RESULTS = {"HAS_FOREACH_COPY"}
"""Facts whose fallback gives the same results (only slower): nothing is off, nothing is said."""


def test_every_fact_either_says_why_when_off_or_falls_back_to_the_same_results():
    facts = {name for name in vars(_torch) if name.startswith("HAS_")}
    assert facts == set(FACTS_SAID) | FACTS_WITH_THE_SAME_RESULTS
    off = {getattr(_torch, FACTS_SAID[fact]) for fact in FACTS_SAID if not getattr(_torch, fact)}
    assert set(_torch.off().values()) == off  # empty on a torch with every API (2.6 and newer)


@pytest.mark.parametrize("fact", sorted(FACTS_SAID))
def test_with_a_fact_off_the_explorer_attaches_runs_captures_and_closes_as_found_and_says_why(fact, monkeypatch):
    with_every_api = life()
    monkeypatch.setattr(_torch, fact, False)
    result = life()
    why = getattr(_torch, FACTS_SAID[fact])
    assert set(result["diagnostics"]) == {*with_every_api["diagnostics"], why} and "this torch" in why
    assert result["errors"] == [] and result["captured"] == with_every_api["captured"]
    assert all(count == 1 for count in result["captured"].values())
    assert result["hook_dicts_as_found"] and result["buffers_as_found"]
    # the mark torch leaves on a module with a full backward hook is what cannot be put back without its name
    assert result["flags_as_found"] is (fact != "HAS_FULL_BACKWARD_FLAG")
    if fact == "HAS_NODE_NUMBERS":  # the graph is that feature: it says why it is off
        assert result["nodes"] == [] and result["graph_error"] == why
    else:
        assert result["nodes"] == with_every_api["nodes"] and result["graph_error"] is None


class Counted(nn.Module):
    """Two Linear layers in a forward of its own (``module.compile()`` of a Sequential compiles nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's warnings about compiling with hooks
def test_without_the_compilers_stance_a_compiled_model_is_explored_through_its_compiled_code(monkeypatch):
    monkeypatch.delattr(torch.compiler, "set_stance", raising=False)  # as on torch 2.3 to 2.5
    monkeypatch.setattr(_torch, "HAS_COMPILER_STANCE", False)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch.manual_seed(0)
    net, x = Counted(), torch.randn(2, 4)
    expected, expected_fc1 = net(x), net.fc1(x)
    compiled = torch.compile(net, backend="eager")
    before = hook_state(compiled)
    try:
        with Explorer(compiled, x) as ex:  # the shape probe runs the model
            assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # through its compiled code
            infos = ex.attach("_orig_mod.fc1", ["forward", "grad"])
            torch.testing.assert_close(ex.run(x, target=0), expected)
            assert [info.fired for info in infos] == [1, 1] and all(info.last_error is None for info in infos)
            torch.testing.assert_close(ex.captures["_orig_mod.fc1"]["forward"][-1].tensor, expected_fc1)
            assert set(ex.diagnostics) == {_torch.COMPILER_STANCE_OFF, *ALREADY_OFF}
            assert "torch.compiler.set_stance (torch 2.6)" in _torch.COMPILER_STANCE_OFF
        assert hook_state(compiled) == before
    finally:
        torch._dynamo.reset()


class TwiceCheckpointed(nn.Module):
    """``lin`` called twice a step, each call in a non-reentrant checkpoint segment of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(2):
            x = checkpoint(self.lin, x, use_reentrant=False)
        return x


def recomputed_calls(model: nn.Module, x: torch.Tensor) -> tuple[list[tuple[int, bool]], list[str]]:
    """(call, recompute) of each forward firing of ``lin`` over one step, and the explorer's diagnostics."""
    with Explorer(model) as ex, set_checkpoint_early_stop(False):
        ex.attach("lin", "forward")
        model(x).sum().backward()
        return [(r.call, r.recompute) for r in ex.captures["lin"]["forward"]], ex.diagnostics


def test_without_the_saved_tensor_hooks_reader_a_checkpoints_recompute_is_numbered_call_0(monkeypatch):
    torch.manual_seed(0)
    model, x = TwiceCheckpointed(), torch.randn(2, 4, requires_grad=True)
    calls, diagnostics = recomputed_calls(model, x)
    if _torch.HAS_SAVED_TENSOR_HOOKS:  # torch 2.3 has not: there the recompute is numbered as below already
        assert calls == [(0, False), (1, False), (1, True), (0, True)]  # the second call is recomputed first
    monkeypatch.setattr(_torch, "HAS_SAVED_TENSOR_HOOKS", False)
    calls, diagnostics = recomputed_calls(model, x)
    assert calls == [(0, False), (1, False), (0, True), (0, True)]  # still recomputes, no longer told apart
    assert set(diagnostics) == {_torch.SAVED_TENSOR_HOOKS_OFF, *ALREADY_OFF}
    why = _torch.SAVED_TENSOR_HOOKS_OFF
    assert "non-reentrant torch.utils.checkpoint" in why and "_top_saved_tensors_default_hooks" in why
