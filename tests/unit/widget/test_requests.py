"""Requests from the page: each message that carries a ``request_id`` gets exactly one reply with it, success or
error, after the state it changed."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.widget.payloads import status_payload

from ._messages import browser_sends, browser_sets, page_sends, sent_by_kernel


def test_a_request_that_succeeds_gets_an_ok_reply(explorer):
    reply = browser_sends(explorer.view, type="attach", path="features.conv", kind="forward")
    assert reply["ok"] is True and reply["error"] == ""
    assert reply["request_id"].startswith("test-")


def test_each_failing_request_gets_one_error_reply_and_the_page_shows_the_error(explorer):
    view = explorer.view
    reply = browser_sends(view, type="attach", path="features.cnv", kind="forward")
    assert reply["ok"] is False and reply["error"].startswith("KeyError: no module or parameter 'features.cnv'")
    assert view.error.startswith(reply["error"])
    reply = browser_sends(view, type="attach", path="head.fc", kind="grad", edit=["scale", "big"])
    assert reply["ok"] is False and "scale" in reply["error"]
    reply = browser_sends(view, type="run", target="three")
    assert reply["ok"] is False and "run target 'three'" in reply["error"]
    reply = browser_sends(view, type="explode")
    assert reply["ok"] is False and "unknown message type 'explode'" in reply["error"]
    assert "attach, detach, run" in reply["error"]  # the types there are
    reply = browser_sends(view, type="attribute", layer="head.fc", method="gradcam", target="top")
    assert reply["ok"] is False and reply["error"] == view.attribution["error"]  # said in the panel too
    reply = browser_sends(view, type="dismiss_error")
    assert reply["ok"] is True and view.error == ""


def test_an_attribute_message_without_its_layer_is_refused_in_the_panel(explorer):
    # AttributeMessage.layer is required: a message without it is answered with why, not run at a layer of the
    # engine's choosing while the panel's layer says None.
    view = explorer.view
    reply = browser_sends(view, type="attribute", method="gradcam", target="top")
    assert reply["ok"] is False and "layer" in reply["error"]
    assert view.attribution["error"] == reply["error"] and view.attribution["png"] is None


def test_a_run_or_recording_that_fails_replies_with_the_failure():
    with pytest.warns(UserWarning, match="probe run"):
        ex = HookExplorer(nn.Linear(4, 2), example_inputs=torch.randn(1, 5))  # the wrong width: runs fail
    with ex:
        view = ex.view
        reply = browser_sends(view, type="run")
        assert reply["ok"] is False and reply["error"].startswith("run failed: RuntimeError: ")
        failed_probe = ex.probe_output  # no scores: the probe failed, which the run bar says
        expected = status_payload("error", "run failed: RuntimeError", [], failed_probe, failed="")  # the root failed
        assert view.status == expected and failed_probe["probe_failed"].startswith("the shape probe failed: ")
        reply = browser_sends(view, type="graph")
        assert reply["ok"] is False and reply["error"] == view.status["message"]
    with HookExplorer(nn.Linear(4, 2)) as ex:
        reply = browser_sends(ex.view, type="graph")
        assert reply == {
            **reply,
            "ok": False,
            "error": "Record graph needs example inputs: HookExplorer(model, example_inputs=x)",
        }


def test_the_reply_comes_after_the_state_its_action_changed(explorer):
    view = explorer.view
    browser_sets(view, selected="features.conv")
    order: list[str] = []
    for name in ("hooks", "selection", "plots", "status"):
        view.observe(lambda change, name=name: order.append(name), names=name)
    view.send = lambda content, buffers=None: order.append(content["type"])  # what reaches the page, in order
    try:
        assert browser_sends(view, type="attach", path="features.conv", kind="forward")["ok"]
        assert browser_sends(view, type="run", mode="forward")["ok"]
    finally:
        del view.send
    first = order.index("reply")
    assert {"hooks", "selection"} <= set(order[:first])  # the badge the toggle waits for, before its reply
    assert order[-1] == "reply" and {"plots", "status"} <= set(order[first + 1 : -1])


def test_a_message_without_a_request_id_is_done_and_answered_by_nothing(explorer):
    view = explorer.view

    def send() -> None:
        page_sends(view, {"type": "attach", "path": "", "kind": "forward"})

    assert sent_by_kernel(view, send) == []
    assert [(h["path"], h["kind"]) for h in view.hooks] == [("", "forward")]
