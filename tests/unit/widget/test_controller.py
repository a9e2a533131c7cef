"""The view as a controller over the engine: payloads are pure functions of a headless explorer's public state, and
the view follows the engine's events, from whatever thread they come."""

from __future__ import annotations

import threading
import warnings

import torch
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.core import Explorer
from hookwidgets.widget import protocol
from hookwidgets.widget.attribution_panel import attribution_payload
from hookwidgets.widget.captures import plot_items
from hookwidgets.widget.graph_panel import graph_payload
from hookwidgets.widget.payloads import hooks_payload, memory_payload, selection_payload, status_payload
from hookwidgets.widget.summary_panel import summary_payload
from hookwidgets.widget.training_panel import training_payload

from ._messages import browser_sets, in_cell
from ._shapes import problems


def test_every_payload_is_built_from_a_headless_explorer(cnn, image):
    cnn.eval()
    opt = torch.optim.SGD(cnn.parameters(), lr=0.1)
    with Explorer(cnn, example_inputs=image) as ex:  # the engine alone: no widget, no view
        monitor = ex.watch_optimizer(opt)
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        ex.attach("features.conv", ["forward", "grad"])
        ex.run(target=0, record_graph=True)
        cnn(image).sum().backward()  # the user's own step: the monitor measures it
        opt.step()
        node = next(n["id"] for n in ex.recorded_graph["nodes"] if n["op"] == "AddmmBackward0")
        payloads = {
            "hooks": hooks_payload(ex.hooks),
            "selection": selection_payload(ex, "features.conv"),
            "plots": {"path": "features.conv", "items": plot_items(ex.captures, "features.conv")},
            "status": status_payload("idle", "", ex.probe_classes),
            "memory": memory_payload(ex),
            "summary": summary_payload(ex),
            "training": training_payload(ex.monitors, None),
            "attribution": attribution_payload(ex, "features", "gradcam", "top"),
            "graph": graph_payload(ex.recorded_graph),
        }
        for name, value in payloads.items():
            assert problems(value, protocol.TRAITLETS[name], name) == []
        kinds = [item["kind"] for item in payloads["plots"]["items"]]
        assert kinds == ["forward", "grad", "global_forward", "global_grad"]
        assert payloads["training"]["ratios"]["rows"] and ex.monitors == [monitor]
        assert selection_payload(ex, node)["details"][0] == ["Op", "AddmmBackward0"]  # from the recorded graph
        assert len(payloads["status"]["top"]) == 5


def test_a_training_loop_in_a_thread_is_followed_live_and_the_cells_end_syncs_it(ipython, cnn, image, monkeypatch):
    from hookwidgets.widget import live

    monkeypatch.setattr(live, "PUSH_INTERVAL_S", 0.0)  # push at every step the share allows
    monkeypatch.setattr(live, "MAX_SHARE", 0.5)
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        ex.attach("", "global_forward", action="stats")
        ex.attach("features.conv", ["forward", "grad"])
        opt = torch.optim.SGD(cnn.parameters(), lr=0.01)
        states, errors = [], []
        view.observe(lambda change: states.append(change["new"]["state"]), names="status")

        def loop() -> None:
            try:
                for _ in range(30):
                    opt.zero_grad()
                    cnn(image).sum().backward()
                    opt.step()
            except BaseException as exc:  # seen by the assertion below
                errors.append(exc)

        def cell() -> None:  # the cell starts the loop in a thread and clicks around while it runs
            thread = threading.Thread(target=loop)
            thread.start()
            while thread.is_alive():
                for target in ("features.conv", "head.fc"):
                    browser_sets(view, selected=target)
            thread.join()

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # neither a failing push nor a failing subscriber is warned about
            in_cell(ipython, cell)
        assert errors == []
        assert "live" in states and view.status["state"] == "idle"  # pushed from the loop's thread, then the cell end
        assert [h["fired"] for h in view.hooks] == [h.fired for h in ex.hooks]
        assert view.hooks[1] == {**view.hooks[1], "path": "features.conv", "kind": "forward", "fired": 30}
        assert view.summary["steps"][-1] == 30


def test_python_calls_reach_the_view_through_the_engines_events(cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        browser_sets(view, selected="features.conv")
        ex.attach("features.conv", "forward")
        assert [h["kind"] for h in view.hooks] == ["forward"] and view.selection["code"]
        ex.run(image)  # the step's end: counts, images and memory at once
        assert view.hooks[0]["fired"] == 1 and view.plots["items"][0]["step"] == 1 and view.memory["records"] == 1
        ex.detach()
        assert view.hooks == [] and view.selection["code"] == ""
        opt = torch.optim.SGD(cnn.parameters(), lr=0.1)
        ex.watch_optimizer(opt)
        assert view.training["visible"] is True


def test_the_view_follows_a_handle_removed_from_python_as_it_follows_detach(cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        info = ex.attach("features.conv", "forward")
        group = ex.attach("head.fc", ["forward", "grad"])
        assert [(h["path"], h["kind"]) for h in view.hooks] == [
            ("features.conv", "forward"),
            ("head.fc", "forward"),
            ("head.fc", "grad"),
        ]
        info.remove()
        assert [(h["path"], h["kind"]) for h in view.hooks] == [("head.fc", "forward"), ("head.fc", "grad")]
        group.remove()
        assert view.hooks == []
        with ex.attach("head.fc", "backward"):
            assert [h["kind"] for h in view.hooks] == ["backward"]
        assert view.hooks == []


def test_a_sequence_output_offers_its_next_tokens_not_classes():
    x = torch.randn(2, 3, 4)
    model = nn.Sequential(nn.Linear(4, 4))
    with HookExplorer(model, example_inputs=x) as ex:  # (2, 3, 4) scores: a sequence, read at its last position
        expected = model(x)[0, -1].softmax(-1).topk(4)
        assert ex.probe_classes == []  # no (batch, classes) scores
        assert [c for c, _ in ex.view.status["top"]] == expected.indices.tolist()
        assert ex.view.status["output"]["kind"] == "sequence" and ex.view.status["output"]["positions"] == 3
    with HookExplorer(nn.Flatten(0), example_inputs=torch.randn(2, 3, 4)) as ex:  # a vector: no scores
        assert ex.probe_classes == [] and ex.view.status["top"] == [] and ex.view.status["output"]["kind"] == "none"
