"""Faults: a user hook failing mid-backward, KeyboardInterrupt inside hooks, a model that raises in forward.

The promise: a failing user hook never corrupts a run (its error is recorded with its traceback, or
propagates with ``on_error="raise"``); an exception or KeyboardInterrupt inside a run removes the
explorer's temporary hooks at once while the user's attached hooks stay until ``detach()``/``close()``;
a forward that raises still gives the graph built before the failure, with the error.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer

from ._state import all_hook_state, assert_same_values, diff_keys, model_values


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        OrderedDict(fc1=nn.Linear(4, 8), bn=nn.BatchNorm1d(8), act=nn.ReLU(), fc2=nn.Linear(8, 8), out=nn.Linear(8, 3))
    )


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(5, 4, generator=torch.Generator().manual_seed(1))


def reference_grads(model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The parameters' gradients of one plain forward and backward, on a hook-free copy."""
    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    twin(x).sum().backward()
    return {name: p.grad for name, p in twin.named_parameters()}


def assert_grads(model: nn.Module, expected: dict[str, torch.Tensor]) -> None:
    for name, p in model.named_parameters():
        assert p.grad is not None, f".grad of {name} is missing"
        torch.testing.assert_close(p.grad, expected[name], msg=f".grad of {name} differs")


def broken(*args: Any) -> None:
    raise RuntimeError("disk full")


# Hooks that fire in the middle of the backward: after out's, before fc1's.
MID_BACKWARD = [
    ("fc2", "backward"),
    ("fc2", "backward_pre"),
    ("fc2", "grad"),
    ("fc2.weight", "grad"),
    ("fc2.weight", "post_accumulate"),
    ("", "global_backward"),
    ("", "global_backward_pre"),
    ("", "global_grad"),
    ("fc2/AddmmBackward0#0", "node_pre"),
    ("fc2/AddmmBackward0#0", "node"),
]


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # torch's, in the user's own backward
@pytest.mark.parametrize(("path", "kind"), MID_BACKWARD)
def test_a_user_hook_failing_mid_backward_is_recorded_and_the_backward_goes_on(x, path, kind):
    model = mlp()
    expected = reference_grads(model, x)
    before = all_hook_state(model)
    with Explorer(model, example_inputs=x) as ex:
        later = ex.attach("fc1", "grad")  # fires after the failing hook in the backward
        failing = ex.attach(path, kind, action=broken)
        attached = all_hook_state(model)
        with pytest.warns(UserWarning, match=rf"hook '{kind}' on '[^']*' failed: RuntimeError\('disk full'\)"):
            model(x).sum().backward()
        assert failing.fired >= 1 and failing.last_error.startswith("Traceback (most recent call last)")
        assert failing.last_error.endswith("RuntimeError: disk full") and "disk full" in repr(failing)
        assert later.fired == 1 and len(ex.captures["fc1"]["grad"]) == 1  # the run went on
        assert_grads(model, expected)  # a failing hook changes no gradient
        assert all_hook_state(model) == attached, diff_keys(attached, all_hook_state(model))
        assert [h for h in ex.hooks if not h.foreign] == [later, failing]
    assert all_hook_state(model) == before


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
@pytest.mark.parametrize(("path", "kind"), MID_BACKWARD)
def test_on_error_raise_propagates_a_mid_backward_failure_and_the_model_stays_usable(x, path, kind):
    model = mlp()
    expected = reference_grads(model, x)
    before = all_hook_state(model)
    with Explorer(model, example_inputs=x, on_error="raise") as ex:
        later = ex.attach("fc1", "grad")
        failing = ex.attach(path, kind, action=broken)
        attached = all_hook_state(model)
        with pytest.raises(RuntimeError, match="disk full"):
            model(x).sum().backward()
        assert failing.last_error.endswith("RuntimeError: disk full")
        assert all_hook_state(model) == attached, diff_keys(attached, all_hook_state(model))
        ex.detach(path, kind)
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()  # the next step works
        assert_grads(model, expected)
        assert later.fired >= 1 and later.last_error is None
    assert all_hook_state(model) == before


NODE = ("out/AddmmBackward0#0", "node")


class InterruptOnce:
    """A hook that raises KeyboardInterrupt on its first call (the user pressed Ctrl-C), then does nothing."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            raise KeyboardInterrupt


@pytest.mark.parametrize(("path", "kind"), [("fc2", "forward"), ("fc2", "backward"), ("fc2.weight", "grad")])
def test_keyboard_interrupt_in_a_hook_during_a_run_removes_temporary_hooks_at_once(x, path, kind):
    model = mlp()
    before = all_hook_state(model)
    ex = Explorer(model, example_inputs=x)
    interrupt = InterruptOnce()
    ex.attach(path, kind, action=interrupt)
    ex.attach("fc1", ["forward", "grad"])
    ex.attach("", "global_forward", action="stats")
    ex.attach(*NODE)
    attached, values = all_hook_state(model), model_values(model)
    with pytest.raises(KeyboardInterrupt):
        ex.run(x, target=0, record_graph=True)  # the graph recorder's hooks and modes are temporary
    # At once, before any close(): the recorder's global hooks, torch-function mode and saved-tensor
    # hooks are gone, and the run's state changes (eval mode, parked .grad, BatchNorm statistics) undone.
    assert all_hook_state(model) == attached, diff_keys(attached, all_hook_state(model))
    assert_same_values(values, model_values(model), "interrupted run")
    kept = [(h.target, h.kind) for h in ex.hooks]
    assert kept == [(path, kind), ("fc1", "forward"), ("fc1", "grad"), ("", "global_forward"), NODE]

    fired = {(h.target, h.kind): h.fired for h in ex.hooks}
    ex.run(x, target=0, record_graph=True)  # usable after, with the same hooks
    assert ex.graph().get("error") is None and "out/AddmmBackward0#0" in {n["id"] for n in ex.graph()["nodes"]}
    assert all(h.fired > fired[(h.target, h.kind)] for h in ex.hooks), ex.hooks
    assert_same_values(values, model_values(model), "run after the interrupt")
    ex.close()
    assert all_hook_state(model) == before


def test_keyboard_interrupt_in_the_users_own_backward_keeps_the_explorer_working(x):
    model = mlp()
    before = all_hook_state(model)
    with Explorer(model) as ex:
        ex.attach("fc2", "backward", action=InterruptOnce())
        ex.attach("fc1", ["forward", "grad"])
        attached = all_hook_state(model)
        with pytest.raises(KeyboardInterrupt):
            model(x).sum().backward()
        assert all_hook_state(model) == attached
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()
        assert ex.step == 2
        assert [r.step for r in ex.captures["fc1"]["forward"]] == [1, 2]
        assert [r.step for r in ex.captures["fc1"]["grad"]] == [2]  # step 1's backward never got there
    assert all_hook_state(model) == before


def test_keyboard_interrupt_during_the_probe_and_graph_recording_leaves_no_hook(x):
    model = mlp()
    interrupt = InterruptOnce()
    theirs = model.fc2.register_forward_hook(interrupt)  # someone else's hook: the user pressed Ctrl-C in it
    before = all_hook_state(model)
    with pytest.raises(KeyboardInterrupt):
        Explorer(model, example_inputs=x)  # the probe's temporary hooks
    assert all_hook_state(model) == before
    with Explorer(model) as ex:
        interrupt.calls = 0
        with pytest.raises(KeyboardInterrupt):
            ex.graph(x)  # the recorder's temporary hooks
        assert all_hook_state(model) == before
        assert {"fc2/AddmmBackward0#0", "out/AddmmBackward0#0"} <= {n["id"] for n in ex.graph(x)["nodes"]}
    assert all_hook_state(model) == before
    theirs.remove()


class BreaksInForward(nn.Module):
    """Two layers run, then the third gets a wrong shape: torch raises in the middle of the forward."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.act, self.fc2 = nn.Linear(4, 8), nn.ReLU(), nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def test_a_model_that_raises_in_forward_gives_a_partial_graph_with_the_error(x):
    model = BreaksInForward()
    before, values = all_hook_state(model), model_values(model)
    with pytest.warns(UserWarning, match="the probe run with example_inputs failed"):
        ex = Explorer(model, example_inputs=x)
    assert "mat1 and mat2 shapes cannot be multiplied" in ex.probe_error and "Tensor(5, 4)" in ex.probe_error
    assert all(child["shape"] is None for child in ex.tree["children"])

    graph = ex.graph()
    assert graph["error"].startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    ids = {n["id"] for n in graph["nodes"]}
    assert {"fc1/AddmmBackward0#0", "act/ReluBackward0#0", "fc1/AccumulateGrad#weight"} <= ids
    assert not any(i.startswith("fc2/") and "Accumulate" not in i for i in ids)  # fc2's op never ran

    ex.attach("fc1", ["forward", "grad"])
    ex.attach("fc2", "forward")
    attached = all_hook_state(model)
    with pytest.raises(RuntimeError, match="mat1 and mat2"):
        ex.run(x, target=0, record_graph=True)
    assert ex.graph()["error"].startswith("RuntimeError: mat1 and mat2")  # this run's partial graph
    assert all_hook_state(model) == attached
    assert_same_values(values, model_values(model), "failed run")
    assert len(ex.captures["fc1"]["forward"]) == 1  # recorded before the failure
    assert ex.hooks[2].last_error is None  # fc2's hook saw the failure (always_call) without failing itself
    ex.close()
    assert all_hook_state(model) == before
