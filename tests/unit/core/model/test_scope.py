"""The scope tracker's wrapper of ``nn.Module.__call__``: installed with the first tracker, removed with
the last, safe under other wrappers, out of torch.compile's way, and what it scopes ops made in hooks to."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.graph.record import GraphRecorder, record_graph
from hookwidgets.core.model.scope import ScopeTracker

TORCH_CALL = nn.Module.__call__


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


def ids_of(model: nn.Module, x: torch.Tensor) -> list[str]:
    return [n["id"] for n in record_graph(model, x, saved_tensors=False).data()["nodes"]]


def test_the_wrapper_is_in_place_only_while_a_tracker_runs():
    model, x = mlp(), torch.randn(2, 4)
    ended: dict[str, list] = {"first": [], "second": []}
    first = ScopeTracker(model, lambda call, output, exc: ended["first"].append(output))
    second = ScopeTracker(model, lambda call, output, exc: ended["second"].append(output))
    first.start()
    wrapper = nn.Module.__call__
    assert wrapper is not TORCH_CALL
    second.start()
    assert nn.Module.__call__ is wrapper  # one wrapper for every tracker
    first.stop()
    assert nn.Module.__call__ is wrapper  # the second still follows
    model(x)
    assert [len(calls) for calls in ended.values()] == [0, 1]
    second.stop()
    assert nn.Module.__call__ is TORCH_CALL
    second.stop()  # idempotent
    model(x)
    assert nn.Module.__call__ is TORCH_CALL and [len(calls) for calls in ended.values()] == [0, 1]


def test_plain_forwards_leave_torchs_call_alone_and_recordings_restore_it():
    model = mlp()
    model(torch.randn(2, 4))
    assert nn.Module.__call__ is TORCH_CALL
    with GraphRecorder(model) as recorder:
        assert nn.Module.__call__ is not TORCH_CALL
        model(torch.randn(2, 4))
    assert nn.Module.__call__ is TORCH_CALL
    assert "0/AddmmBackward0#0" in recorder.result().ids()


def test_two_recorders_on_one_model_each_get_the_whole_graph():
    model = mlp()
    with GraphRecorder(model) as outer, GraphRecorder(model) as inner:
        model(torch.randn(2, 4))
    assert outer.result().ids() == inner.result().ids()
    assert {"0/AddmmBackward0#0", "1/ReluBackward0#0", "2/AddmmBackward0#0"} <= set(outer.result().ids())
    assert nn.Module.__call__ is TORCH_CALL


def test_a_wrapper_installed_over_ours_is_left_in_place_and_calls_pass_through(monkeypatch):
    """As torch.fx's tracer does: it wraps nn.Module.__call__ for a while and puts back what it found."""
    model = mlp()
    x = torch.randn(2, 4)
    expected = ids_of(model, x)
    calls = []

    def other_wrapper(module, *args, **kwargs):
        calls.append(type(module).__name__)
        return found(module, *args, **kwargs)

    tracker = ScopeTracker(model, lambda *a: None)
    tracker.start()
    found = nn.Module.__call__
    nn.Module.__call__ = other_wrapper
    try:
        tracker.stop()  # ours is inside the other wrapper: it stays, and passes calls through
        assert nn.Module.__call__ is other_wrapper
        out = model(x)
        assert calls == ["Sequential", "Linear", "ReLU", "Linear"] and out.shape == (2, 2)
        assert ids_of(model, x) == expected  # a recording meanwhile neither wraps twice nor recurses
        assert nn.Module.__call__ is other_wrapper
    finally:
        nn.Module.__call__ = found  # the other wrapper ends, as fx's tracer does
    tracker.start()
    tracker.stop()
    assert nn.Module.__call__ is TORCH_CALL
    assert ids_of(model, x) == expected and nn.Module.__call__ is TORCH_CALL


def test_nothing_is_logged_while_torch_compile_traces():
    model, x = mlp(), torch.randn(2, 4)
    ended = []
    tracker = ScopeTracker(model, lambda call, output, exc: ended.append(call))
    torch._dynamo.reset()  # traced from scratch, and no compiled code left for other tests
    tracker.start()
    try:
        compiled = torch.compile(model, backend="eager")
        compiled(x)  # traced, then run: the modules' calls are inlined in the compiled code
        compiled(x)
        assert ended == [] and tracker.call is None
        model(x)
        assert len(ended) == 1 and {"0", "1", "2"} <= set(ended[0].scopes)
    finally:
        tracker.stop()
        torch._dynamo.reset()


class Doubled(nn.Module):
    """fc's forward hook doubles its output (a node made in fc's call); the root adds one afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.handle = self.fc.register_forward_hook(lambda module, args, output: output * 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * 3


def test_a_node_made_in_a_modules_forward_hook_belongs_to_that_module():
    model = Doubled()
    nodes = record_graph(model, torch.randn(2, 3)).data()["nodes"]
    scopes = {n["id"]: n["module"] for n in nodes}
    assert scopes["fc/MulBackward0#0"] == "fc"  # the hook's doubling
    assert scopes["/MulBackward0#0"] == ""  # the root's * 3 keeps ordinal 0 in the root
    model.handle.remove()
    assert "fc/MulBackward0#0" not in {n["id"] for n in record_graph(model, torch.randn(2, 3)).data()["nodes"]}


def test_a_raising_submodule_pops_its_scope_for_the_parent_that_catches_it():
    class Flaky(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError(f"no: {(x * 5).sum().item()}")  # a node made before the raise

    class Catches(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.flaky = Flaky()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with contextlib.suppress(ValueError):
                self.flaky(x)
            return x.sin()

    x = torch.randn(2, requires_grad=True)
    nodes = record_graph(Catches(), x).data()["nodes"]
    assert [(n["op"], n["module"]) for n in nodes if n["op"] == "SinBackward0"] == [("SinBackward0", "")]
    assert nn.Module.__call__ is TORCH_CALL


def test_a_recording_whose_forward_raises_gives_torchs_call_back():
    class Raises(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("the model's own error")

    with Explorer(Raises()) as ex, pytest.warns(RuntimeWarning, match="forward of Raises raised RuntimeError"):
        assert ex.graph(torch.randn(2, requires_grad=True))["nodes"] == []
    assert nn.Module.__call__ is TORCH_CALL
