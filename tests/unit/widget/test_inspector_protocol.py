"""The inspector, run bar, memory meter and live updates, driven through the browser's messages."""

from __future__ import annotations

import collections
import dataclasses
import gc
import warnings
import weakref
from typing import Any

import pytest
import torch

from hookwidgets import HookExplorer, plots
from hookwidgets.widget import live
from tests.conftest import SharedBlock

from ._messages import browser_sends, browser_sets, in_cell, summary_rows


def test_selection_says_what_the_target_is_and_which_kinds_fit(explorer):
    view = explorer.view
    browser_sets(view, selected="head.fc")
    assert view.selection["family"] == "module"
    assert view.selection["kinds"][:5] == ["forward_pre", "forward", "backward_pre", "backward", "grad"]
    assert "global_forward" not in view.selection["kinds"]
    assert [p["path"] for p in view.selection["params"]] == ["head.fc.weight", "head.fc.bias"]

    browser_sets(view, selected="head.fc.weight")
    assert view.selection["family"] == "param"
    assert view.selection["kinds"] == ["grad", "post_accumulate"]
    assert ["Shape", "5×16"] in view.selection["details"]

    node = next(n["id"] for n in explorer.graph()["nodes"] if n["op"] == "AddmmBackward0")
    browser_sets(view, selected=node)
    assert view.selection["family"] == "node" and view.selection["kinds"] == ["node_pre", "node"]
    assert ["Op", "AddmmBackward0"] in view.selection["details"]

    browser_sets(view, selected="head.fcc")
    assert view.selection["family"] == "none" and "did you mean 'head.fc'" in view.selection["problem"]


def test_attach_with_an_action_and_an_edit_from_the_pickers(explorer, cnn, image):
    view = explorer.view
    plain = cnn(image)
    browser_sets(view, selected="head.fc")
    browser_sends(view, type="attach", path="head.fc", kind="forward", action="stats", edit=["scale", 2.0])
    (hook,) = view.hooks
    assert (hook["action"], hook["edit"]) == ("stats", [["scale", 2.0]])
    assert "def " in view.selection["code"] and "head.fc" in view.selection["code"]
    edited = explorer.run(image)
    assert torch.allclose(edited, 2 * plain.detach())
    record = explorer.captures["head.fc"]["forward"][-1]
    assert record.tensors == {} and record.stats["max"] == pytest.approx(float(edited.max()))

    browser_sends(view, type="attach", path="head.fc", kind="grad", edit=["scale", "big"])
    assert "scale" in view.error and view.status["state"] == "error"
    assert [h["kind"] for h in view.hooks] == ["forward"]


def test_run_bar_modes_and_targets(explorer):
    view = explorer.view
    explorer.attach("features.act", ["forward", "grad"])
    browser_sends(view, type="run", mode="forward")
    assert "forward" in view.status["message"] and "backward" not in view.status["message"]
    assert "grad" not in explorer.captures["features.act"]
    top = view.status["top"]
    assert len(top) == 5 and sum(p for _, p in top) <= 1.0001 and top[0][1] >= top[1][1]

    browser_sends(view, type="run", mode="backward", target=3)
    assert "class 3" in view.status["message"]
    assert len(explorer.captures["features.act"]["grad"]) == 1

    browser_sends(view, type="run", mode="backward", target=99)
    assert view.status["state"] == "error" and "99" in view.error


def test_run_bar_train_mode_runs_in_training_mode_and_restores_eval(explorer, cnn):
    view = explorer.view
    explorer.attach("features.act", "forward")
    explorer.attach("features.drop", "forward")

    def outputs() -> tuple[torch.Tensor, torch.Tensor]:
        return tuple(explorer.captures[f"features.{name}"]["forward"][-1].tensors["output"] for name in ("act", "drop"))

    browser_sends(view, type="run", mode="forward", train=True)
    assert "training mode" in view.status["message"] and view.status["state"] == "idle"
    act, drop = outputs()
    kept = drop != 0
    assert torch.equal(drop[kept], 2 * act[kept]) and (act[~kept] != 0).any()  # Dropout(0.5) was active
    assert not cnn.training and not cnn.features.drop.training  # left in the mode it was found in

    browser_sends(view, type="run", mode="forward")
    act, drop = outputs()
    assert "training mode" not in view.status["message"] and torch.equal(drop, act)  # eval: Dropout passes through

    browser_sends(view, type="run", mode="forward", train="yes")
    assert view.status["state"] == "error" and "train must be true or false" in view.error


def test_the_target_picker_offers_the_top_classes_before_the_first_run(cnn, image):
    cnn.eval()
    with torch.no_grad():
        expected = cnn(image)[0].softmax(-1).topk(5)
    forward_hooks = dict(cnn._forward_hooks)
    with HookExplorer(cnn, example_inputs=image) as ex:
        top = ex.view.status["top"]  # from the probe run the constructor makes anyway
        assert [c for c, _ in top] == expected.indices.tolist()
        assert [p for _, p in top] == pytest.approx(expected.values.tolist(), abs=1e-4)
        assert ex.step == 0 and len(ex.captures) == 0  # no run of its own for it
        assert dict(cnn._forward_hooks) == forward_hooks  # the probe's root hook is gone
    with HookExplorer(cnn) as ex:
        assert ex.view.status["top"] == []  # without example inputs: "each item's top class" only


def test_the_step_slider_shows_an_older_capture(explorer, image):
    view = explorer.view
    explorer.attach("head.fc", "forward")
    browser_sets(view, selected="head.fc")
    for scale in (1.0, 2.0, 3.0):
        explorer.run(image * scale)
    (item,) = view.plots["items"]
    assert item["positions"] == [[1, 0], [2, 0], [3, 0]] and (item["step"], item["call"]) == (3, 0)
    browser_sends(view, type="plot_step", kind="forward", step=2)
    (older,) = view.plots["items"]
    assert older["step"] == 2 and older["png"] != item["png"]
    browser_sends(view, type="plot_step", kind="forward", step=None)
    assert view.plots["items"][0]["step"] == 3


def test_the_slider_reaches_every_call_of_a_module_run_twice_a_step():
    model = SharedBlock()
    with HookExplorer(model, example_inputs=torch.randn(2, 4)) as ex:
        view = ex.view
        ex.attach("lin", "forward")
        browser_sets(view, selected="lin")
        ex.run()
        ex.run()
        (item,) = view.plots["items"]
        assert item["positions"] == [[1, 0], [1, 1], [2, 0], [2, 1]]
        assert (item["step"], item["call"]) == (2, 1)  # the newest: the second call of step 2
        first_call = ex.captures["lin"]["forward"][-2]
        assert (first_call.step, first_call.call) == (2, 0)

        browser_sends(view, type="plot_step", kind="forward", step=2, call=0)
        (shown,) = view.plots["items"]
        assert (shown["step"], shown["call"]) == (2, 0) and shown["png"] != item["png"]
        browser_sends(view, type="plot_step", kind="forward", step=1)  # no call: the newest of that step
        assert (view.plots["items"][0]["step"], view.plots["items"][0]["call"]) == (1, 1)


def test_the_inspector_shows_the_original_firing_of_a_call_a_checkpoint_recomputed():
    class Checkpointed(torch.nn.Module):  # lin called twice a step, each call recomputed in the backward
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(2):
                x = torch.utils.checkpoint.checkpoint(self.lin, x, use_reentrant=False)
            return x

    x = torch.randn(2, 4, requires_grad=True)
    with HookExplorer(Checkpointed()) as ex:
        view = ex.view
        ex.attach("lin", "forward")
        with torch.utils.checkpoint.set_checkpoint_early_stop(False):  # each recompute runs lin to its end
            for _ in range(2):
                ex.model(x).sum().backward()
        browser_sets(view, selected="lin")
        records = ex.captures["lin"]["forward"]
        assert [(r.step, r.call, r.recompute) for r in records][-4:] == [
            (2, 0, False),
            (2, 1, False),
            (2, 1, True),
            (2, 0, True),
        ]
        (item,) = view.plots["items"]
        assert item["positions"] == [[1, 0], [1, 1], [2, 0], [2, 1]]
        assert (item["step"], item["call"]) == (2, 1) and "recomputed" not in item["title"]
        browser_sends(view, type="plot_step", kind="forward", step=1)  # no call: the newest of that step
        assert (view.plots["items"][0]["step"], view.plots["items"][0]["call"]) == (1, 1)
        browser_sends(view, type="plot_step", kind="forward", step=2, call=0)
        assert "recomputed" not in view.plots["items"][0]["title"]


def test_memory_meter_follows_the_store_and_counts_evictions(cnn, image):
    with HookExplorer(cnn, example_inputs=image, memory_budget=3000) as ex:
        view = ex.view
        ex.attach("features.conv", "forward")  # 2×4×8×8 float32 = 2048 bytes a capture
        ex.run()
        assert view.memory == {
            "bytes": 2048,
            "budget": 3000,
            "records": 1,
            "evicted": 0,
            "evicting": False,
            "short_steps": [],
        }
        ex.run()
        assert view.memory["evicted"] == 1 and view.memory["records"] == 1
        assert view.memory["short_steps"] == []  # the previous step's record went: the budget holds a step


def test_memory_meter_and_hook_say_when_the_budget_holds_less_than_one_step(cnn, image):
    with HookExplorer(cnn, example_inputs=image, memory_budget=3000) as ex:
        view = ex.view
        ex.attach("features.conv", "forward")  # 2048 bytes a capture
        ex.attach("features.act", "forward")  # 2048 more, in the same step
        browser_sends(view, type="run", mode="forward", target="top", train=False)
        note = (
            "the budget (2.9 KiB) holds less than one step: step 1 lost 1 'forward' record (call 0) before it "
            "ended; raise memory_budget"
        )
        assert view.memory["short_steps"] == [{"path": "features.conv", "kind": "forward", "note": note}]
        conv = next(h for h in view.hooks if h["path"] == "features.conv")
        assert conv["note"] == note and conv["fired"] == 1
        browser_sets(view, selected="features.conv")
        assert view.plots["items"] == []  # nothing left to draw, and no error box
        assert view.error == ""


def test_foreign_hooks_reach_the_view_flagged(cnn, image):
    handle = cnn.head.fc.register_forward_hook(lambda m, a, o: None)
    try:
        with HookExplorer(cnn, example_inputs=image) as ex:
            (hook,) = ex.view.hooks
            assert hook["foreign"] is True and (hook["path"], hook["kind"]) == ("head.fc", "forward")
    finally:
        handle.remove()


def test_live_updates_are_throttled_while_the_users_loop_runs(ipython, explorer, cnn, image, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    view = explorer.view
    explorer.attach("features.conv", "forward")
    pushes = []
    view.observe(lambda change: pushes.append(change["new"]), names="status")

    def loop() -> None:  # the user's own loop: no explorer run
        assert len(pushes) == 1 and pushes[0]["cell"] is True  # the cell's start: the page's clicks wait
        pushes.clear()
        for _ in range(10):  # all at one instant
            cnn(image)
        assert len(pushes) == 1 and pushes[0]["state"] == "live" and "step 1" in pushes[0]["message"]
        assert "clicks here apply when the cell finishes" in pushes[0]["message"]
        assert view.hooks[0]["fired"] == 1  # what the first push carried
        clock[0] += 2 * live.PUSH_INTERVAL_S
        cnn(image)
        assert len(pushes) == 2 and "step 11" in pushes[1]["message"] and view.hooks[0]["fired"] == 11

    in_cell(ipython, loop)
    assert view.status["state"] == "idle" and "step 11" in view.status["message"]  # the cell's end: one full update


def test_a_live_push_inside_the_forward_keeps_no_step_alive(explorer, cnn, image, monkeypatch):
    # matplotlib's text parser leaves reference cycles that hold tracebacks; one made by a push, which runs in the
    # forward hook, held the frames below it, and so the step's output and graph, until the collector ran
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    payload = live.hooks_payload

    def leaves_a_cycle(hooks):
        try:
            raise ValueError("a parser's failed alternative")
        except ValueError as exc:
            kept = exc  # noqa: F841 -- this frame holds the exception, whose traceback holds this frame
        return payload(hooks)

    monkeypatch.setattr(live, "hooks_payload", leaves_a_cycle)
    view = explorer.view
    explorer.attach("features.conv", "forward")
    outputs = []
    gc.disable()  # freed when the loop drops it, not whenever a collection happens to run
    try:
        for _ in range(3):
            clock[0] += 1.0  # every forward pushes
            outputs.append(weakref.ref(cnn(image)))
            assert view.status["state"] == "live"
    finally:
        gc.enable()
    assert [ref() for ref in outputs] == [None, None, None]


def test_live_images_wait_until_their_cost_fits_the_loops_share(explorer, cnn, image, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    real_figure = plots.feature_map_figure

    def slow_figure(*args: Any, **kwargs: Any) -> Any:  # a drawing that takes 0.3 s
        clock[0] += 0.3
        return real_figure(*args, **kwargs)

    monkeypatch.setattr(plots, "feature_map_figure", slow_figure)  # the widget imports it when it draws
    view = explorer.view
    explorer.attach("features.conv", "forward")
    browser_sets(view, selected="features.conv")
    browser_sends(view, type="run", mode="forward")  # step 1, drawn in 0.3 s: what the next drawing is expected to take
    assert view.plots["items"][0]["step"] == 1
    start = clock[0]
    drawn = []
    view.observe(lambda change: drawn.append(change["new"]), names="plots")
    cnn(image)  # the loop starts: counts are pushed, the images on screen stay those of the cell's start
    assert view.status["state"] == "live" and drawn == []
    clock[0] += live.PLOT_INTERVAL_S + 0.5  # their turn, but 0.3 s is more than 3% of 2.5 s of loop
    cnn(image)
    assert drawn == [] and view.hooks[0]["fired"] == 3
    clock[0] = start + 0.3 / live.MAX_SHARE + 0.01  # 10 s into the loop: 0.3 s is 3% of it
    cnn(image)
    assert len(drawn) == 1 and drawn[0]["path"] == "features.conv"
    assert drawn[0]["items"][0]["step"] == 4  # the newest capture


def test_a_drawing_that_fails_during_the_users_loop_is_said_in_the_errors_panel(explorer, cnn, image, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])

    def broken_figure(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the figure broke")

    view = explorer.view
    explorer.attach("features.conv", "forward")
    browser_sets(view, selected="features.conv")
    monkeypatch.setattr(plots, "feature_map_figure", broken_figure)  # the widget imports it when it draws
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cnn(image)  # the loop starts
        clock[0] += live.PLOT_INTERVAL_S + live.FIRST_PLOT_COST_S / live.MAX_SHARE  # the images' turn
        cnn(image)  # the user's loop goes on: the error is shown, not raised
    assert [str(w.message) for w in caught] == []
    assert "could not draw the captures of 'features.conv': RuntimeError: the figure broke" in view.error
    assert view.status["state"] == "live" and view.hooks[0]["fired"] == 2


def test_the_summary_follows_the_users_loop_on_the_images_schedule(explorer, cnn, image, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    view = explorer.view
    explorer.attach("", "global_forward", action="stats")
    cnn(image)  # the loop starts: no image yet
    assert view.summary["rows"] == []
    clock[0] += live.PLOT_INTERVAL_S + 0.1  # the images' turn, but not yet 3% of the loop for a first drawing
    cnn(image)
    assert view.summary["rows"] == []
    clock[0] += live.FIRST_PLOT_COST_S / live.MAX_SHARE  # its expected cost is 3% of the loop by now
    cnn(image)
    summary = view.summary
    assert summary["step"] == 3 and [r["path"] for r in summary_rows(summary)][:2] == ["", "features"]
    assert summary["heatmap"][:8] == b"\x89PNG\r\n\x1a\n"
    assert view.status["state"] == "live"


def test_runs_from_the_view_do_not_push_live_updates(explorer):
    view = explorer.view
    explorer.attach("features.conv", "forward")
    states = []
    view.observe(lambda change: states.append(change["new"]["state"]), names="status")
    browser_sends(view, type="run")
    assert states == ["busy", "idle"]


def test_close_stops_live_updates(ipython, cnn, image):
    followed = ipython.events.callbacks["post_run_cell"]
    before = list(followed)
    ex = HookExplorer(cnn, example_inputs=image)
    view = ex.view
    assert len(followed) == len(before) + 1  # the view follows the shell's cells
    ex.attach("features.conv", "forward")
    statuses = []
    view.observe(lambda change: statuses.append(change["new"]), names="status")
    ex.close()
    assert followed == before and view.closed == "closed: hooks removed, model as found"
    in_cell(ipython, lambda: cnn(image))  # the model runs on, hook-free: nothing reaches the closed view
    assert statuses == []


def test_a_dropped_explorer_stops_following_the_shells_cells(ipython, cnn, image):
    followed = ipython.events.callbacks["post_run_cell"]
    before = list(followed)
    ex = HookExplorer(cnn, example_inputs=image)
    view = ex.view
    ex.attach("features.conv", "forward")
    del ex
    gc.collect()
    assert followed == before and view.closed == "closed: hooks removed, model as found"


def test_what_the_engine_did_on_its_own_reaches_the_view():
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2))
    with HookExplorer(model) as ex:
        view = ex.view
        assert view.diagnostics == []
        ex.attach("0", "backward")
        ex.attach("2", "forward")  # a hook that stays, so the user's forwards are followed
        with pytest.warns(UserWarning, match="collides with the in-place module '1'"), pytest.raises(RuntimeError):
            model(torch.randn(3, 4))  # the user's own forward: torch raises, the explorer detaches and explains
        model(torch.randn(3, 4))
        assert len(view.diagnostics) == 1 and "Attach 'grad' instead" in view.diagnostics[0]
        assert [h["kind"] for h in view.hooks] == ["forward"]


def test_a_null_run_target_backpropagates_from_each_items_top_class(explorer):
    view = explorer.view
    browser_sends(view, type="attach", path="head.fc", kind="grad")
    browser_sends(view, type="run", mode="backward", target=None)  # the page's Number() gave NaN: JSON sends null
    assert view.error == "" and view.status["message"] == "step 1: forward, then backward from output · top class"
    grad = explorer.captures["head.fc"]["grad"][-1].tensors["grad_output"]
    top = explorer.run().argmax(1)  # the top class of each item gets the gradient 1, the others 0
    assert torch.equal(grad, torch.nn.functional.one_hot(top, 5).float())


@pytest.mark.parametrize("target", ["3x", 1.5, True, [1, 2]])
def test_a_run_target_that_is_no_class_is_reported_and_nothing_runs(explorer, target):
    view = explorer.view
    browser_sends(view, type="attach", path="head.fc", kind="forward")
    browser_sends(view, type="run", mode="backward", target=target)
    expected = f'the widget sent the run target {target!r}; expected "top", "loss" or a class or token id such as 3'
    assert view.error == f"ValueError: {expected}"
    assert view.status["state"] == "error" and explorer.step == 0 and view.hooks[0]["fired"] == 0


@dataclasses.dataclass
class Out:
    features: torch.Tensor
    logits: torch.Tensor


Pair = collections.namedtuple("Pair", "features logits")


class Wrapped(torch.nn.Module):
    """Conv then a linear head whose scores come back wrapped: in a dict, a dataclass or a namedtuple."""

    def __init__(self, wrap: str) -> None:
        super().__init__()
        self.wrap = wrap
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> Any:
        features = self.conv(x)
        logits = self.fc(features.mean((2, 3)))
        if self.wrap == "dict":
            return {"logits": logits}
        if self.wrap == "features only":
            return {"features": features, "n": 3}
        return (Out if self.wrap == "dataclass" else Pair)(features, logits)


@pytest.mark.parametrize("wrap", ["dict", "dataclass", "namedtuple"])
def test_run_and_the_class_picker_find_the_scores_of_a_wrapped_output(image, wrap):
    torch.manual_seed(0)
    model = Wrapped(wrap)
    with torch.no_grad():
        expected = model.fc(model.conv(image).mean((2, 3)))[0].softmax(-1).topk(5)
    with HookExplorer(model, example_inputs=image) as ex:
        view = ex.view
        assert [c for c, _ in view.status["top"]] == expected.indices.tolist()  # from the probe
        assert [p for _, p in view.status["top"]] == pytest.approx(expected.values.tolist(), abs=1e-4)
        browser_sends(view, type="attach", path="fc", kind="grad")
        browser_sends(view, type="run", mode="backward", target=3)
        assert view.status["message"] == "step 1: forward, then backward from output.logits · class 3"
        assert view.error == ""
        grad = ex.captures["fc"]["grad"][-1].tensors["grad_output"]
        assert torch.equal(grad, torch.tensor([[0.0, 0, 0, 1, 0]] * 2))
        assert [c for c, _ in view.status["top"]] == expected.indices.tolist()  # and from the Run


def test_a_wrapped_output_without_class_scores_runs_forward_only_and_a_class_names_what_it_holds(image):
    with HookExplorer(Wrapped("features only"), example_inputs=image) as ex:
        view = ex.view
        assert view.status["top"] == [] and view.status["output"]["kind"] == "none"
        ex.attach("conv", ["forward", "grad"])
        browser_sends(view, type="run")  # the default Run: nothing to backpropagate from, so a forward only
        assert view.error == "" and view.status["state"] == "idle"
        assert view.status["message"].startswith("step 1: forward only: the output holds no class or token scores")
        assert len(ex.captures["conv"]["forward"]) == 1 and "grad" not in ex.captures["conv"]
        browser_sends(view, type="run", target=3)  # a class asked for: the error says what the output holds
        assert view.error.splitlines()[0] == (
            "ValueError: a class target needs scores of shape (batch, classes), or (batch, positions, vocabulary) "
            "for a sequence, got dict {features: Tensor(2, 4, 6, 6), n: int}; pass target=callable(output) "
            "returning a scalar instead"
        )


def test_selecting_a_module_again_redraws_only_what_changed(explorer, cnn, image, monkeypatch):

    drawn: list[str] = []

    def counted(name: str):
        real = getattr(plots, name)  # the widget imports each from hookwidgets.plots when it draws
        monkeypatch.setattr(plots, name, lambda *args, **kwargs: drawn.append(name) or real(*args, **kwargs))

    for name in ("feature_map_figure", "gradient_map_figure", "stats_figure"):
        counted(name)
    view = explorer.view
    explorer.attach("features.conv", ["forward", "grad"])
    explorer.attach("features.act", "forward", action="stats")
    explorer.run(image, target=0)
    browser_sets(view, selected="features.conv")
    first = [item["png"] for item in view.plots["items"]]
    assert sorted(drawn) == ["feature_map_figure", "gradient_map_figure"]
    browser_sets(view, selected="features.act")
    browser_sets(view, selected="features.conv")  # back again: the same records, the same images
    assert sorted(drawn) == ["feature_map_figure", "gradient_map_figure", "stats_figure"]
    assert [item["png"] for item in view.plots["items"]] == first
    explorer.run(image, target=0)  # a new step: new records, new images
    browser_sets(view, selected="features.act")
    browser_sets(view, selected="features.conv")
    assert drawn.count("feature_map_figure") == 2 and drawn.count("stats_figure") == 2
    with torch.no_grad():  # a capture changed in place after the fact is redrawn with its STALE title
        explorer.captures["features.conv"]["forward"][-1].tensor.mul_(2)
    browser_sets(view, selected="features.act")
    browser_sets(view, selected="features.conv")
    assert drawn.count("feature_map_figure") == 3 and "STALE" in view.plots["items"][0]["title"]


def _held_images() -> int:
    """Images the widget holds for records, found as the (weak reference, PNG bytes) pairs it keeps them in."""
    gc.collect()
    return sum(
        1
        for o in gc.get_objects()
        if type(o) is tuple
        and len(o) == 2
        and isinstance(o[0], weakref.ref)
        and isinstance(o[1], bytes)
        and o[1].startswith(b"\x89PNG")
    )


def test_images_of_records_the_store_let_go_of_are_not_held(cnn, image):
    # A training loop's live redraws draw each step's new records; the store evicts the old ones, and their
    # images can never be shown again: the widget must not keep up to its cache's size of them.
    with HookExplorer(cnn, example_inputs=image, memory_budget=2**20) as ex:
        ex.captures.max_records = 4  # each step's records push the last step's out
        view = ex.view
        ex.attach("features.conv", ["forward", "grad"])
        browser_sets(view, selected="features.conv")
        for _ in range(3):
            browser_sends(view, type="run")
        held = _held_images()
        for _ in range(20):
            browser_sends(view, type="run")  # each Run redraws the selection: two new images
        assert len(view.plots["items"]) == 2
        assert _held_images() <= held


def test_an_error_stays_in_the_errors_panel_while_the_status_follows_the_next_action(explorer):
    view = explorer.view
    browser_sends(view, type="attach", path="head.fc", kind="grad", edit=["scale", "big"])
    assert view.status["state"] == "error" and "scale" in view.error
    browser_sends(view, type="attach", path="head.fc", kind="forward")  # the next action succeeds
    assert view.status["state"] == "idle" and view.status["message"] == ""
    assert "scale" in view.error  # still there to read until dismissed
    browser_sends(view, type="dismiss_error")
    assert view.error == ""


def test_a_lazy_model_shows_unknown_counts_until_run_materializes_it():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.LazyConv2d(4, 3), torch.nn.Flatten(), torch.nn.LazyLinear(2))
    ex = HookExplorer(model, example_inputs=torch.randn(2, 3, 6, 6))
    view = ex.view
    assert [(c["cls"], c["trainable"], c["shape"]) for c in view.tree["children"]] == [
        ("LazyConv2d", None, [2, 4, 4, 4]),
        ("Flatten", 0, [2, 64]),
        ("LazyLinear", None, [2, 2]),
    ]
    browser_sets(view, selected="2")
    assert [(p["path"], p["shape"]) for p in view.selection["params"]] == [("2.weight", None), ("2.bias", None)]
    browser_sets(view, selected="2.weight")
    assert view.selection["kinds"] == [] and "'2.weight' is not materialized yet" in view.selection["problem"]
    assert ["Shape", "not materialized yet (a lazy module's parameter: the model's first forward gives its shape)"] in (
        view.selection["details"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said in the page, not in the kernel's log
        browser_sends(view, type="run", mode="forward")
    assert view.status["state"] == "idle"
    assert view.error.startswith("run() materialized the lazy modules '0' (LazyConv2d, now Conv2d), '2' (LazyLinear")
    assert [(c["cls"], c["trainable"]) for c in view.tree["children"]] == [
        ("Conv2d", 112),
        ("Flatten", 0),
        ("Linear", 130),
    ]
    assert view.selection["kinds"] == ["grad", "post_accumulate"] and ["Shape", "2×64"] in view.selection["details"]
    ex.close()


def test_record_graph_on_a_lazy_model_says_in_the_page_that_it_materialized_it():
    model = torch.nn.Sequential(torch.nn.LazyLinear(3), torch.nn.ReLU())
    with HookExplorer(model, example_inputs=torch.randn(2, 4)) as ex:
        assert ex.view.tree["children"][0]["trainable"] is None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            browser_sends(ex.view, type="graph")
        assert ex.view.status["state"] == "idle" and "0/AddmmBackward0#0" in ex.view.graph["autograd"]["ids"]
        assert ex.view.error.startswith("graph() materialized the lazy modules '0' (LazyLinear, now Linear)")
        assert ex.view.tree["children"][0]["trainable"] == 15


def test_a_capture_changed_through_data_is_shown_stale(explorer, image):
    view = explorer.view
    explorer.attach("features.conv", "forward")
    kept = []
    handle = explorer.model.features.conv.register_forward_hook(lambda m, a, o: kept.append(o))
    try:
        explorer.run(image)
    finally:
        handle.remove()
    browser_sets(view, selected="features.conv")
    (item,) = view.plots["items"]
    assert not item["stale"] and item["verified"] and "STALE" not in item["title"]
    kept[0].data.mul_(2)  # the model's own tensor, through .data: no version bump
    browser_sets(view, selected="features.act")
    browser_sets(view, selected="features.conv")
    (item,) = view.plots["items"]
    assert item["stale"] and item["title"].endswith(" · STALE: changed after capture")


class _Spectrum(torch.nn.Module):
    """A complex output whose real part is zero."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.complex(torch.zeros_like(x), x)


class _Nothing(torch.nn.Module):
    """An output of 0 elements."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:0]


class _Odd(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.spectrum, self.nothing = _Spectrum(), _Nothing()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.spectrum(x), self.nothing(x)


def test_complex_and_empty_captures_are_drawn_as_magnitude_and_as_empty_not_as_an_error(monkeypatch):

    titles: list[str] = []

    def titled(name: str):
        real = getattr(plots, name)

        def draw(*args, **kwargs):
            fig = real(*args, **kwargs)
            titles.append(fig.axes[0].get_title().replace("\n", " "))
            return fig

        return draw

    for name in ("feature_map_figure", "histogram_figure"):
        monkeypatch.setattr(plots, name, titled(name))
    with HookExplorer(_Odd(), example_inputs=torch.randn(1, 2, 3, 3)) as ex:
        view = ex.view
        ex.attach("spectrum", "forward")
        ex.attach("nothing", "forward")
        browser_sends(view, type="run", mode="forward", target="top", train=False)
        browser_sets(view, selected="spectrum")
        assert titles[-1] == "spectrum · output (magnitude)"  # not its real part, all zeros
        browser_sends(view, type="plot_view", kind="forward", view="histogram")
        assert titles[-1] == "spectrum · output (magnitude)"
        browser_sets(view, selected="nothing")
        (item,) = view.plots["items"]
        assert item["shape"] == [0, 2, 3, 3] and item["png"][:4] == b"\x89PNG"
        assert titles[-1] == "nothing · output [empty (0 elements): shape (0, 2, 3, 3)]"
        browser_sends(view, type="plot_view", kind="forward", view="histogram")
        assert titles[-1] == "nothing · output [empty (0 elements): shape (0, 2, 3, 3)]"
        assert view.error == ""
