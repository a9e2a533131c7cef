"""The graph panel in a real JupyterLab: record the graph, see its ops, and keep the selection in sync with the tree."""

from __future__ import annotations

import nbformat
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


def test_record_the_graph_click_in_it_and_follow_the_tree(lab: Lab) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(MODEL_CELL)])
    path = lab.write_notebook("graph_panel.ipynb", nb)
    lab.open_notebook(path)
    lab.run_all(path, timeout=180)
    explorer = lab.page.locator(".hw-explorer")
    explorer.wait_for(timeout=30_000)
    show_tab(explorer, "graph")
    panel = explorer.locator(".hw-graph-panel")
    assert panel.locator(".hw-graph-status").get_attribute("data-state") == "empty"

    panel.locator("button.hw-graph-record").click()
    _ready(panel)
    ops = set(panel.locator(".hw-gnode[data-op]").evaluate_all("els => els.map((e) => e.dataset.op)"))
    assert {"ConvolutionBackward0", "NativeBatchNormBackward0", "ReluBackward0", "AddmmBackward0"} <= ops
    labels = panel.locator('.hw-gnode[data-node-type="param"] .hw-glabel').all_text_contents()
    assert "features.conv.weight" in labels and "head.fc.bias" in labels
    conv = panel.locator('.hw-gnode[data-op="ConvolutionBackward0"]')
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
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(LONG_MODEL_CELL)])
    path = lab.write_notebook("graph_scroll.ipynb", nb)
    lab.open_notebook(path)
    lab.run_all(path, timeout=180)
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
    panel.locator("button.hw-graph-fit").click()
    panel.locator('.hw-gblock[data-path="tail.35"]').click()
    _wait_selected(lab, path, "tail.35")
    show_tab(explorer, "modules")
    lab.page.wait_for_function(_ROW_IN_VIEW, arg="tail.35", timeout=10_000)  # scrolled to, highlighted
    assert explorer.locator(".hw-tree").evaluate("(el) => el.scrollTop") > 0
    assert explorer.locator(".hw-row.hw-selected").count() == 1
