"""``%load_ext hookwidgets`` in a real IPython shell: the magic, the display printer, and unloading."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from ipywidgets import widget_serialization
from torch import nn
from traitlets.config import Config

import hookwidgets
from hookwidgets import HookExplorer
from hookwidgets.core import Explorer
from hookwidgets.ipython import parse_line, split_line
from tests.conftest import hook_state
from tests.reliability._state import all_hook_state, diff_keys
from tests.unit.widget._messages import browser_sends

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def ip(tmp_path, monkeypatch) -> InteractiveShell:
    """A fresh IPython shell (history in memory, its dir in tmp) with the extension loaded; unloaded after."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    result = shell.run_cell("%load_ext hookwidgets")
    assert result.success, result.error_in_exec
    yield shell
    shell.run_cell("%unload_ext hookwidgets")
    InteractiveShell.clear_instance()


@pytest.fixture
def user_model(ip, cnn, image) -> nn.Module:
    ip.user_ns.update(model=cnn, x=image, not_a_model=[1, 2])
    return cnn


def _run(ip: InteractiveShell, code: str):
    result = ip.run_cell(code)
    assert result.success, result.error_before_exec or result.error_in_exec
    return result.result


def shown_in(ip: InteractiveShell, monkeypatch) -> list[dict[str, Any]]:
    """The outputs' data the shell shows from now on, in order: displays (the explorer's widget, then its snapshot)
    and cells' results."""
    shown: list[dict[str, Any]] = []
    monkeypatch.setattr(ip.display_pub, "publish", lambda data, **kwargs: shown.append(data))
    monkeypatch.setattr(ip.displayhook, "write_format_data", lambda data, metadata=None: shown.append(data))
    return shown


def last_widget(shown: list[dict[str, Any]]) -> dict[str, Any]:
    """The last widget output shown; the static snapshot (text/html alone) comes right after it."""
    at = max(i for i, data in enumerate(shown) if WIDGET_MIME in data)
    assert "text/html" not in shown[at] and set(shown[at + 1]) == {"text/html"}
    assert 'class="hw-static"' in shown[at + 1]["text/html"]
    return shown[at]


def widget_shown(bundle: dict[str, Any]) -> Any:
    """The open widget a display bundle shows, found by its model id as the page finds it."""
    widget = widget_serialization["from_json"](f"IPY_MODEL_{bundle[WIDGET_MIME]['model_id']}", None)
    assert not isinstance(widget, str), f"no open widget is {widget}"
    return widget


def tree_of(module: nn.Module) -> dict[str, Any]:
    """The module tree an explorer of ``module`` shows."""
    with Explorer(module) as ex:
        return ex.tree


def _usage_error(ip: InteractiveShell, line: str) -> str:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("hookexplorer", line)
    return str(info.value)


def test_line_splits_on_top_level_spaces_only():
    assert split_line("model  x[:, 0] (a, b) 'c d'") == ["model", "x[:, 0]", "(a, b)", "'c d'"]
    assert split_line("nets['a b'] {1: 2}") == ["nets['a b']", "{1: 2}"]
    assert parse_line("model x --name ex") == ("model", "x", "ex")
    assert parse_line("-n ex model x[0] + 1") == ("model", "x[0] + 1", "ex")
    assert parse_line("model") == ("model", None, None)


def test_magic_shows_an_explorer_of_the_model_with_its_inputs_and_binds_the_name(ip, user_model, image, monkeypatch):
    shown = shown_in(ip, monkeypatch)
    _run(ip, "%hookexplorer model x --name ex")
    ex = ip.user_ns["ex"]
    assert isinstance(ex, HookExplorer)
    assert ex.model is user_model and ex.example_inputs is image
    assert ex.tree["children"][0]["children"][0]["shape"] == [2, 4, 8, 8]  # the probe ran with x
    # Displayed once, as the widget, then its static snapshot for pages where widgets do not run
    assert [d.get(WIDGET_MIME, {}).get("model_id") for d in shown] == [ex.view.model_id, None]
    assert last_widget(shown) is shown[0]
    _run(ip, "ex.attach('features.conv', 'forward'); ex.run(x)")
    assert len(ex.captures["features.conv"]["forward"]) == 1


def test_rerunning_the_magic_replaces_its_explorer_instead_of_stacking_hooks(ip, user_model):
    _run(ip, "%hookexplorer model x --name ex")
    first = ip.user_ns["ex"]
    first.attach("features.conv", "forward")
    _run(ip, "%hookexplorer model x --name ex")
    second = ip.user_ns["ex"]
    assert second is not first
    assert repr(first).endswith("closed>")
    assert len(user_model.features.conv._forward_hooks) == 0


def test_rerunning_the_magic_without_a_name_replaces_the_explorer_of_that_model(ip, user_model, monkeypatch):
    shown = shown_in(ip, monkeypatch)
    _run(ip, "%hookexplorer model x")
    first = widget_shown(last_widget(shown))  # the unnamed explorer is reached through its widget, as in the page
    assert browser_sends(first, type="attach", path="features.conv", kind="forward")["ok"]
    assert len(user_model.features.conv._forward_hooks) == 1
    _run(ip, "%hookexplorer model x")  # the cell run again: its old widget is gone from the page
    second = widget_shown(last_widget(shown))
    assert (
        second is not first and first.closed == "closed: hooks removed, model as found"
    )  # the first widget closed with its explorer
    assert len(user_model.features.conv._forward_hooks) == 0  # no hidden explorer keeps capturing
    assert len([data for data in shown if WIDGET_MIME in data]) == 2
    assert browser_sends(second, type="attach", path="features.conv", kind="forward")["ok"]

    ip.user_ns["other"] = nn.Linear(2, 2)
    _run(ip, "%hookexplorer other")  # another model gets an explorer of its own
    other_view = widget_shown(last_widget(shown))
    assert other_view is not second and second.comm is not None
    assert len(user_model.features.conv._forward_hooks) == 1  # the model's explorer stays, hook and all
    _run(ip, "%hookexplorer model x")  # and replacing the model's explorer leaves the other model's
    assert second.closed == "closed: hooks removed, model as found" and other_view.closed == ""


def test_expressions_are_evaluated_in_the_user_namespace(ip, user_model, image):
    _run(ip, "models = {'a b': model}")
    _run(ip, "%hookexplorer models['a b'] x[:1] * 2 -n ex")
    ex = ip.user_ns["ex"]
    assert ex.model is user_model
    assert torch.equal(ex.example_inputs, image[:1] * 2)


def test_errors_name_the_thing_and_the_fix(ip, user_model):
    assert "no variable 'modle' for the model — did you mean 'model'?" in _usage_error(ip, "modle x")
    assert "no variable 'y' for the inputs" in _usage_error(ip, "model y")
    text = _usage_error(ip, "not_a_model")
    assert "'not_a_model' is a list, not a torch.nn.Module" in text and "usage: %hookexplorer model" in text
    assert "needs a model" in _usage_error(ip, "")
    assert "--name needs a Python name" in _usage_error(ip, "model --name")
    assert "raised ZeroDivisionError: division by zero" in _usage_error(ip, "model 1/0")
    # In a cell, IPython shows a UsageError as one line; the kernel stays usable.
    result = ip.run_cell("%hookexplorer modle")
    assert isinstance(result.error_in_exec, UsageError)


def test_display_is_opt_in_and_shows_one_explorer_per_module(ip, user_model, monkeypatch):
    shown = shown_in(ip, monkeypatch)
    plain, _ = ip.display_formatter.format(user_model)
    assert WIDGET_MIME not in plain

    hookwidgets.enable_display()
    # The explorer shows as two outputs of its own (the widget, then its snapshot): IPython's result is left empty.
    assert ip.display_formatter.format(user_model) == ({}, {})
    first = last_widget(shown)
    assert ip.display_formatter.format(user_model) == ({}, {})
    again = last_widget(shown)
    assert first is not again and len(shown) == 4
    assert first[WIDGET_MIME]["model_id"] == again[WIDGET_MIME]["model_id"]  # the same explorer, not a new one
    assert first["text/plain"] == repr(user_model)  # a console without widgets still shows the module
    assert ip.display_formatter.format(nn.Linear(2, 2)) == ({}, {})
    assert last_widget(shown)[WIDGET_MIME]["model_id"] != first[WIDGET_MIME]["model_id"]
    assert WIDGET_MIME not in ip.display_formatter.format(torch.zeros(2))[0]  # tensors are left alone

    hookwidgets.disable_display()  # closes the two explorers: their snapshots are replaced by the closed text
    assert len(shown) == 8 and all("closed: hooks removed, model as found" in d["text/html"] for d in shown[6:])
    plain_again, _ = ip.display_formatter.format(user_model)
    assert WIDGET_MIME not in plain_again
    assert plain_again["text/plain"] == repr(user_model)


def test_a_cell_ending_in_a_module_shows_its_explorer_once_display_is_enabled(ip, user_model, monkeypatch):
    shown = shown_in(ip, monkeypatch)
    _run(ip, "model")
    assert WIDGET_MIME not in shown[-1]  # opt-in: nothing changes before enable_display()
    _run(ip, "import hookwidgets; hookwidgets.enable_display()")
    assert _run(ip, "model") is user_model  # Out[] keeps the module itself
    assert last_widget(shown)["text/plain"] == repr(user_model)
    model_view = widget_shown(last_widget(shown))
    assert model_view.tree == tree_of(user_model)
    _run(ip, "model.features")  # a submodule as the last expression is a module too
    features_view = widget_shown(last_widget(shown))
    assert features_view.tree == tree_of(user_model.features)
    assert browser_sends(features_view, type="attach", path="conv", kind="forward")["ok"]
    assert len(user_model.features.conv._forward_hooks) == 1
    _run(ip, "hookwidgets.disable_display()")  # closes the explorers display made: their widgets and hooks go
    assert model_view.closed == features_view.closed == "closed: hooks removed, model as found"
    assert len(user_model.features.conv._forward_hooks) == 0
    _run(ip, "model")
    assert WIDGET_MIME not in shown[-1]


def test_unloading_closes_every_explorer_and_leaves_the_models_as_found(ip, user_model, image, monkeypatch):
    shown = shown_in(ip, monkeypatch)
    before = hook_state(user_model)
    other = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    other_before = hook_state(other)
    ip.user_ns["other"] = other

    _run(ip, "%hookexplorer model x --name ex")
    _run(ip, "ex.attach('features.conv', ['forward', 'backward']); ex.attach('', 'global_forward', action='stats')")
    _run(ip, "ex.run(x, target=0)")
    hookwidgets.enable_display()
    _run(ip, "other")  # the display printer made an explorer of it
    displayed = widget_shown(last_widget(shown))
    assert browser_sends(displayed, type="attach", path="0", kind="forward_pre")["ok"]
    assert hook_state(user_model) != before and hook_state(other) != other_before

    ex = ip.user_ns["ex"]
    _run(ip, "%unload_ext hookwidgets")
    assert hook_state(user_model) == before
    assert hook_state(other) == other_before
    assert repr(ex).endswith("closed>") and displayed.closed == "closed: hooks removed, model as found"
    assert "hookexplorer" not in ip.magics_manager.magics["line"]
    assert WIDGET_MIME not in ip.display_formatter.format(other)[0]
    assert not torch.nn.modules.module._global_forward_hooks
    assert ip.run_cell("%hookexplorer model").error_in_exec is not None  # the magic is gone

    _run(ip, "%load_ext hookwidgets")  # and it loads again
    _run(ip, "%hookexplorer model x --name ex2")
    assert ip.user_ns["ex2"].model is user_model


def test_unloading_removes_every_kind_of_hook_and_restores_the_global_state(ip, user_model, monkeypatch):
    """Module, global, parameter and autograd-node hooks, and torch's full-backward flags, all as found."""
    shown = shown_in(ip, monkeypatch)
    before = all_hook_state(user_model)
    _run(ip, "%hookexplorer model x --name ex")
    _run(ip, "ex.attach('features.conv', ['forward_pre', 'backward', 'grad'])")
    _run(ip, "ex.attach('', ['global_forward', 'global_backward'], action='stats')")
    _run(ip, "ex.attach('head.fc.weight', ['grad', 'post_accumulate'])")
    _run(ip, "ex.attach('features.conv/AccumulateGrad#weight', 'node')")
    _run(ip, "ex.run(x, target=0)")
    ex = ip.user_ns["ex"]
    assert all(h.fired > 0 for h in ex.hooks), ex.hooks
    hookwidgets.enable_display()
    _run(ip, "model.head")
    assert browser_sends(widget_shown(last_widget(shown)), type="attach", path="fc", kind="backward_pre")["ok"]
    assert diff_keys(before, all_hook_state(user_model))

    _run(ip, "%unload_ext hookwidgets")
    after = all_hook_state(user_model)
    assert after == before, diff_keys(before, after)


def test_reload_ext_gives_a_working_magic_and_closes_the_old_explorers(ip, user_model):
    before = hook_state(user_model)
    _run(ip, "%hookexplorer model x --name ex")
    _run(ip, "ex.attach('features.conv', 'forward')")
    _run(ip, "%reload_ext hookwidgets")
    assert hook_state(user_model) == before
    _run(ip, "%hookexplorer model x --name ex")
    _run(ip, "ex.attach('features.conv', 'forward'); ex.run(x)")
    assert len(ip.user_ns["ex"].captures["features.conv"]["forward"]) == 1


def test_a_printer_registered_before_enable_display_comes_back(ip, user_model, monkeypatch):
    shown = shown_in(ip, monkeypatch)
    # enable_display() takes the display of modules (IPython's ``_ipython_display_`` formatter): the explorer is two
    # outputs, the widget and its snapshot, which one mime bundle cannot be.
    formatter = ip.display_formatter.ipython_display_formatter

    def mine(module):
        print("mine")

    formatter.for_type(nn.Module, mine)
    try:
        hookwidgets.enable_display()
        ip.display_formatter.format(user_model)
        assert WIDGET_MIME in last_widget(shown)
        hookwidgets.disable_display()
        assert formatter.type_printers[nn.Module] is mine
    finally:
        formatter.type_printers.pop(nn.Module, None)


def test_enable_display_outside_ipython_says_where_it_works(monkeypatch):
    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    with pytest.raises(RuntimeError, match="needs IPython: call it in a Jupyter notebook"):
        hookwidgets.enable_display()
