"""A displayed explorer's static snapshot follows the explorer, so a saved notebook shows what it showed last.

It is an output of its own under the widget, with a ``display_id``; a change to the view replaces it (the kernel's
``update_display_data``): at the end of the cell that made it, or, for a click in the page, after a second that
coalesces the clicks; once the explorer closes, it says so once and is never replaced again.
"""

from __future__ import annotations

import re
import time
from typing import Any

import torch
from IPython.core.interactiveshell import InteractiveShell
from torch import nn

from hookwidgets import HookExplorer
from tests.unit.widget._display import WIDGET_MIME
from tests.unit.widget._messages import browser_sends

INTERVAL_S = 1.0
"""The snapshot's replacements for clicks are at least this far apart (snapshot_display.UPDATE_INTERVAL_S)."""


def _published(shell: InteractiveShell, monkeypatch) -> list[dict[str, Any]]:
    """Every output the shell publishes from now on: its data, its display_id, whether it replaces one."""
    outputs: list[dict[str, Any]] = []

    def publish(data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        outputs.append({"data": data, "display_id": (transient or {}).get("display_id"), "update": update})

    monkeypatch.setattr(shell.display_pub, "publish", publish)
    return outputs


def _run(shell: InteractiveShell, code: str) -> None:
    result = shell.run_cell(code)
    assert result.success, result.error_before_exec or result.error_in_exec


def _badges(html: str) -> list[tuple[str, str]]:
    return re.findall(r'data-kind="(\w+)"[^>]*>([^<]*)</span>', html)


def _shown_explorer(shell: InteractiveShell, monkeypatch, modules: int = 2) -> tuple[HookExplorer, list, str]:
    """An explorer displayed as a cell's last expression: it, what the shell publishes, the snapshot's display_id."""
    shell.user_ns["model"] = nn.Sequential(*(nn.Linear(4, 4) for _ in range(modules)))
    shell.user_ns["x"] = torch.randn(2, 4)
    outputs = _published(shell, monkeypatch)
    _run(shell, "from hookwidgets import HookExplorer\nex = HookExplorer(model, example_inputs=x)\nex")
    widget, snapshot = outputs
    assert WIDGET_MIME in widget["data"] and snapshot["display_id"] and not snapshot["update"]
    return shell.user_ns["ex"], outputs, snapshot["display_id"]


def _wait_for(condition, seconds: float = 20.0) -> None:
    """Wait until ``condition()`` holds (a timer thread sends the snapshot); fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the snapshot was never replaced"
        time.sleep(0.05)


def test_the_explorer_shows_its_widget_then_its_snapshot_alone_under_a_display_id(shell, monkeypatch):
    ex, outputs, display_id = _shown_explorer(shell, monkeypatch)
    widget, snapshot = outputs
    # The widget's output: what Lab renders, with the repr as text; no HTML, which would show twice where widgets
    # do not run.
    assert set(widget["data"]) == {WIDGET_MIME, "text/plain"}
    assert widget["data"][WIDGET_MIME]["model_id"] == ex.view.model_id
    assert widget["data"]["text/plain"] == "<HookExplorer of Sequential: 3 modules, 0 hooks, step 0>"
    assert widget["display_id"] is None
    assert set(snapshot["data"]) == {"text/html"} and 'class="hw-static"' in snapshot["data"]["text/html"]
    assert "&lt;HookExplorer of Sequential: 3 modules, 0 hooks, step 0&gt;" in snapshot["data"]["text/html"]
    _run(shell, "ex")  # shown again: the same snapshot display, so each copy is replaced
    assert [o["display_id"] for o in outputs[2:]] == [None, display_id]
    ex.close()


def test_a_cell_that_changes_the_view_replaces_the_snapshot_once_when_it_ends(shell, monkeypatch):
    ex, outputs, display_id = _shown_explorer(shell, monkeypatch)
    shell.user_ns["outputs"] = outputs
    # The hooks fire in the cell; the snapshot is sent after it, not from them.
    _run(shell, "ex.attach('0', 'forward'); ex.run(); ex.run(); during = len(outputs)")
    assert shell.user_ns["during"] == 2
    (update,) = outputs[2:]
    assert update["update"] and update["display_id"] == display_id and set(update["data"]) == {"text/html"}
    html = update["data"]["text/html"]
    assert "&lt;HookExplorer of Sequential: 3 modules, 1 hook, step 2&gt;" in html
    assert _badges(html) == [("forward", "fwd 2")]
    _run(shell, "y = 1")  # a cell that changes nothing sends nothing
    assert len(outputs) == 3
    ex.close()


def test_clicks_between_cells_are_coalesced_into_the_latest_snapshot(shell, monkeypatch):
    ex, outputs, display_id = _shown_explorer(shell, monkeypatch, modules=8)
    started = time.monotonic()
    for index in range(8):  # eight clicks in the page, each a change of the view
        assert browser_sends(ex.view, type="attach", path=str(index), kind="forward")["ok"]
    elapsed = time.monotonic() - started
    assert len(outputs) == 2  # a click sends nothing itself: a timer sends the latest state later

    def last_has_all() -> bool:
        return len(_badges(outputs[-1]["data"]["text/html"])) == 8

    _wait_for(last_has_all)
    time.sleep(1.5 * INTERVAL_S)  # anything still pending has been sent
    updates = outputs[2:]
    assert all(u["update"] and u["display_id"] == display_id for u in updates)
    # At least a second apart: the eight clicks, made within ``elapsed``, were sent in few replacements.
    assert 1 <= len(updates) <= 1 + int(elapsed / INTERVAL_S) < 8
    assert _badges(updates[-1]["data"]["text/html"]) == [("forward", "fwd")] * 8  # unfired: no count
    ex.close()


def test_a_closed_explorer_says_so_once_and_its_snapshot_is_never_replaced_again(shell, monkeypatch):
    ex, outputs, display_id = _shown_explorer(shell, monkeypatch)
    assert browser_sends(ex.view, type="attach", path="0", kind="forward")["ok"]  # a replacement is due
    _run(shell, "ex.close()")
    (closed,) = outputs[2:]
    assert closed["update"] and closed["display_id"] == display_id
    assert "closed: hooks removed, model as found" in closed["data"]["text/html"]
    assert "&lt;HookExplorer of Sequential: 3 modules, closed&gt;" in closed["data"]["text/html"]
    time.sleep(1.5 * INTERVAL_S)  # the click's timer, had it not been cancelled, would have fired
    ex.close()
    _run(shell, "y = 1")
    assert len(outputs) == 3
