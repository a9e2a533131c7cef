"""Drive the explorer's view through the same comm messages the browser sends."""

import json
import warnings

import pytest
import torch
from ipywidgets.widgets.widget import _remove_buffers
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.core.model.tree import SCRIPTED_ROOT
from tests.conftest import hook_state

from ._display import shown
from ._messages import browser_sends, browser_sets, summary_rows


def test_view_starts_with_the_tree_and_the_offered_hook_kinds(explorer, shell):
    view = explorer.view
    assert view.tree["cls"] == "SmallCNN"
    assert view.tree["children"][0]["children"][0]["shape"] == [2, 4, 8, 8]
    kinds = [row["kind"] for row in view.hook_kinds]
    assert kinds[:5] == ["forward_pre", "forward", "backward_pre", "backward", "grad"]
    assert {"global_forward", "post_accumulate", "node_pre", "node"} <= set(kinds)
    assert view.selection["path"] == "" and view.selection["family"] == "module"
    assert "global_forward" in view.selection["kinds"]  # the model itself takes the global kinds
    assert view.hooks == [] and view.error == "" and view.status["state"] == "idle"
    data = shown(explorer)  # what IPython shows for ``ex`` at a cell's end: the widget, then its static snapshot
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == view.model_id
    assert data["text/plain"] == repr(explorer)  # a console without widgets shows the explorer, not the view
    assert data["text/plain"].startswith("<HookExplorer of SmallCNN")


def test_click_toggle_run_shows_the_capture_as_png_bytes(explorer, cnn):
    view = explorer.view
    browser_sets(view, selected="features.conv")
    browser_sends(view, type="attach", path="features.conv", kind="forward")
    browser_sends(view, type="attach", path="features.conv", kind="grad")
    assert [(h["path"], h["kind"], h["fired"]) for h in view.hooks] == [
        ("features.conv", "forward", 0),
        ("features.conv", "grad", 0),
    ]
    assert len(cnn.features.conv._forward_hooks) == 2

    browser_sends(view, type="run")

    assert view.status["state"] == "idle" and "step 1" in view.status["message"]
    (record,) = explorer.captures["features.conv"]["forward"]
    assert record.tensor.shape == (2, 4, 8, 8)
    assert [h["fired"] for h in view.hooks] == [1, 1]
    assert view.plots["path"] == "features.conv"
    items = {item["kind"]: item for item in view.plots["items"]}
    assert set(items) == {"forward", "grad"}
    assert items["forward"]["shape"] == [2, 4, 8, 8] and items["forward"]["step"] == 1
    assert items["forward"]["png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert all(p.grad is None for p in cnn.parameters())  # the Run button left .grad as found

    # PNG bytes travel as binary buffers, never inside the JSON state
    state, paths, buffers = _remove_buffers(view.get_state())
    json.dumps(state)
    assert ["plots", "items", 0, "png"] in paths
    assert bytes(buffers[paths.index(["plots", "items", 0, "png"])]) == view.plots["items"][0]["png"]


def test_selecting_another_module_shows_its_own_captures(explorer):
    view = explorer.view
    explorer.attach("features.conv", "forward")
    explorer.attach("head.fc", "forward")
    browser_sets(view, selected="features.conv")
    browser_sends(view, type="run")
    assert view.plots["items"][0]["shape"] == [2, 4, 8, 8]
    browser_sets(view, selected="head.fc")
    assert view.plots["path"] == "head.fc" and view.plots["items"][0]["shape"] == [2, 5]
    browser_sets(view, selected="features")
    assert view.plots == {"path": "features", "items": []}


def test_detach_message_removes_the_hook(explorer, cnn):
    before = hook_state(cnn)
    view = explorer.view
    browser_sends(view, type="attach", path="features.bn", kind="forward_pre")
    browser_sends(view, type="detach", path="features.bn", kind="forward_pre")
    assert view.hooks == [] and explorer.hooks == []
    assert hook_state(cnn) == before


def test_unknown_path_from_the_browser_shows_the_error_in_the_widget(explorer):
    view = explorer.view
    browser_sends(view, type="attach", path="features.cnv", kind="forward")
    assert "did you mean 'features.conv'" in view.error
    assert view.status["state"] == "error"
    browser_sends(view, type="dismiss_error")
    assert view.error == "" and view.status["state"] == "idle"


def test_wrong_input_shape_shows_the_error_and_the_kernel_stays_usable(cnn):
    with pytest.warns(UserWarning, match="probe run"):
        ex = HookExplorer(cnn, example_inputs=torch.randn(1, 5, 8, 8))
    view = ex.view
    assert "expected input[1, 5, 8, 8] to have 3 channels" in view.error
    assert "inputs were Tensor(1, 5, 8, 8)" in view.error
    ex.attach("features.conv", "forward")
    browser_sends(view, type="dismiss_error")
    browser_sends(view, type="run")
    assert view.status["state"] == "error" and "RuntimeError" in view.status["message"]
    assert "to have 3 channels" in view.error
    assert ex.hooks[0].fired == 1  # always_call: the failed forward still reports
    assert ex.run(torch.randn(1, 3, 8, 8)).shape == (1, 5)  # the explorer still works
    ex.close()


def test_run_without_example_inputs_explains_itself(cnn):
    ex = HookExplorer(cnn)
    browser_sends(ex.view, type="run")
    assert "HookExplorer(model, example_inputs=x)" in ex.view.error
    ex.close()


def test_unknown_message_kind_is_reported(explorer):
    browser_sends(explorer.view, type="explode")
    assert "unknown message type 'explode'" in explorer.view.error


def test_python_side_attach_updates_the_view_and_close_restores_the_model(cnn, image):
    before = hook_state(cnn)
    ex = HookExplorer(cnn, example_inputs=image)
    view = ex.view
    ex.attach("features.act", ["forward", "grad"])
    assert [(h["path"], h["kind"]) for h in view.hooks] == [("features.act", "forward"), ("features.act", "grad")]
    ex.close()
    assert hook_state(cnn) == before
    assert view.closed == "closed: hooks removed, model as found"  # the widget says so in place of its panels


def test_digits_quickstart_model_round_trip():
    from hookwidgets.examples import digit_image, pretrained_digits_cnn

    model = pretrained_digits_cnn()
    x, label = digit_image(0)
    with HookExplorer(model, example_inputs=x) as ex:
        conv1 = ex.tree["children"][0]["children"][0]
        assert (conv1["path"], conv1["shape"]) == ("features.conv1", [1, 16, 32, 32])
        browser_sets(ex.view, selected="features.conv1")
        browser_sends(ex.view, type="attach", path="features.conv1", kind="forward")
        browser_sends(ex.view, type="run")
        assert ex.captures["features.conv1"]["forward"][0].tensor.shape == (1, 16, 32, 32)
        assert ex.view.status["top"][0][0] == label  # the trained model predicts the digit


def test_backward_kinds_from_the_inspector_draw_gradient_maps(explorer):
    view = explorer.view
    browser_sets(view, selected="features.act")
    browser_sends(view, type="attach", path="features.act", kind="backward_pre")
    browser_sends(view, type="run")
    (item,) = view.plots["items"]
    assert item["kind"] == "backward_pre" and item["shape"] == [2, 4, 8, 8]
    assert "grad_output.0" in item["title"]
    record = explorer.captures["features.act"]["backward_pre"][0]
    assert record.tensor.abs().sum() > 0


def scripted(module: nn.Module) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated, yet models still ship it
        return torch.jit.script(module)


def test_script_modules_are_named_in_the_widget_and_attaching_to_one_says_why():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Sequential(scripted(nn.Linear(4, 4)), nn.ReLU()), nn.Linear(4, 3))
    ex = HookExplorer(model, example_inputs=torch.randn(2, 4))
    view = ex.view
    note = "torch.jit.script modules take no hooks: '0.0' (and its submodules) show no shape and fire no hooks"
    assert view.error == note
    assert sorted(c for c, _ in view.status["top"]) == [0, 1, 2]  # the root still takes the probe's hook
    browser_sends(view, type="attach", path="0.0", kind="forward")
    assert "module '0.0' is a torch.jit.script module" in view.error and view.status["state"] == "error"
    assert view.hooks == []
    ex.close()
    without_inputs = HookExplorer(model)
    assert without_inputs.view.error == note  # named without a run
    without_inputs.close()


def test_a_scripted_model_opens_in_the_widget_and_says_it_takes_no_hooks():
    model = scripted(nn.Sequential(nn.Linear(4, 3)))
    ex = HookExplorer(model, example_inputs=torch.randn(2, 4))
    view = ex.view
    assert view.error == SCRIPTED_ROOT and view.status["top"] == []
    assert [c["path"] for c in view.tree["children"]] == ["0"] and view.tree["shape"] is None
    assert view.selection["kinds"] == [] and view.selection["problem"] == SCRIPTED_ROOT
    ex.close()


class Log(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


def test_nan_and_inf_reach_the_page_as_the_strings_json_allows():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), Log(), nn.Linear(4, 3))  # log of negatives: every class score is NaN
    with HookExplorer(model, example_inputs=torch.randn(2, 4)) as ex:
        view = ex.view
        assert sorted(view.status["top"]) == [[0, "nan"], [1, "nan"], [2, "nan"]]
        ex.attach("", ["global_forward"], action="stats")
        ex.attach("0", "forward", edit=("clip", float("inf")))  # valid: clamps nothing (the page cannot send inf)
        assert view.hooks[-1]["edit"] == [["clip", "inf"]]
        browser_sends(view, type="run", mode="forward")
        assert sorted(view.status["top"]) == [[0, "nan"], [1, "nan"], [2, "nan"]]
        assert summary_rows(view.summary)[-1]["act_mean"] == "nan"
        state, _, _ = _remove_buffers(view.get_state())
        json.dumps(state, allow_nan=False)  # what jupyter_client warns about: a bare NaN is no JSON
        model(torch.randn(2, 4))  # the user's own forward: a live push lists the hooks too
        assert view.status["state"] == "live" and view.hooks[-1]["edit"] == [["clip", "inf"]]
        state, _, _ = _remove_buffers(view.get_state())
        json.dumps(state, allow_nan=False)


def test_a_module_inside_a_script_module_offers_no_kinds_and_says_why():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), scripted(nn.Sequential(nn.Linear(8, 8))), nn.Linear(8, 3))
    with HookExplorer(model, example_inputs=torch.randn(2, 4)) as ex:
        view = ex.view
        assert ex.unwatched == ["1"]
        browser_sets(view, selected="1.0")
        assert view.selection["family"] == "module" and view.selection["kinds"] == []
        assert view.selection["problem"].startswith(
            "module '1.0' is inside the torch.jit.script module '1': ScriptModules take no hooks"
        )
        assert [p["path"] for p in view.selection["params"]] == ["1.0.weight", "1.0.bias"]  # chips still offered
        browser_sets(view, selected="1")
        assert view.selection["kinds"] == []
        assert view.selection["problem"].startswith("module '1' is a torch.jit.script module: ScriptModules take")
        browser_sets(view, selected="1.0.weight")
        assert view.selection["kinds"] == ["grad", "post_accumulate"] and view.selection["problem"] == ""
        browser_sends(view, type="attach", path="1.0.weight", kind="grad")
        browser_sends(view, type="run", target=0)
        assert view.error == "" and view.hooks[0]["fired"] == 1
        assert ex.captures["1.0.weight"]["grad"][-1].tensors["grad"].shape == (8, 8)
        browser_sets(view, selected="2")
        assert "forward" in view.selection["kinds"] and view.selection["problem"] == ""
