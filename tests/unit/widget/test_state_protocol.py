"""State that stays and says when it lags: edits named on their hooks, an attribution kept across selections, the
Training panel's step, a full capture budget, and a closed explorer's placeholder."""

from __future__ import annotations

import gc

import torch
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.widget import live

from ._messages import browser_sends, browser_sets


def test_each_edit_is_named_on_its_hook_as_explorer_edits_names_it(explorer):
    view = explorer.view
    browser_sends(view, type="attach", path="features.conv", kind="forward")  # a capture: no edit
    browser_sends(view, type="attach", path="features.act", kind="forward", edit=["scale", 2.0])
    explorer.attach("head.fc", "forward", edit=[("zero",)])
    labels = {(hook["path"], hook["kind"]): hook["edit_label"] for hook in view.hooks}
    assert labels == {
        ("features.conv", "forward"): "",
        ("features.act", "forward"): "scale 2.0 at forward on 'features.act'",
        ("head.fc", "forward"): "zero at forward on 'head.fc'",
    }
    assert [label for label in labels.values() if label] == explorer.edits  # one home for the words, in attach order
    explorer.detach("features.act", "forward")
    assert [hook["edit_label"] for hook in view.hooks if hook["edit_label"]] == ["zero at forward on 'head.fc'"]


def test_an_attribution_stays_when_the_selection_changes(explorer):
    view = explorer.view
    browser_sets(view, selected="features.conv")
    browser_sends(view, type="attribute", layer="features.conv", method="gradcam", target="top")
    cam = dict(view.attribution)
    assert cam["method"] == "gradcam" and cam["png"] and cam["of_layer"] is True  # a CAM is of its layer
    assert cam["caption"].endswith("at features.conv")
    browser_sets(view, selected="head.fc")
    assert view.attribution == cam  # kept, with its layer: the page names the selection beside it
    browser_sets(view, selected="head.fc.weight")  # a parameter too
    assert view.attribution == cam

    browser_sends(view, type="attribute", layer="head.fc", method="saliency", target="top")
    assert view.attribution["of_layer"] is False  # a pixel method explains the input whatever is selected
    saliency = dict(view.attribution)
    browser_sets(view, selected="features.conv")
    assert view.attribution == saliency


def test_the_memory_meter_says_when_the_budget_is_full_and_evicting(cnn, image):
    cnn.eval()
    with HookExplorer(cnn, example_inputs=image, memory_budget=4 * 2 * 4 * 8 * 8 * 2) as ex:  # two conv outputs
        view = ex.view
        ex.attach("features.conv", "forward")
        ex.run(image)
        ex.run(image)
        assert view.memory["evicting"] is False and view.memory["evicted"] == 0  # full to the byte, nothing lost
        ex.run(image)
        assert view.memory["evicting"] is True and view.memory["evicted"] == 1
        ex.captures.clear()
        ex.run(image)  # room again: the evictions stay counted, the store is no longer evicting
        assert view.memory["evicting"] is False and view.memory["evicted"] == 1


def test_the_training_panel_carries_the_step_it_is_current_at(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(torch.randn(5, 4)).sum().backward()
        opt.step()

    with HookExplorer(model) as ex:
        view = ex.view
        ex.attach("0", "forward", action="stats")  # the loop's forwards reach the explorer's step
        ex.watch_optimizer(opt)
        assert view.training["step"] == 0
        step()
        clock[0] += live.PLOT_INTERVAL_S + live.FIRST_PLOT_COST_S / live.MAX_SHARE  # the images' turn
        step()
        assert view.training["step"] == view.status["step"] == ex.step == 2  # drawn now: current
        clock[0] += live.PUSH_INTERVAL_S * 2  # counts are pushed again, the images wait their turn
        step()
        assert view.status["step"] == ex.step == 3 and view.training["step"] == 2  # behind: the page says so
        clock[0] += live.PLOT_INTERVAL_S * 2
        model(torch.randn(5, 4))  # a forward without an optimizer step: nothing new to draw, current again
        assert view.training["step"] == view.status["step"] == 4


def test_close_leaves_a_placeholder_saying_the_hooks_are_gone(cnn, image):
    ex = HookExplorer(cnn, example_inputs=image)
    view = ex.view
    ex.attach("features.conv", "forward")
    ex.run(image)
    browser_sets(view, selected="features.conv")
    assert view.plots["items"] and view.closed == ""
    ex.close()
    assert view.closed == "closed: hooks removed, model as found"
    assert view.comm is not None  # the widget stays, showing the line: a closed comm would make it vanish
    assert view.tree == {} and view.hooks == [] and view.plots == {"path": None, "items": []}  # nothing kept
    ex.close()  # twice: still the same line
    assert view.closed == "closed: hooks removed, model as found"


def test_a_dropped_explorer_leaves_the_same_placeholder(cnn, image):
    ex = HookExplorer(cnn, example_inputs=image)
    view = ex.view
    ex.attach("features.conv", "forward")
    del ex
    gc.collect()
    assert view.closed == "closed: hooks removed, model as found" and view.hooks == []
    assert not cnn.features.conv._forward_hooks
