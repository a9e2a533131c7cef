"""``Explorer.subscribe``: what the engine tells its subscribers, when, and on which thread."""

from __future__ import annotations

import json
import re
import threading
import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import LateInPlace


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _step(model: nn.Module) -> None:
    """One step of the user's own loop: a forward and its backward."""
    model(torch.randn(3, 4, requires_grad=True)).sum().backward()


def _listen(ex: Explorer) -> list[dict]:
    events: list[dict] = []
    ex.subscribe(events.append)
    return events


def _of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def test_attach_and_detach_are_events_with_the_hooks_as_plain_data():
    with Explorer(_model()) as ex:
        events = _listen(ex)
        ex.attach("0", ["forward", "grad"], action="stats")
        ex.detach("0", "grad")
        ex.detach("2")  # nothing there: no event
        assert events == [
            {
                "type": "attached",
                "hooks": [
                    {
                        "path": "0",
                        "kind": kind,
                        "action": "stats",
                        "edit": [],
                        "fired": 0,
                        "error": None,
                        "note": None,
                        "foreign": False,
                    }
                    for kind in ("forward", "grad")
                ],
            },
            {"type": "detached", "hooks": [{**events[0]["hooks"][1]}], "reason": "detach"},
        ]
        json.dumps(events)


def test_a_loops_firings_come_once_per_step_when_the_step_is_over():
    model = _model()
    with Explorer(model) as ex:
        ex.attach("0", ["forward", "backward"])
        ex.attach("2", "forward", action="stats")
        ex.attach("2.weight", "grad")
        ex.attach("2.bias", "grad", action="print")  # keeps no record
        events = _listen(ex)
        for _ in range(3):
            _step(model)
        # each forward's end is a step event; the firings of a step come once the next step's forward ended
        assert [(e["type"], e.get("step")) for e in events] == [
            ("step", 1),
            ("fired", 1),
            ("capture", 1),
            ("step", 2),
            ("fired", 2),
            ("capture", 2),
            ("step", 3),
        ]
        assert all(e["done"] is False for e in _of(events, "step"))
        timeline = ex.timeline
        for fired in _of(events, "fired"):  # the step's forward and backward firings, in order, once each
            assert fired["firings"] == [t for t in timeline if t.step == fired["step"]]
            assert {t.phase for t in fired["firings"]} == {"forward", "backward"}
        captures = _of(events, "capture")
        assert captures[0] == {
            "type": "capture",
            "step": 1,
            "records": [["0", "forward"], ["2", "forward"], ["2.weight", "grad"], ["0", "backward"]],
        }
        json.dumps(events)


def test_a_capture_event_names_every_module_a_global_hook_recorded():
    model = _model()
    with Explorer(model) as ex:
        recorded = ["global_forward", "global_grad"]
        ex.attach("", recorded, action="stats")
        ex.attach("", "global_forward_pre", action="print")  # keeps no record
        events = _listen(ex)
        _step(model)
        _step(model)
        (capture,) = _of(events, "capture")
        assert sorted(capture["records"]) == sorted([path, kind] for path in ("", "0", "1", "2") for kind in recorded)


def test_run_ends_its_step_with_all_its_firings():
    with Explorer(_model(), example_inputs=torch.randn(2, 4)) as ex:
        ex.attach("0", ["forward", "grad"])
        events = _listen(ex)
        ex.run(target=0)
        assert [(e["type"], e.get("step"), e.get("done")) for e in events] == [
            ("step", 1, False),  # the forward ended; its backward follows
            ("fired", 1, None),
            ("capture", 1, None),
            ("step", 1, True),  # run() ended: nothing of the step is left to come
        ]
        assert [(t.kind, t.phase) for t in events[1]["firings"]] == [("forward", "forward"), ("grad", "backward")]
        with pytest.raises(ValueError, match="this needs inputs"):
            Explorer(_model()).run()
        events.clear()
        with pytest.raises(RuntimeError):
            ex.run(torch.randn(2, 5))  # a failing run ends too
        assert events[-1] == {"type": "step", "step": 2, "done": True}


def test_a_failing_hook_is_an_error_event():
    model = _model()

    def explode(module, args, output):
        raise ValueError("bad value\nsecond line")

    with Explorer(model) as ex:
        ex.attach("2", "forward", action=explode)
        events = _listen(ex)
        with pytest.warns(UserWarning, match="failed"):
            model(torch.randn(1, 4))
        assert _of(events, "error") == [
            {
                "type": "error",
                "path": "2",
                "kind": "forward",
                "step": 1,
                "message": "ValueError: bad value",
            }
        ]


def test_a_collision_is_a_detached_and_an_error_event(image):
    model = LateInPlace()
    with Explorer(model) as ex:
        ex.attach("conv", "backward")
        ex.attach("fc", "forward")
        events = _listen(ex)
        model.inplace = True
        with pytest.warns(UserWarning, match="collides with the in-place"), pytest.raises(RuntimeError):
            model(image)
        (detached,) = _of(events, "detached")
        assert detached["reason"] == "collision" and [(h["path"], h["kind"]) for h in detached["hooks"]] == [
            ("conv", "backward")
        ]
        (error,) = _of(events, "error")
        assert (error["path"], error["kind"], error["step"]) == ("conv", "backward", None)
        assert error["message"] == ex.diagnostics[0]
        assert [(h.target, h.kind) for h in ex.own_hooks] == [("fc", "forward")]


def test_graph_recordings_are_graph_events():
    with Explorer(_model(), example_inputs=torch.randn(2, 4)) as ex:
        assert ex.recorded_graph is None  # nothing recorded yet, and reading it records nothing
        events = _listen(ex)
        data = ex.graph()
        assert ex.recorded_graph is data
        assert events == [{"type": "graph"}]
        ex.run(record_graph=True)
        assert {"type": "graph"} in events
        assert ex.recorded_graph is not data


def test_watching_an_optimizer_is_a_watching_event():
    model = _model()
    with Explorer(model) as ex:
        events = _listen(ex)
        monitor = ex.watch_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
        assert events == [{"type": "watching", "watch": "optimizer"}]
        assert ex.monitors == [monitor]


def test_a_subscriber_that_raises_is_warned_about_once_and_the_model_runs_on():
    model = _model()
    with Explorer(model) as ex:
        ex.attach("0", "forward")
        seen = []

        def broken(event):
            seen.append(event["type"])
            raise KeyError("oops")

        ex.subscribe(broken)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                model(torch.randn(1, 4))
        (warning,) = [w for w in caught if issubclass(w.category, RuntimeWarning)]
        assert re.search(r"subscriber .*broken raised KeyError\('oops'\) on a 'step' event", str(warning.message))
        assert seen.count("step") == 3  # still subscribed: every event reached it
        assert ex.hooks[0].fired == 3


def test_nothing_is_kept_for_subscribers_once_the_last_one_left():
    model = _model()
    with Explorer(model) as ex:
        ex.attach("0", "forward")
        first = []
        unsubscribe = ex.subscribe(first.append)
        model(torch.randn(1, 4))
        unsubscribe()
        unsubscribe()  # twice: nothing more happens
        model(torch.randn(1, 4))
        model(torch.randn(1, 4))
        assert [e["type"] for e in first] == ["step"]
        later = _listen(ex)
        model(torch.randn(1, 4))
        model(torch.randn(1, 4))
        # the firings of steps 1 to 3 were not kept: the first fired event is step 4's
        assert [(e["type"], e["step"]) for e in later if e["type"] in ("fired", "step")] == [
            ("step", 4),
            ("fired", 4),
            ("step", 5),
        ]


def test_events_of_a_training_thread_reach_subscribers_once_each():
    model = _model()
    with Explorer(model, example_inputs=torch.randn(2, 4)) as ex:
        ex.attach("0", ["forward", "grad"])
        events = _listen(ex)
        errors: list[BaseException] = []

        def loop() -> None:
            try:
                for _ in range(200):
                    _step(model)
            except BaseException as exc:  # seen by the main thread's assertion
                errors.append(exc)

        thread = threading.Thread(target=loop)
        thread.start()
        while thread.is_alive():  # subscribers come and go while the loop's events are delivered
            unsubscribe = ex.subscribe(lambda event: None)
            unsubscribe()
        thread.join()
        ex.run(target=0)  # on this thread: its end delivers whatever is left
        assert errors == []
        fired = [t for e in _of(events, "fired") for t in e["firings"]]
        assert sorted(fired) == sorted(ex.timeline)  # every firing once, none twice
        assert len(fired) == 201 * 2
        assert [e["step"] for e in _of(events, "step") if not e["done"]] == list(range(1, 202))


def test_close_drops_the_subscribers_and_a_closed_explorer_takes_none():
    model = _model()
    ex = Explorer(model)
    ex.attach("0", "forward")
    events = _listen(ex)
    ex.close()
    model(torch.randn(1, 4))
    assert events == []
    with pytest.raises(RuntimeError, match="closed"):
        ex.subscribe(print)
    with Explorer(model) as other, pytest.raises(TypeError, match=r"subscribe\(\) takes a callable f\(event\)"):
        other.subscribe("print")


def test_own_hooks_leave_out_the_hooks_of_others():
    model = _model()
    handle = model[0].register_forward_hook(lambda m, a, o: None)
    try:
        with Explorer(model) as ex:
            ex.attach("2", "forward")
            assert [(h.target, h.kind, h.foreign) for h in ex.hooks] == [
                ("2", "forward", False),
                ("0", "forward", True),
            ]
            assert [(h.target, h.kind) for h in ex.own_hooks] == [("2", "forward")]
    finally:
        handle.remove()


def test_the_probe_notes_the_top_classes_and_example_copy_is_a_fresh_copy():
    x = torch.randn(2, 4, requires_grad=True)
    with Explorer(_model(), example_inputs=x) as ex:
        with torch.no_grad():
            scores = ex.model(x)[0].softmax(-1)
        assert [c for c, _ in ex.probe_classes] == scores.argsort(descending=True).tolist()
        assert ex.probe_classes[0][1] == pytest.approx(float(scores.max()), abs=1e-4)
        copy = ex.example_copy()
        assert copy is not x and torch.equal(copy, x) and copy.requires_grad and copy.grad_fn is None
    with Explorer(_model()) as ex:
        assert ex.probe_classes == []
        with pytest.raises(ValueError, match="example_inputs="):
            ex.example_copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(_model())
    with Explorer(scripted, example_inputs=torch.randn(2, 4)) as ex:
        assert ex.probe_classes == []  # a scripted model takes no hook to read its output with
