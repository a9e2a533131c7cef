"""docs/widget-protocol.md against ``hookwidgets/widget/protocol.py``: every shape, field and type documented, and
nothing documented that the code does not send; and the payloads of a whole session have those shapes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
import traitlets

from hookwidgets import HookExplorer
from hookwidgets.widget import messages, protocol
from hookwidgets.widget.payloads import status_payload
from hookwidgets.widget.view import ExplorerView

from ._messages import browser_sends, browser_sets, in_cell, sent_by_kernel
from ._shapes import fields, problems, type_text, typed_dicts

DOC = Path(__file__).resolve().parents[3] / "docs" / "widget-protocol.md"
ROW = re.compile(r"^\| `([^`]+)` \| `(.+?)` \| (.*) \|$")


def _sections() -> dict[str, dict[str, tuple[str, str]]]:
    """The doc's tables: ``{heading: {name: (type, meaning)}}``; the traitlets' table under "traitlets"."""
    tables: dict[str, dict[str, tuple[str, str]]] = {}
    current = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#{2,3} (.*)$", line)
        if heading:
            title = heading.group(1)
            named = re.fullmatch(r"`(\w+)`", title)
            current = named.group(1) if named else ("traitlets" if title.startswith("Traitlets") else None)
            current = "run traitlets" if title.startswith("Run view traitlets") else current
            continue
        row = ROW.match(line)
        if row and current is not None:
            name, kind, meaning = row.groups()
            tables.setdefault(current, {})[name] = (kind.replace("\\|", "|"), meaning.strip())
    return tables


SECTIONS = _sections()


def test_every_shape_is_documented_field_by_field_with_its_type():
    shapes = typed_dicts(protocol)
    documented = {name for name in SECTIONS if name not in ("traitlets", "run traitlets")}
    assert documented == set(shapes), "a ### `Shape` section per TypedDict of protocol.py, and no other"
    for name, shape in shapes.items():
        table = SECTIONS[name]
        assert list(table) == list(fields(shape)), f"{name}: the doc's fields, in order, are the TypedDict's"
        for field, text in fields(shape).items():
            assert table[field][0] == text, f"{name}.{field}: documented as {table[field][0]!r}, declared {text!r}"
            assert table[field][1], f"{name}.{field}: say what it means"


def test_every_traitlet_is_documented_with_its_shape():
    synced = [name for name in ExplorerView.class_own_traits(sync=True) if not name.startswith("_")]
    assert sorted(synced) == sorted(protocol.TRAITLETS), "protocol.TRAITLETS names every synced traitlet"
    table = SECTIONS["traitlets"]
    assert list(table) == list(protocol.TRAITLETS)
    for name, shape in protocol.TRAITLETS.items():
        assert table[name][0] == type_text(shape), name
        assert table[name][1], name


def test_every_run_view_traitlet_is_documented_with_its_shape():
    from hookwidgets.widget.run_widget import RunWidget

    synced = [name for name in RunWidget.class_own_traits(sync=True) if not name.startswith("_")]
    assert sorted(synced) == sorted(protocol.RUN_TRAITLETS), "protocol.RUN_TRAITLETS names every synced traitlet"
    table = SECTIONS["run traitlets"]
    assert list(table) == list(protocol.RUN_TRAITLETS)
    for name, shape in protocol.RUN_TRAITLETS.items():
        assert table[name][0] == type_text(shape), name
        assert table[name][1], name


def test_every_message_type_has_a_shape_and_a_handler():
    assert list(messages.HANDLERS) == list(protocol.MESSAGES)
    for kind, shape in protocol.MESSAGES.items():
        assert fields(shape)["type"] == f'"{kind}"'
        assert fields(shape)["request_id"] == "str"


def test_the_checks_see_a_wrong_field_or_type():
    """The checks above can fail: a field the doc lacks, or one typed otherwise, is seen."""
    documented = dict(SECTIONS["Status"])
    documented.pop("top")
    assert list(documented) != list(fields(protocol.Status))
    output = status_payload("idle", "", [])["output"]
    rest = {"cell": False, "step": 0, "failed": None}
    assert problems({"state": "idle", "message": "", "output": output, **rest}, protocol.Status) == [
        ": Status lacks ['top']"
    ]
    assert problems({"state": "idle", "message": "", "top": [], "output": output, "x": 1, **rest}, protocol.Status) == [
        ": Status has no field ['x']"
    ]
    assert problems({"state": 1, "message": "", "top": [], "output": output, **rest}, protocol.Status) == [
        ".state: 1 is no str"
    ]


def _session(shell: Any) -> tuple[HookExplorer, list[dict[str, Any]]]:
    """An explorer after a session that fills every traitlet of its view, and every reply the kernel sent."""
    from hookwidgets.examples import DigitsCNN

    torch.manual_seed(0)
    model = DigitsCNN().eval()
    ex = HookExplorer(model, example_inputs=torch.randn(2, 1, 32, 32))
    view = ex.view
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ex.watch_optimizer(opt)
    replies: list[dict[str, Any]] = []

    def clicks() -> None:
        for kind in ("global_forward", "global_grad"):
            browser_sends(view, type="attach", path="", kind=kind, action="stats")
        browser_sends(view, type="attach", path="features.conv1", kind="forward", edit=["scale", 2.0])
        browser_sends(view, type="attach", path="features.conv1", kind="nope")  # an error reply
        browser_sets(view, selected="features.conv1")
        browser_sends(view, type="run", target=3)
        browser_sends(view, type="run", mode="forward", train=True)
        browser_sends(view, type="plot_step", kind="forward", step=1, call=0)
        browser_sends(view, type="plot_view", kind="forward", view="histogram")
        browser_sends(view, type="summary", field="act_norm", step=1)
        browser_sends(view, type="find_nonfinite")
        browser_sends(view, type="attribute", layer="features", method="gradcam", target="top")
        browser_sends(view, type="graph")

        def step() -> None:  # the user's own training step, in a cell
            model(torch.randn(2, 1, 32, 32)).sum().backward()
            opt.step()

        in_cell(shell, step)
        browser_sends(view, type="dismiss_error")

    replies = sent_by_kernel(view, clicks)
    return ex, replies


def test_a_sessions_payloads_and_replies_have_the_declared_shapes(ipython):
    ex, replies = _session(ipython)
    view = ex.view
    for name, shape in protocol.TRAITLETS.items():
        value = getattr(view, name)
        assert problems(value, shape, name) == []
    assert view.plots["items"] and view.summary["rows"] and view.graph["autograd"] and view.attribution["png"]
    assert view.training["ratios"]["rows"] and view.hooks and view.status["top"]
    assert len(replies) == 13 and [r["ok"] for r in replies].count(False) == 1
    ex.close()
    for reply in replies:
        assert problems(reply, protocol.Reply, "reply") == []


def test_every_traitlet_has_a_trait_of_the_declared_kind():
    containers = {list: traitlets.List, str: traitlets.Unicode, dict: traitlets.Dict}
    for name, shape in protocol.TRAITLETS.items():
        trait = ExplorerView.class_traits()[name]
        base = getattr(shape, "__origin__", None) or (dict if isinstance(shape, type) and shape is not str else shape)
        assert isinstance(trait, containers[base]), name
