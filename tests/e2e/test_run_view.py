"""The run view in a real JupyterLab: ``hookwidgets.open_run(log_dir)`` of a log written in the kernel shows the
module tree with the first NaN/Inf marked and stated, a heatmap that fits a 600 px window and reads the log's value
under the mouse, sharp at a pixel ratio of 2, legible in light and dark, and a step written after it is shown."""

from __future__ import annotations

from typing import Any

import nbformat
import pytest
from playwright.sync_api import Browser, Locator

from ._browser import STATIC, widget_page
from ._lab import Lab
from ._server import JupyterServer
from .test_layout import OUTSIDE, _left_area
from .test_theme import LOW_CONTRAST
from .test_transformers import _theme

pytestmark = pytest.mark.e2e

# Two ranks of a data-parallel job, simulated in one process (each names itself by RANK and writes its own log, as a
# launcher's ranks do); rank 1's batch of the third step holds a NaN, which reaches its first Linear's output.
WRITE_LOG = """
import copy
import os
import tempfile
import torch
from torch import nn
from hookwidgets.core import Explorer

torch.manual_seed(0)
log_dir = tempfile.mkdtemp(prefix="hw-run-")
base = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Linear(8, 8), nn.Tanh()), nn.Linear(8, 2))
ranks = []
for rank in (0, 1):
    os.environ.update(RANK=str(rank), WORLD_SIZE="2")
    model = copy.deepcopy(base)
    ex = Explorer(model)
    ex.attach("", ["global_forward", "global_grad"], action="stats")
    ex.record_to(log_dir)
    ranks.append((model, ex))
del os.environ["RANK"], os.environ["WORLD_SIZE"]

def train_step(k):
    for rank, (model, ex) in enumerate(ranks):
        x = torch.randn(3, 4)
        if k == 2 and rank == 1:
            x[0, 0] = float("nan")
        model.zero_grad()
        model(x).sum().backward()
        ex.run_log.flush()

for k in range(5):
    train_step(k)
"""
OPEN = """
import hookwidgets
run = hookwidgets.open_run(log_dir)
run
"""
# What the page should read under the mouse: the log's norm of each forward layer in each step over both ranks, and
# on each rank at the first NaN's step, as the page writes a number (4 significant digits).
EXPECTED = """
rows = [k for k, layer in enumerate(run.layers) if layer["kind"] == "global_forward"]
norms = run.layer_steps("norm")[rows].astype("float32")
first = run.first_nonfinite()
expected = {
    "paths": [run.layers[k]["path"] for k in rows],
    "steps": run.steps,
    "text": [[f"{float(v):.4g}" for v in row] for row in norms],
    "first": {key: first[key] for key in ("step", "rank", "path", "kind", "phase")},
    "ranks": [[f"{float(v):.4g}" for v in row] for row in run.rank_layers(first["step"], "norm")[:, rows]],
}
"""
# The canvas's device pixels against its CSS size.
PIXELS = "(canvas) => [window.devicePixelRatio, canvas.width, canvas.height, canvas.clientWidth, canvas.clientHeight]"
SIDEWAYS = "(root) => [root.scrollWidth, root.clientWidth, document.scrollingElement.scrollWidth, innerWidth]"
# Each grid's row labels and step ticks as shown: text, full name, box; and the view's box.
LABELS = """(root) => {
  const box = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const of = (sel) => [...root.querySelectorAll(sel)].map(
    (el) => ({text: el.textContent, title: el.title, box: box(el)}));
  return {view: box(root), heat: of('.hw-run-heatmap .hw-grid-rowlabel'), ranks: of('.hw-run-ranks .hw-grid-rowlabel'),
          ticks: of('.hw-run-heatmap .hw-grid-tick').map((t) => t.text)};
}"""
NARROW = {"width": 600, "height": 1400}  # a narrow window, tall enough that the whole view is in the screenshot


def _hover(canvas: Locator, row: int, column: int, rows: int, columns: int) -> None:
    """Move the mouse over the middle of a cell of ``canvas``, a grid of ``rows`` × ``columns``."""
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box is not None
    canvas.page.mouse.move(
        box["x"] + (column + 0.5) * box["width"] / columns, box["y"] + (row + 0.5) * box["height"] / rows
    )


def _check_labels(labels: dict[str, Any], paths: list[str], steps: list[int], where: str) -> None:
    """The heatmap's rows named by layer path (cut from the left to fit, the full path its tooltip), the ranks view's
    "rank 0", "rank 1", the steps under their columns; every label whole inside the view."""
    left, top, right, bottom = labels["view"]
    heat = labels["heat"]
    assert heat and all(label["title"] in [p or "(model)" for p in paths] for label in heat), where
    assert all(label["title"].endswith(label["text"].removeprefix("…")) and label["text"] for label in heat), where
    assert [label["text"] for label in labels["ranks"]] == ["rank 0", "rank 1"], where
    assert labels["ticks"] == [str(step) for step in steps], where
    for label in heat + labels["ranks"]:
        x0, y0, x1, y1 = label["box"]
        assert left <= x0 and x1 <= right and top <= y0 and y1 <= bottom, (where, label)


def _narrow_checks(lab: Lab, ratio: int, grid: tuple[int, int], paths: list[str], steps: list[int]) -> None:
    """At 600 px, light then dark: inside the notebook's pane with no sideways scroll, each canvas as many device
    pixels as its CSS box times ``ratio`` (sharp), rows and steps labelled inside it, text at 4.5:1; a screenshot of
    each, a cell hovered."""
    page = lab.page
    page.set_viewport_size(NARROW)
    _left_area(lab, shown=False)  # a narrow screen: the file browser closed, as a user there keeps it
    view = page.locator(".hw-run")
    heat = view.locator(".hw-run-heatmap canvas.hw-grid-canvas")
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        _theme(lab, theme)
        page.wait_for_timeout(300)  # the notebook lays out at the new width
        where = f"{theme}, 600 px, pixel ratio {ratio}"
        assert view.evaluate(OUTSIDE)["outside"] == [], where
        wide, width, page_wide, window = view.evaluate(SIDEWAYS)
        assert wide <= width and page_wide <= window, where
        pane = view.bounding_box()
        assert pane is not None and pane["width"] <= 600, where
        for canvas in (heat, view.locator(".hw-run-ranks canvas.hw-grid-canvas")):
            dpr, w, h, css_w, css_h = canvas.evaluate(PIXELS)
            assert dpr == ratio and w == round(css_w * ratio) and h == round(css_h * ratio), where
            assert css_w >= 0.8 * pane["width"], where  # the grids take the pane's width below the tree
        _check_labels(view.evaluate(LABELS), paths, steps, where)
        low = view.evaluate(LOW_CONTRAST)
        assert low == [], f"text under 4.5:1, {where}:\n" + "\n".join(low)
        _hover(heat, 0, 0, *grid)
        view.scroll_into_view_if_needed()
        shade = "light" if theme.endswith("Light") else "dark"
        view.screenshot(path=str(lab.artifacts_dir / f"run-view-{shade}-600-x{ratio}.png"))


def test_the_run_view_shows_a_logs_layers_steps_and_ranks_and_follows_it(
    lab: Lab, chromium_browser: Browser, jupyter_server: JupyterServer
) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(WRITE_LOG), nbformat.v4.new_code_cell(OPEN)])
    path = lab.write_notebook("run-view.ipynb", nb)
    lab.open_notebook(path)
    lab.run_all(path, timeout=180)
    page = lab.page
    page.set_viewport_size({"width": 1400, "height": 1400})
    view = page.locator(".hw-run")
    view.wait_for(timeout=30_000)
    heat = view.locator(".hw-run-heatmap canvas.hw-grid-canvas")
    readout = view.locator(".hw-run-heatmap .hw-grid-readout")
    with lab.kernel(path) as kernel:
        kernel.evaluate(EXPECTED)
        expected: dict[str, Any] = kernel.evaluate_json("expected")
        first, paths, steps = expected["first"], expected["paths"], expected["steps"]

        # the log's module tree, the first NaN/Inf's module marked and stated
        view.locator(f'.hw-row.hw-row-failed[data-path="{first["path"]}"]').wait_for(timeout=10_000)
        assert view.locator('.hw-row[data-path="1.0"]').count() == 1  # a nested module, its parent open
        assert view.locator(".hw-run-nonfinite").inner_text() == (
            f"First NaN/Inf: step {first['step']}, rank {first['rank']}, in {first['path']} "
            f"({first['kind']}, {first['phase']})"
        )
        assert view.locator(".hw-run-counts").inner_text() == f"2 ranks · 5 steps ({steps[0]}–{steps[-1]})"
        assert view.locator("select.hw-run-kind").input_value() == first["kind"]

        # the value under the mouse is the log's, with no kernel round trip
        for row, column in ((0, 0), (len(paths) - 1, len(steps) - 1), (1, steps.index(first["step"]))):
            _hover(heat, row, column, len(paths), len(steps))
            held = " · held NaN/Inf" if steps[column] == first["step"] else ""
            name = paths[row] or "(model)"  # the root module, as the page names it
            text = f"layer {name} · step {steps[column]} · norm = {expected['text'][row][column]}{held}"
            assert readout.inner_text() == text

        # the ranks view opens at the first NaN's step: rank 1's value there, under the mouse
        ranks = view.locator(".hw-run-ranks canvas.hw-grid-canvas")
        _hover(ranks, 1, 0, 2, len(paths))
        rank_text = f"rank 1 · layer {paths[0] or '(model)'} · norm = {expected['ranks'][1][0]}"
        assert view.locator(".hw-run-ranks .hw-grid-readout").inner_text() == rank_text + " · held NaN/Inf"

        # a click on a step's column shows that step per rank
        _hover(heat, 0, 1, len(paths), len(steps))
        page.mouse.down()
        page.mouse.up()
        ranks_title = view.locator(".hw-run-ranks .hw-grid-title")
        ranks_title.filter(has_text=f"at step {steps[1]}").wait_for(timeout=10_000)

        # the heatmap of one rank: rank 0 stayed finite
        view.locator("select.hw-run-rank").select_option("0")
        heat_title = view.locator(".hw-run-heatmap .hw-grid-title")
        heat_title.filter(has_text="on rank 0").wait_for(timeout=10_000)
        view.locator("select.hw-run-rank").select_option("all")
        heat_title.filter(has_text="over all ranks").wait_for(timeout=10_000)

        # a step written after the view opened reaches it
        kernel.evaluate("train_step(5)")
        view.locator(".hw-run-counts").filter(has_text="6 steps").wait_for(timeout=15_000)
        view.locator(".hw-run-heatmap .hw-grid-tick").filter(has_text=str(steps[-1] + 1)).wait_for(timeout=5_000)

    grid = (len(paths), len(steps) + 1)
    try:
        _narrow_checks(lab, 1, grid, paths, [*steps, steps[-1] + 1])
        # a HiDPI screen: the same notebook in a page at two device pixels per CSS pixel (it runs again)
        context = chromium_browser.new_context(viewport=NARROW, device_scale_factor=2)
        try:
            hidpi = Lab(context.new_page(), jupyter_server, lab.artifacts_dir)
            hidpi.page.set_default_timeout(30_000)
            hidpi.open_notebook(path)
            hidpi.run_all(path, timeout=180)
            hidpi.page.locator(".hw-run .hw-run-heatmap canvas.hw-grid-canvas").wait_for(timeout=30_000)
            _narrow_checks(hidpi, 2, (len(paths), len(steps)), paths, steps)
            _theme(hidpi, "JupyterLab Light")
        finally:
            context.close()
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
        _left_area(lab, shown=True)
        _theme(lab, "JupyterLab Light")


# The bundle's render() in a bare page with a stand-in for a run view's model: a module named like markup, an error.
_BARE = """
async (bundle) => {
  const url = URL.createObjectURL(new Blob([bundle], {type: 'text/javascript'}));
  const widget = (await import(url)).default;
  const evil = '<img src=x onerror=alert(1)>';
  const node = (path, cls, children = []) => ({
    path, name: path === '' ? cls : path, cls, trainable: 0, frozen: 0, packed: 0, shape: null, dtype: null, children,
  });
  const cells = (n, flag) => {
    const values = new DataView(new ArrayBuffer(4 * n));
    const flags = new DataView(new ArrayBuffer(n));
    for (let i = 0; i < n; i++) { values.setFloat32(4 * i, i + 1, true); flags.setUint8(i, flag); }
    return {values, flags};
  };
  const state = {
    tree: node('', 'Net', [node(evil, 'Linear')]), selected: '', kind: '', field: '', step: -1, error: '',
    run: {source: evil, ranks: [0, 1], steps: [1, 2], kinds: ['global_forward'], kind: 'global_forward',
          fields: ['norm'], field: 'norm', step: 2, notes: [evil], live: true, message: '',
          first_nonfinite: {step: 2, rank: 1, path: evil, kind: 'global_forward', phase: 'forward'}},
    heatmap: {title: evil, row_name: 'layer', column_name: 'step', rows: [evil], columns: ['1', '2'],
              ...cells(2, 1), mark: [0, 1]},
    ranks_view: {title: '', row_name: 'rank', column_name: 'layer', rows: ['0', '1'], columns: [evil],
                 ...cells(2, 2), mark: [1, 0]},
  };
  const listeners = new Map();
  const model = {
    get: (key) => state[key],
    set(key, value) { state[key] = value; for (const cb of [...(listeners.get('change:' + key) ?? [])]) cb(); },
    save_changes() {}, send() {},
    on(event, cb) { if (!listeners.has(event)) listeners.set(event, new Set()); listeners.get(event).add(cb); },
    off(event, cb) { listeners.get(event)?.delete(cb); },
    listening: () => [...listeners.values()].reduce((n, set) => n + set.size, 0),
  };
  const cell = document.createElement('div');
  document.body.append(cell);
  const cleanup = widget.render({model, el: cell});
  window.hw = {model, cleanup, evil};
}
"""


def test_the_run_views_names_are_text_its_error_shown_and_its_cleanup_complete(chromium_browser: Browser) -> None:
    with widget_page(chromium_browser) as page:
        page.evaluate(_BARE, (STATIC / "widget.js").read_text())
        evil = page.evaluate("() => hw.evil")
        view = page.locator(".hw-run")
        view.locator(".hw-row.hw-row-failed").wait_for()
        assert view.locator(".hw-row.hw-row-failed .hw-name").inner_text() == evil  # marked, named as text
        assert view.locator(".hw-run-source").inner_text() == evil
        assert view.locator(".hw-run-notes").inner_text() == evil
        assert view.locator(".hw-run-heatmap .hw-grid-title").inner_text() == evil
        assert view.locator(".hw-run-nonfinite").inner_text().endswith(f"in {evil} (global_forward, forward)")
        _hover(view.locator(".hw-run-ranks canvas.hw-grid-canvas"), 1, 0, 2, 1)
        assert (
            view.locator(".hw-run-ranks .hw-grid-readout").inner_text()
            == f"rank 1 · layer {evil} · norm = 2 · held NaN/Inf"
        )
        assert page.evaluate("() => document.querySelectorAll('img[src=\"x\"]').length") == 0

        assert view.locator(".hw-error").is_hidden()
        page.evaluate("() => hw.model.set('error', 'could not read the run log: OSError: gone')")
        assert view.locator(".hw-error").inner_text() == "could not read the run log: OSError: gone"

        page.evaluate("() => hw.cleanup()")
        assert page.evaluate("() => hw.model.listening()") == 0
        assert page.evaluate("() => document.querySelectorAll('.hw-run').length") == 0
        page.evaluate("() => hw.model.set('run', {})")  # nothing listens, nothing breaks
        assert page.hw_errors == []  # type: ignore[attr-defined]
