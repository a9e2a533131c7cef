"""The view says what is really going on: edits changed in place, a running cell, the step each view shows, and
the module a Run failed in."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer

from ._messages import browser_sends, in_cell


def _hook(explorer: HookExplorer, target: str, kind: str):
    return next(h for h in explorer.hooks if h.target == target and h.kind == kind)


def test_reattach_gives_the_targets_hooks_the_new_action_and_edit_in_place(explorer, cnn, image):
    view = explorer.view
    browser_sends(view, type="attach", path="features.conv", kind="forward", action="capture", edit=None)
    browser_sends(view, type="attach", path="features.conv", kind="grad", action="capture", edit=None)
    browser_sends(view, type="run")
    kept = len(explorer.captures["features.conv"]["forward"])
    answer = browser_sends(view, type="reattach", path="features.conv", action="stats", edit=["scale", 0.0])
    assert answer["ok"], answer
    forward, grad = _hook(explorer, "features.conv", "forward"), _hook(explorer, "features.conv", "grad")
    assert (forward.action, forward.edit) == ("stats", (("scale", 0.0),))
    assert (grad.action, grad.edit) == ("stats", (("scale", 0.0),))
    assert [h["edit"] for h in view.hooks if h["path"] == "features.conv"] == [[["scale", 0.0]]] * 2
    assert len(explorer.captures["features.conv"]["forward"]) == kept  # the records are kept
    out = cnn(image)  # the new edit acts: the conv's output is zeroed, so the logits are the head's bias alone
    torch.testing.assert_close(out, cnn.head.fc.bias.expand_as(out))


def test_a_refused_reattach_leaves_the_hooks_as_they_were_and_says_why(explorer):
    view = explorer.view
    browser_sends(view, type="attach", path="features.conv", kind="forward", action="capture", edit=["scale", 2.0])
    answer = browser_sends(view, type="reattach", path="features.conv", action="capture", edit=["ablate", [9], 1])
    assert not answer["ok"] and "9" in answer["error"]
    hook = _hook(explorer, "features.conv", "forward")
    assert (hook.action, hook.edit) == ("capture", (("scale", 2.0),))


def test_reattach_leaves_global_and_callable_hooks_alone(explorer):
    view = explorer.view
    explorer.attach("", "global_forward", action="stats")
    explorer.attach("", "forward", action=lambda module, args, output: None)
    explorer.attach("", "forward_pre", action="capture")
    assert browser_sends(view, type="reattach", path="", action="print", edit=None)["ok"]
    actions = {h.kind: h.action for h in explorer.hooks}
    assert actions["global_forward"] == "stats" and callable(actions["forward"]) and actions["forward_pre"] == "print"


def test_the_status_says_when_a_cell_runs(ipython, cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        seen = []
        view.observe(lambda change: seen.append(change["new"]["cell"]), names="status")
        in_cell(ipython, lambda: None)
        assert seen == [True, False] and view.status["cell"] is False


def test_the_status_carries_the_live_step_which_lagging_views_compare_with(ipython, cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        ex.attach("features.conv", "forward")
        steps = []
        view.observe(lambda change: steps.append((change["new"]["step"], change["new"]["cell"])), names="status")
        in_cell(ipython, lambda: [cnn(image) for _ in range(3)])
        assert steps[0] == (0, True)  # the cell starts
        assert steps[1] == (1, True)  # the first live push
        assert steps[-1] == (3, False) and view.status["step"] == ex.step == 3


class Broken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ok = nn.Linear(4, 4)
        self.bad = nn.Sequential(nn.Linear(4, 3), nn.Linear(4, 2))  # 3 features into a Linear that takes 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bad(self.ok(x))


def test_a_failed_run_names_and_marks_the_innermost_failing_module_until_dismissed():
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="the probe run with example_inputs failed"):
        ex = HookExplorer(Broken(), example_inputs=torch.randn(2, 4))
    with ex:
        view = ex.view
        answer = browser_sends(view, type="run", mode="forward")
        assert not answer["ok"]
        assert view.status["failed"] == "bad.1"
        assert "failed in module 'bad.1' (Linear)" in view.error
        browser_sends(view, type="dismiss_error")
        assert view.status["failed"] is None and view.error == ""


def test_an_error_outside_the_model_marks_no_module(explorer):
    view = explorer.view
    explorer.example_inputs = None
    assert not browser_sends(view, type="run")["ok"]
    assert view.status["failed"] is None
