"""The graph panel in a real JupyterLab: record the graph, see its ops, and keep the selection in sync with the tree."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator

from ._lab import Lab, show_tab

pytestmark = pytest.mark.e2e

MODEL_CELL = """
import torch
from collections import OrderedDict
from torch import nn
from hookwidgets import HookExplorer

torch.manual_seed(0)
model = nn.Sequential(OrderedDict(
    features=nn.Sequential(OrderedDict(conv=nn.Conv2d(3, 4, 3, padding=1), bn=nn.BatchNorm2d(4), act=nn.ReLU())),
    head=nn.Sequential(OrderedDict(pool=nn.AdaptiveAvgPool2d(2), flatten=nn.Flatten(), fc=nn.Linear(16, 5))),
)).eval()
ex = HookExplorer(model, example_inputs=torch.randn(2, 3, 8, 8))
ex
"""


def _selected_in_python(lab: Lab, path: str) -> str:
    with lab.kernel(path) as kernel:
        return kernel.evaluate_json("ex.view.selected")


def _wait_selected(lab: Lab, path: str, expected: str) -> None:
    """Python's `selected` becomes `expected` (the browser's save reaches the kernel asynchronously)."""
    for _ in range(50):
        if _selected_in_python(lab, path) == expected:
            return
        lab.page.wait_for_timeout(200)
    assert _selected_in_python(lab, path) == expected


def _ready(panel: Locator) -> None:
    panel.locator('.hw-graph-status[data-state="ready"]').wait_for(timeout=30_000)


def _find(panel, query: str) -> None:
    """Search the graph for ``query`` and wait until its first match is centred and the panel ready again."""
    search = panel.locator("input.hw-graph-search")
    search.fill(query)
    search.press("Enter")
    panel.locator(".hw-gmatch-current").first.wait_for(timeout=30_000)
    _ready(panel)


def test_record_the_graph_click_in_it_and_follow_the_tree(lab: Lab) -> None:
    path = lab.run_cells("graph_panel.ipynb", [MODEL_CELL], timeout=180)
    explorer = lab.page.locator(".hw-explorer")
    explorer.wait_for(timeout=30_000)
    show_tab(explorer, "graph")  # its first visit records the example inputs' graph: no click on Record graph
    panel = explorer.locator(".hw-graph-panel")
    _ready(panel)
    ops = set(panel.locator(".hw-gnode[data-op]").evaluate_all("els => els.map((e) => e.dataset.op)"))
    assert {"ConvolutionBackward0", "NativeBatchNormBackward0", "ReluBackward0", "AddmmBackward0"} <= ops
    labels = panel.locator('.hw-gnode[data-node-type="param"] .hw-glabel').all_text_contents()
    assert "features.conv.weight" in labels and "head.fc.bias" in labels
    conv = panel.locator('.hw-gnode[data-op="ConvolutionBackward0"]')
    _find(panel, "ConvolutionBackward0")  # Fit keeps text readable: the graph's search brings the node into view
    conv.hover()  # the tooltip is made on the first hover
    saved = conv.locator("> title").text_content()
    assert "saved for backward: 2 tensors" in saved and "input: 2×3×8×8 float32 1.5 KB" in saved
    panel.screenshot(path=str(lab.artifacts_dir / "graph-autograd.png"))

    # a module in the graph -> Python's selection and the tree's highlighted row
    panel.locator('.hw-gbox[data-path="features"] > .hw-gbox-label').click()
    _wait_selected(lab, path, "features")
    show_tab(explorer, "modules")
    explorer.locator('.hw-row.hw-selected[data-path="features"]').wait_for(timeout=10_000)
    show_tab(explorer, "graph")
    _ready(panel)
    panel.locator('.hw-gblock.hw-gselected[data-path="features"]').wait_for(timeout=10_000)  # it collapsed

    # a tree row -> the graph opens the collapsed cluster and highlights the module
    show_tab(explorer, "modules")
    explorer.locator('.hw-row[data-path="features.conv"]').click()
    _wait_selected(lab, path, "features.conv")
    show_tab(explorer, "graph")
    panel.locator('.hw-gblock.hw-gselected[data-path="features.conv"]').wait_for(timeout=30_000)
    assert panel.locator('.hw-gbox[data-path="features"]').count() == 1  # "features" opened again
    assert panel.locator(".hw-gselected").count() == 1

    # an autograd node -> its id is the selection (Fit first: the view is centred on features.conv)
    panel.locator("button.hw-graph-fit").click()
    panel.locator('.hw-gnode[data-op="AddmmBackward0"]').click()
    _wait_selected(lab, path, "head.fc/AddmmBackward0#0")
    explorer.locator('.hw-gnode.hw-gselected[data-op="AddmmBackward0"]').wait_for(timeout=10_000)

    # a node hook attached from Python shows as a badge on its node
    with lab.kernel(path) as kernel:
        kernel.evaluate("ex.attach('head.fc/AddmmBackward0#0', 'node')")
    panel.locator('.hw-gnode[data-op="AddmmBackward0"] .hw-gbadge[data-kind="node"]').wait_for(timeout=10_000)

    # the module dataflow view
    panel.locator('button.hw-graph-mode[data-mode="dataflow"]').click()
    _ready(panel)
    modules = panel.locator('.hw-gnode[data-node-type="module"]').evaluate_all("els => els.map((e) => e.dataset.path)")
    assert {"features.conv", "features.bn", "features.act", "head.pool", "head.flatten", "head.fc"} <= set(modules)
    assert panel.locator(".hw-gselected").get_attribute("data-path") == "head.fc"  # the node's module
    panel.screenshot(path=str(lab.artifacts_dir / "graph-dataflow.png"))


LONG_MODEL_CELL = """
import torch
from collections import OrderedDict
from torch import nn
from hookwidgets import HookExplorer

torch.manual_seed(0)
model = nn.Sequential(OrderedDict(
    stem=nn.Sequential(*[nn.Linear(4, 4) for _ in range(40)]),
    tail=nn.Sequential(*[nn.Linear(4, 4) for _ in range(40)]),
))
ex = HookExplorer(model, example_inputs=torch.randn(2, 4))
ex.graph()  # recorded before display: the panel opens with it
ex
"""

_ROW_IN_VIEW = """
(path) => {
  const tree = document.querySelector('.hw-explorer .hw-tree');
  const row = tree.querySelector(`.hw-row[data-path="${path}"]`);
  if (!row || !row.classList.contains('hw-selected')) return false;
  const outer = tree.getBoundingClientRect();
  const inner = row.getBoundingClientRect();
  return inner.top >= outer.top && inner.bottom <= outer.bottom;
}
"""


def test_a_module_selected_in_the_graph_is_scrolled_to_and_highlighted_in_the_tree(lab: Lab) -> None:
    path = lab.run_cells("graph_scroll.ipynb", [LONG_MODEL_CELL], timeout=180)
    explorer = lab.page.locator(".hw-explorer")
    panel = explorer.locator(".hw-graph-panel")
    assert explorer.locator('.hw-row[data-path="tail.35"]').count() == 0  # 83 rows, virtualized: far below
    show_tab(explorer, "graph")
    _ready(panel)

    # collapsed at the depth that fits: stem and tail are blocks; a click opens tail and selects it
    panel.locator('.hw-gblock[data-path="tail"]').click()
    _ready(panel)
    show_tab(explorer, "modules")
    lab.page.wait_for_function(_ROW_IN_VIEW, arg="tail", timeout=10_000)
    show_tab(explorer, "graph")
    # Fit keeps text readable, so 80 blocks do not all fit: the graph's search brings tail.35 into view
    search = panel.locator("input.hw-graph-search")
    search.fill("tail.35")
    search.press("Enter")
    panel.locator('.hw-gblock.hw-gmatch-current[data-path="tail.35"]').click()
    _wait_selected(lab, path, "tail.35")
    show_tab(explorer, "modules")
    lab.page.wait_for_function(_ROW_IN_VIEW, arg="tail.35", timeout=10_000)  # scrolled to, highlighted
    assert explorer.locator(".hw-tree").evaluate("(el) => el.scrollTop") > 0
    assert explorer.locator(".hw-row.hw-selected").count() == 1


BIG_MODEL_CELL = """
import torch
from collections import OrderedDict
from torch import nn
from hookwidgets import HookExplorer

torch.manual_seed(0)
model = nn.Sequential(OrderedDict(
    stem=nn.Sequential(*[nn.Linear(4, 4) for _ in range(40)]),
    tail=nn.Sequential(*[nn.Linear(4, 4) for _ in range(40)]),
    a_module_with_a_name_much_longer_than_any_box_in_the_graph=nn.Linear(4, 4),
))
ex = HookExplorer(model, example_inputs=torch.randn(2, 4))
ex.graph()
ex.attach("stem.0", "forward")
ex.attach("tail.1", "grad")
ex
"""

# Every SVG text of the panel: its size on screen, whether it lies inside the shape it labels, and its
# contrast (WCAG) against what it is drawn on: the canvas, the box frames around it, its own shape.
_TEXTS = """
(panel) => {
  const parse = (value) => {
    if (!value || value === 'none') return null;
    let m = value.match(/^rgba?\\(([^)]+)\\)$/);
    if (m) {
      const [r, g, b, a = 1] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
      return [r / 255, g / 255, b / 255, a];
    }
    m = value.match(/^color\\(srgb ([^)]+)\\)$/);
    if (m) {
      const [rgb, alpha] = m[1].split('/');
      const [r, g, b] = rgb.trim().split(/\\s+/).map(Number);
      return [r, g, b, alpha === undefined ? 1 : Number(alpha)];
    }
    throw new Error(`colour not understood: ${value}`);
  };
  const over = (top, under) => top === null ? under
    : [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const lum = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const svg = panel.querySelector('svg.hw-graph-canvas');
  const canvas = over(parse(getComputedStyle(svg).backgroundColor), [1, 1, 1, 1]);
  const frames = [...svg.querySelectorAll('.hw-gbox-frame')]
    .map((f) => [f.getBoundingClientRect(), parse(getComputedStyle(f).fill)]);
  const view = svg.getBoundingClientRect();
  return [...svg.querySelectorAll('text')].map((t) => {
    const box = t.getBoundingClientRect();
    const cx = (box.left + box.right) / 2;
    const cy = (box.top + box.bottom) / 2;
    let bg = canvas;
    for (const [r, fill] of frames) {
      if (cx >= r.left && cx <= r.right && cy >= r.top && cy <= r.bottom) bg = over(fill, bg);
    }
    const shape = t.parentElement.querySelector(':scope > rect');
    const frame = t.classList.contains('hw-gbox-label');
    if (shape && !frame) bg = over(parse(getComputedStyle(shape).fill), bg);
    const fg = over(parse(getComputedStyle(t).fill), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const s = shape?.getBoundingClientRect();
    const inside = !s || (box.left >= s.left - 0.5 && box.right <= s.right + 0.5);
    return {
      text: t.textContent, cls: t.getAttribute('class') || t.parentElement.parentElement.getAttribute('class'),
      px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a,
      contrast: (hi + 0.05) / (lo + 0.05), inside,
      shown: box.right > view.left && box.left < view.right && box.bottom > view.top && box.top < view.bottom,
    };
  });
}
"""


# Toolbar controls whose box is not inside the panel's.
_TOOLBAR_OUTSIDE = """
(panel) => {
  const outer = panel.getBoundingClientRect();
  return [...panel.querySelectorAll('.hw-graph-toolbar button, .hw-graph-toolbar input, .hw-graph-search-count')]
    .filter((el) => {
      const r = el.getBoundingClientRect();
      return r.left < outer.left || r.right > outer.right + 0.5 || r.top < outer.top || r.bottom > outer.bottom;
    })
    .map((el) => el.className);
}
"""


def _expand_every_level(panel: Locator, path: str) -> None:
    """Shift-click the module's block (collapsing its box first when it is open)."""
    box = panel.locator(f'.hw-gbox[data-path="{path}"] > .hw-gbox-label')
    if box.count():
        box.dispatch_event("click")
        _ready(panel)
    panel.locator(f'.hw-gblock[data-path="{path}"]').dispatch_event("click", {"shiftKey": True})
    _ready(panel)


def _low_contrast(panel: Locator) -> list[dict]:
    return [t for t in panel.evaluate(_TEXTS) if t["contrast"] < 4.5]


def test_a_big_graph_fits_readably_with_a_minimap_finds_nodes_and_keeps_its_text_readable(lab: Lab) -> None:
    lab.run_cells("graph_big.ipynb", [BIG_MODEL_CELL], timeout=180)
    page = lab.page
    page.set_viewport_size({"width": 1400, "height": 1000})
    show_tab(page.locator(".hw-explorer"), "graph")
    panel = page.locator(".hw-explorer .hw-graph-panel")
    _ready(panel)
    canvas = panel.locator("svg.hw-graph-canvas")

    # search: a module inside a collapsed block is revealed, centred and marked
    search = panel.locator("input.hw-graph-search")
    search.fill("tail.37")
    assert panel.locator(".hw-graph-search-count").text_content() == "3 matches"  # the module, its weight, its bias
    search.press("Enter")
    current = panel.locator('.hw-gmatch-current[data-path="tail.37"]')
    current.wait_for(timeout=30_000)
    _ready(panel)
    assert panel.locator(".hw-graph-search-count").text_content() == "1 / 3"
    box, view = current.bounding_box(), canvas.bounding_box()
    assert box and view
    assert view["x"] <= box["x"] and box["x"] + box["width"] <= view["x"] + view["width"]
    assert view["y"] <= box["y"] and box["y"] + box["height"] <= view["y"] + view["height"]
    centre = (box["y"] + box["height"] / 2) - (view["y"] + view["height"] / 2)
    assert abs(centre) < 40, f"tail.37 is {centre:.0f} px from the canvas's middle"

    # ops by name, Enter / Shift+Enter walk the matches, Escape clears
    search.fill("AddmmBackward")
    assert panel.locator(".hw-graph-search-count").text_content() == "81 matches"
    search.press("Enter")
    search.press("Enter")
    _ready(panel)
    assert panel.locator(".hw-graph-search-count").text_content() == "2 / 81"
    search.press("Shift+Enter")
    assert panel.locator(".hw-graph-search-count").text_content() == "1 / 81"
    panel.locator(".hw-gmatch-current").wait_for(timeout=30_000)
    search.press("Escape")
    assert search.input_value() == ""
    assert panel.locator(".hw-graph-search-count").text_content() == ""
    assert panel.locator(".hw-gmatch").count() == 0

    # every level open, drawn again (a view drawn anew is fitted): every text at 9 px or more on screen, the rest on
    # the minimap (clicks dispatched: what they land on may be scrolled out of the canvas, which a click cannot reach)
    _expand_every_level(panel, "tail")
    _expand_every_level(panel, "stem")
    assert panel.locator('.hw-gnode[data-op="AddmmBackward0"]').count() == 81
    panel.locator('button.hw-graph-mode[data-mode="dataflow"]').click()
    _ready(panel)
    panel.locator('button.hw-graph-mode[data-mode="autograd"]').click()
    _ready(panel)
    texts = panel.evaluate(_TEXTS)
    shown = [t for t in texts if t["shown"]]
    assert shown, "no text in view after Fit"
    assert min(t["px"] for t in shown) >= 9 - 0.01, sorted(shown, key=lambda t: t["px"])[:3]
    overflowing = [t for t in texts if not t["inside"]]
    assert not overflowing, overflowing[:5]
    long_name = panel.locator('.hw-gnode[data-node-type="param"] .hw-glabel', has_text="…").first
    assert "a_module_with_a_name_much_longer_than_any_box_in_the_graph" not in (long_name.text_content() or "")
    minimap = panel.locator("svg.hw-graph-minimap")
    assert minimap.is_visible()
    map_box, port = minimap.bounding_box(), panel.locator(".hw-gminimap-view").bounding_box()
    assert map_box and port and port["height"] < map_box["height"] / 2  # the view is a part of the whole
    panel.screenshot(path=str(lab.artifacts_dir / "graph-big-fit.png"))

    # a press on the minimap's bottom moves the view to the graph's end
    before = panel.locator(".hw-graph-layer").get_attribute("transform")
    minimap.click(position={"x": map_box["width"] / 2, "y": map_box["height"] - 2})
    assert panel.locator(".hw-graph-layer").get_attribute("transform") != before
    map_after, port_after = minimap.bounding_box(), panel.locator(".hw-gminimap-view").bounding_box()
    assert map_after and port_after  # (the click scrolled the page: positions relative to the map)
    assert port_after["y"] - map_after["y"] > port["y"] - map_box["y"] + map_box["height"] / 3

    # Fit: the whole graph in the canvas, however small its text; the panel narrower: Fit again by itself (the graph
    # stays centred across the canvas)
    panel.locator("button.hw-graph-fit").click()
    layer, view = panel.locator(".hw-graph-layer").bounding_box(), canvas.bounding_box()
    assert layer and view and view["y"] <= layer["y"] and layer["y"] + layer["height"] <= view["y"] + view["height"]
    page.set_viewport_size({"width": 900, "height": 1000})
    page.wait_for_timeout(300)
    layer, view = panel.locator(".hw-gboxes").bounding_box(), canvas.bounding_box()
    assert layer and view
    middle = (layer["x"] + layer["width"] / 2) - (view["x"] + view["width"] / 2)
    assert abs(middle) < 4, f"graph {middle:.0f} px off centre after the resize"
    for width in (900, 600):  # the toolbar wraps: every control inside the panel
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_timeout(200)
        outside = panel.evaluate(_TOOLBAR_OUTSIDE)
        assert not outside, f"at {width} px: {outside}"
    page.set_viewport_size({"width": 1400, "height": 1000})

    # contrast of every SVG text (labels, details, box names, badges) in light and dark themes
    panel.locator('.hw-gbadge[data-kind="grad"]').wait_for(timeout=10_000)
    assert panel.locator('.hw-gnode[data-node-type="param"]').count() > 0
    assert not _low_contrast(panel), _low_contrast(panel)[:5]
    from .test_transformers import _theme

    _theme(lab, "JupyterLab Dark")
    try:
        page.wait_for_timeout(200)
        assert not _low_contrast(panel), _low_contrast(panel)[:5]
        # collapsed stem: a "+1" badge
        panel.locator('.hw-gbox[data-path="stem"] > .hw-gbox-label').dispatch_event("click")
        _ready(panel)
        panel.locator(".hw-gbadge-inside").first.wait_for(timeout=10_000)
        assert not _low_contrast(panel), _low_contrast(panel)[:5]
        panel.screenshot(path=str(lab.artifacts_dir / "graph-big-dark.png"))
    finally:
        _theme(lab, "JupyterLab Light")
