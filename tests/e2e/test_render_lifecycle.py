"""The built bundle's `render()` in a bare Chromium page, with a stand-in for anywidget's model: two views of
one model stay in step, and each view's cleanup removes every listener it added and its elements."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from tests.e2e._browser import STATIC, widget_page

pytestmark = pytest.mark.e2e


# A stand-in for anywidget's model: get/set/save_changes/send/on/off, counting listeners per event.
_SETUP = """
async (bundle) => {
  const url = URL.createObjectURL(new Blob([bundle], {type: 'text/javascript'}));
  const widget = (await import(url)).default;
  const node = (path, cls, children = []) => ({
    path, name: path === '' ? cls : path.split('.').pop(), cls, trainable: 2, frozen: 0,
    shape: [1, 2], dtype: 'float32', children,
  });
  const evil = '<img src=x onerror=alert(1)>';
  const state = {
    tree: node('', 'Net', [node('a', 'Linear'), node(evil, 'Linear'), node('c', 'Sequential', [node('c.0', 'ReLU')])]),
    selected: '', selection: {}, status: {state: 'idle', message: ''},
    hook_kinds: [{kind: 'forward', name: 'forward', family: 'module', phase: 'forward', tip: 'the output',
                  badge: 'fwd', every_layer: false}],
    plots: {path: null, items: []}, memory: {}, diagnostics: [], summary: {}, attribution: {},
    error: '', graph: {autograd: null, dataflow: null, error: ''},
    hooks: [{path: 'a', kind: 'forward', action: 'capture', fired: 3, error: null, foreign: false}],
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
    listening: () => [...listeners.values()].reduce((n, set) => n + set.size, 0),
  };
  const cells = [document.createElement('div'), document.createElement('div')];
  cells.forEach((cell) => document.body.append(cell));
  const cleanups = cells.map((el) => widget.render({model, el}));
  window.hw = {model, cells, cleanups, evil};
  return typeof cleanups[0];
}
"""


@pytest.fixture
def page(chromium_browser: Browser) -> Iterator[Page]:
    """A blank page with the widget's CSS; page errors collected on `page.hw_errors`."""
    with widget_page(chromium_browser) as page:
        yield page


def test_two_views_stay_in_step_and_each_cleanup_removes_its_listeners(page: Page) -> None:
    assert page.evaluate(_SETUP, (STATIC / "widget.js").read_text()) == "function"
    page.wait_for_function("() => hw.cells.every((c) => c.querySelectorAll('.hw-row').length === 5)")
    per_view = page.evaluate("() => hw.model.listening()") / 2
    assert per_view >= 10  # every panel listens: header, tree, inspector, graph, summary…
    names = page.evaluate(
        "() => hw.cells.map((c) => [...c.querySelectorAll('.hw-row .hw-name')].map((e) => e.textContent))"
    )
    assert all(page.evaluate("() => hw.evil") in row for row in names)  # the name as text in both views
    assert page.evaluate("() => document.querySelectorAll('img[src=\"x\"]').length") == 0

    # a click in the first view selects in both (the model is the one source of truth)
    page.locator(".hw-explorer").first.locator('.hw-row[data-path="c.0"]').click()
    for cell in (0, 1):
        page.wait_for_function(
            "(i) => hw.cells[i].querySelector('.hw-row.hw-selected')?.dataset.path === 'c.0'", arg=cell
        )
    page.evaluate("() => hw.model.set('hooks', [{path: 'c.0', kind: 'forward', action: 'capture', fired: 1}])")
    badges = page.evaluate(
        "() => hw.cells.map((c) => c.querySelectorAll('[data-path=\"c.0\"] .hw-badge[data-kind=forward]').length)"
    )
    assert badges == [1, 1]

    # the first view's cleanup: its listeners and elements go, the second view goes on
    page.evaluate("() => hw.cleanups[0]()")
    assert page.evaluate("() => hw.model.listening()") == per_view
    assert page.evaluate("() => hw.cells[0].childElementCount") == 0
    page.evaluate("() => hw.model.set('status', {state: 'idle', message: 'after cleanup'})")
    assert page.locator(".hw-status").all_text_contents() == ["after cleanup"]

    page.evaluate("() => hw.cleanups[1]()")
    assert page.evaluate("() => hw.model.listening()") == 0
    assert page.evaluate("() => document.querySelectorAll('.hw-explorer').length") == 0
    page.evaluate("() => hw.model.set('selected', 'a')")  # nothing listens, nothing breaks
    page.wait_for_timeout(100)
    assert page.hw_errors == []  # type: ignore[attr-defined]
