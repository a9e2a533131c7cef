"""The built bundle's requests in a bare Chromium page, with a stand-in for anywidget's model: a toggle waits for
the kernel's one reply to its request, however late it comes, and says so when it is late."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from tests.e2e._browser import STATIC, widget_page

pytestmark = pytest.mark.e2e


# A stand-in for anywidget's model whose kernel never answers on its own: the test sends each reply.
_SETUP = """
async (bundle) => {
  const url = URL.createObjectURL(new Blob([bundle], {type: 'text/javascript'}));
  const widget = (await import(url)).default;
  const state = {
    tree: {path: '', name: 'Net', cls: 'Net', trainable: 2, frozen: 0, shape: [1, 2], dtype: 'float32', children: [
      {path: 'a', name: 'a', cls: 'Linear', trainable: 2, frozen: 0, shape: [1, 2], dtype: 'float32', children: []},
    ]},
    selected: 'a',
    hook_kinds: [
      {kind: 'forward', name: 'forward', family: 'module', phase: 'forward', tip: 'the output', badge: 'fwd',
       every_layer: false},
      {kind: 'grad', name: 'grad', family: 'module', phase: 'backward', tip: 'the gradient', badge: 'grad',
       every_layer: false},
    ],
    selection: {path: 'a', family: 'module', kinds: ['forward', 'grad'], details: [], params: [], code: '',
                problem: ''},
    status: {state: 'idle', message: '', top: []}, plots: {path: null, items: []}, memory: {}, diagnostics: [],
    summary: {}, training: {visible: false, ratios: null, ddp: null}, attribution: {}, error: '',
    graph: {autograd: null, dataflow: null, error: ''}, hooks: [],
  };
  const listeners = new Map();
  const model = {
    sent: [],
    get: (key) => state[key],
    set(key, value) { state[key] = value; for (const cb of [...(listeners.get('change:' + key) ?? [])]) cb(); },
    save_changes() {},
    send(message) { this.sent.push(message); },
    on(event, cb) { if (!listeners.has(event)) listeners.set(event, new Set()); listeners.get(event).add(cb); },
    off(event, cb) { listeners.get(event)?.delete(cb); },
    fromKernel(message) { for (const cb of [...(listeners.get('msg:custom') ?? [])]) cb(message, []); },
  };
  const el = document.createElement('div');
  document.body.append(el);
  window.hw = {model, cleanup: widget.render({model, el})};
}
"""

_TOGGLE = 'input.hw-toggle[data-kind="grad"]'


@pytest.fixture
def page(chromium_browser: Browser) -> Iterator[Page]:
    """A blank page with the widget's CSS and a controllable clock; page errors collected on `page.hw_errors`."""
    with widget_page(chromium_browser, clock=True) as page:
        yield page


def _toggle_state(page: Page) -> dict:
    return page.evaluate(
        f"""() => {{
          const input = document.querySelector('{_TOGGLE}');
          const wait = document.querySelector('.hw-kernel-wait');
          return {{checked: input.checked, disabled: input.disabled, waiting: !wait.hidden}};
        }}"""
    )


def test_a_toggle_waits_for_its_reply_and_says_when_the_kernel_is_late(page: Page) -> None:
    page.evaluate(_SETUP, (STATIC / "widget.js").read_text())
    page.locator(_TOGGLE).check()
    (sent,) = page.evaluate("() => hw.model.sent")
    assert {k: sent[k] for k in ("type", "path", "kind", "action")} == {
        "type": "attach",
        "path": "a",
        "kind": "grad",
        "action": "capture",
    }
    assert isinstance(sent["request_id"], str) and "hook" not in sent
    assert _toggle_state(page) == {"checked": True, "disabled": True, "waiting": False}

    # other state changes are no answer: the toggle keeps waiting for its reply
    page.evaluate("() => hw.model.set('hooks', [{path: 'b', kind: 'forward', action: 'capture', fired: 1}])")
    page.evaluate("() => hw.model.set('error', 'an error of something else')")
    assert _toggle_state(page) == {"checked": True, "disabled": True, "waiting": False}

    page.clock.fast_forward(11_000)  # a cell keeps the kernel busy: no answer for 11 s, and none is made up
    assert _toggle_state(page) == {"checked": True, "disabled": True, "waiting": True}
    page.clock.fast_forward(60_000)
    assert _toggle_state(page)["disabled"] is True

    # the kernel answers: the state it changed first, then the reply
    page.evaluate("() => hw.model.set('hooks', [{path: 'a', kind: 'grad', action: 'capture', fired: 0}])")
    page.evaluate(
        "(id) => hw.model.fromKernel({type: 'reply', request_id: id, ok: true, error: ''})", sent["request_id"]
    )
    page.wait_for_function(f"() => !document.querySelector('{_TOGGLE}').disabled")
    assert _toggle_state(page) == {"checked": True, "disabled": False, "waiting": False}
    assert page.locator(".hw-row[data-path='a'] .hw-badge[data-kind='grad']").count() == 1

    # a failed request: the error reply gives the toggle back, showing the hooks as they are
    page.locator(_TOGGLE).uncheck()
    detach = page.evaluate("() => hw.model.sent.at(-1)")
    assert detach["type"] == "detach" and detach["kind"] == "grad" and detach["request_id"] != sent["request_id"]
    assert _toggle_state(page)["disabled"] is True
    page.evaluate(
        "(id) => hw.model.fromKernel({type: 'reply', request_id: id, ok: false, error: 'ValueError: no'})",
        detach["request_id"],
    )
    page.wait_for_function(f"() => !document.querySelector('{_TOGGLE}').disabled")
    assert _toggle_state(page) == {"checked": True, "disabled": False, "waiting": False}  # still attached
    assert page.hw_errors == []  # type: ignore[attr-defined]


def test_a_toggle_stays_the_same_element_when_the_selections_code_changes(page: Page) -> None:
    page.evaluate(_SETUP, (STATIC / "widget.js").read_text())
    page.locator(_TOGGLE).check()
    (sent,) = page.evaluate("() => hw.model.sent")
    page.evaluate("(toggle) => { window.clicked = document.querySelector(toggle); }", _TOGGLE)
    # the kernel's answer: the hooks, a selection whose code now shows the new hook, then the reply
    page.evaluate("() => hw.model.set('hooks', [{path: 'a', kind: 'grad', action: 'capture', fired: 0}])")
    page.evaluate("() => hw.model.set('selection', {...hw.model.get('selection'), code: 'handle = ...'})")
    page.evaluate(
        "(id) => hw.model.fromKernel({type: 'reply', request_id: id, ok: true, error: ''})", sent["request_id"]
    )
    page.wait_for_function(f"() => !document.querySelector('{_TOGGLE}').disabled")
    kept = page.evaluate(
        """(toggle) => ({same: window.clicked === document.querySelector(toggle),
                        checked: window.clicked.checked, disabled: window.clicked.disabled})""",
        _TOGGLE,
    )
    assert kept == {"same": True, "checked": True, "disabled": False}  # a script holding it sees it settle
    # another place's selection brings its own toggles
    page.evaluate("() => hw.model.set('selection', {...hw.model.get('selection'), path: 'a', kinds: ['forward']})")
    assert page.locator("input.hw-toggle").count() == 1
    assert page.hw_errors == []  # type: ignore[attr-defined]


def test_graph_nodes_say_their_type_in_data_node_type_and_data_kind_names_hook_kinds_only(page: Page) -> None:
    page.evaluate(_SETUP, (STATIC / "widget.js").read_text())
    graph = {
        "autograd": {
            "ids": ["a/AccumulateGrad#weight", "a/AddmmBackward0#0"],
            "op": [0, 1],
            "ops": ["AccumulateGrad", "AddmmBackward0"],
            "module": [1, 1],
            "modules": ["", "a"],
            "parents": [-1, 0],
            "params": [[0, "a.weight"]],
            "saved": [],
            "edges": [[1, 0]],
            "outputs": [1],
        },
        "dataflow": None,
        "error": "",
    }
    page.evaluate("(g) => hw.model.set('graph', g)", graph)
    page.evaluate(
        "() => hw.model.set('hooks', [{path: 'a/AddmmBackward0#0', kind: 'node', action: 'capture', fired: 0}])"
    )
    page.clock.run_for(5_000)  # layout and drawing run in timed slices
    page.wait_for_function("() => document.querySelectorAll('g.hw-gnode[data-node-type]').length >= 2")
    types = page.evaluate(
        "() => [...document.querySelectorAll('g.hw-gnode')].map((g) => [g.dataset.nodeType, g.dataset.kind ?? null])"
    )
    assert sorted(types) == [["op", None], ["param", None]]
    kinds = page.evaluate("() => [...document.querySelectorAll('[data-kind]')].map((e) => e.dataset.kind)")
    assert set(kinds) <= {"forward", "grad", "node"}  # toggles, and the node hook's badge
