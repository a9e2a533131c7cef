"""The hook kinds are one table: every list of kinds the engine, the summary and the widget use is read from its rows,
so adding a kind is adding a row."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.core import Explorer, Record
from hookwidgets.core.diagnostics import summary_rows
from hookwidgets.core.hooks.kinds import KINDS, Kind, resolve_kind, valid_kinds
from hookwidgets.core.kind_table import names, summary_columns, user_names
from hookwidgets.core.monitors.scalar_log import stats_kinds_needed
from hookwidgets.widget import captures
from hookwidgets.widget.payloads import kinds_payload


def test_the_lists_read_from_the_table_are_the_ones_the_engine_and_the_widget_had():
    assert set(names(full_backward=True)) == {"backward", "backward_pre", "global_backward", "global_backward_pre"}
    assert set(names(armed_by_step=True)) == {
        "global_backward",
        "global_backward_pre",
        "global_grad",
        "param_grad",
        "post_accumulate",
    }
    assert set(names(module_backward=True)) == {"backward", "backward_pre", "legacy_backward"}
    assert set(names(editable=False)) == {"post_accumulate", "legacy_backward"}
    assert summary_columns() == {
        "forward": "act",
        "global_forward": "act",
        "backward": "grad",
        "global_backward": "grad",
        "grad": "grad",
        "global_grad": "grad",
    }
    every = (
        *("forward_pre", "forward", "backward_pre", "backward", "grad", "legacy_backward"),
        *("global_forward_pre", "global_forward", "global_backward_pre", "global_backward", "global_grad"),
        *("post_accumulate", "node_pre", "node"),
    )
    assert user_names(plotted=True) == every
    assert set(user_names(gradient=True)) == set(every) - {
        "forward_pre",
        "forward",
        "global_forward_pre",
        "global_forward",
    }
    assert user_names(every_layer=True) == ("global_forward", "global_grad")
    assert valid_kinds("param") == ("grad", "post_accumulate")
    assert resolve_kind("grad", "0.weight", "param").name == "param_grad"
    assert [row["kind"] for row in kinds_payload()] == [*every[:11], "grad", *every[11:]]


def test_rows_that_share_a_users_name_agree_on_what_the_summary_and_the_plots_do_with_it():
    for name in user_names():
        shared = [k for k in KINDS.values() if k.user_name == name]
        assert len({(k.summary, k.phase, k.plotted) for k in shared}) == 1, name


@pytest.fixture
def fake_rows(monkeypatch):
    """Two kinds added as rows only: a module backward kind and a model-wide forward one."""
    fake = Kind(
        "fake_grad",
        "module",
        "backward",
        1,
        "hook(grad)",
        "a kind added to the table by a test, with its tooltip",
        module_backward=True,
        editable=False,
        summary="grad",
        badge="fk",
    )
    wide = Kind(
        "global_fake", "global", "forward", 3, "hook(module, args, output)", "every module's fake", summary="act"
    )
    monkeypatch.setitem(KINDS, fake.name, fake)
    monkeypatch.setitem(KINDS, wide.name, wide)
    return fake, wide


def test_a_kind_added_as_one_row_is_seen_everywhere_kinds_are_listed(fake_rows, monkeypatch):
    fake, _ = fake_rows
    model = nn.Sequential(nn.Linear(4, 3))
    # the engine: the targets that take it, its row for attach, and the refusals its facts decide
    assert "fake_grad" in valid_kinds("module") and "global_fake" in valid_kinds("module", is_root=True)
    assert resolve_kind("fake_grad", "0", "module") is fake
    with Explorer(model) as ex, pytest.raises(ValueError, match="'fake_grad' hooks cannot change values"):
        ex.attach("0", "fake_grad", edit=("scale", 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the explorer says the model is compiled
        with Explorer(torch.compile(model)) as ex, pytest.raises(ValueError, match="never fires backward hooks"):
            ex.attach("", "fake_grad")  # a module backward kind, on torch.compile's wrapper
    assert stats_kinds_needed([]) == ["global_forward", "global_grad", "global_fake"]

    # the summary: its stats records fill the columns its row names
    with Explorer(model) as ex:
        ex.attach("0", "forward", action="stats")
        ex.run(torch.randn(2, 4))
        (forward,) = ex.captures["0"]["forward"]
        ex.captures.add(Record("0", "fake_grad", forward.step, forward.call, stats=forward.stats))
        (row,) = summary_rows(ex.captures)
    assert row["grad_norm"] == row["act_norm"] and row["grad_calls"] == 1

    # the widget: drawn, on the gradients' scale, and sent to the page with its tooltip and badge
    drawn = []
    real_draw = captures.draw
    monkeypatch.setattr(captures, "draw", lambda *a, **kw: drawn.append(kw["gradient"]) or real_draw(*a, **kw))
    with Explorer(model) as ex:
        ex.captures.add(Record("0", "fake_grad", 0, 0, tensors={"grad": torch.ones(2, 3)}))
        assert [item["kind"] for item in captures.plot_items(ex.captures, "0")] == ["fake_grad"]
    assert drawn == [True]
    explorer = HookExplorer(model)
    sent = {row["kind"]: row for row in explorer.view.hook_kinds}
    explorer.close()
    assert sent["fake_grad"] == {
        "kind": "fake_grad",
        "name": "fake_grad",
        "family": "module",
        "phase": "backward",
        "tip": "a kind added to the table by a test, with its tooltip",
        "badge": "fk",
        "every_layer": False,
        "common": False,
    }
    assert sent["global_fake"]["every_layer"] is True and sent["global_fake"]["badge"] == "global_fake"
