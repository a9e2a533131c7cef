"""A first look in a real JupyterLab: the graph tab records the example inputs' graph on its first visit and Fit puts
the whole graph in the pane; the inspector offers forward and grad first and the other kinds under "More kinds";
attribution methods are named in words; a failed shape probe is named in the run bar. One notebook, one kernel."""

from __future__ import annotations

import nbformat
import pytest

from ._lab import Lab, show_tab

pytestmark = pytest.mark.e2e

CELLS = [
    """
import torch
from torch import nn
from hookwidgets import HookExplorer
from hookwidgets.examples import digit_image, pretrained_digits_cnn

model = pretrained_digits_cnn()
x, label = digit_image(0)
ex = HookExplorer(model, example_inputs=x)
ex
""",
    """
torch.manual_seed(0)
deep = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(24)])
deep_ex = HookExplorer(deep, example_inputs=torch.randn(2, 8))
deep_ex
""",
    """
import warnings
warnings.simplefilter("ignore")
bad = HookExplorer(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), example_inputs=torch.randn(1, 5))
bad
""",
]

# Each drawn graph item's box against the canvas's: the ones outside it.
OUTSIDE = """
(panel) => {
  const canvas = panel.querySelector("svg.hw-graph-canvas").getBoundingClientRect();
  const out = [];
  for (const item of panel.querySelectorAll(".hw-gnode, .hw-gbox")) {
    const r = item.getBoundingClientRect();
    if (r.left < canvas.left - 0.5 || r.top < canvas.top - 0.5 || r.right > canvas.right + 0.5
        || r.bottom > canvas.bottom + 0.5) out.push(item.getAttribute("data-key"));
  }
  return out;
}
"""


def test_first_steps(lab: Lab) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    path = lab.write_notebook("first_steps.ipynb", nb)
    lab.open_notebook(path)
    lab.run_all(path, timeout=180)
    page = lab.page
    explorers = page.locator(".hw-explorer")
    explorers.nth(2).wait_for(timeout=30_000)
    first, deep, bad = explorers.nth(0), explorers.nth(1), explorers.nth(2)

    # the graph tab records on its first visit: no click on Record graph
    show_tab(first, "graph")
    panel = first.locator(".hw-graph-panel")
    panel.locator('.hw-graph-status[data-state="ready"]').wait_for(timeout=60_000)
    assert panel.locator('.hw-gnode[data-op="ConvolutionBackward0"]').count() > 0
    said = panel.locator(".hw-graph-status").inner_text()
    panel.locator("button.hw-graph-record").click()  # the same graph recorded again: drawn as it was, ready again
    panel.locator('.hw-graph-status[data-state="ready"]').wait_for(timeout=60_000)
    assert panel.locator(".hw-graph-status").inner_text() == said
    panel.screenshot(path=str(lab.artifacts_dir / "first-steps-graph-first-visit.png"))

    # Fit: every node and module box of a graph too tall for the pane inside it
    show_tab(deep, "graph")
    deep_panel = deep.locator(".hw-graph-panel")
    deep_panel.locator('.hw-graph-status[data-state="ready"]').wait_for(timeout=60_000)
    deep_panel.locator("button.hw-graph-fit").click()
    page.wait_for_timeout(300)
    deep_panel.screenshot(path=str(lab.artifacts_dir / "first-steps-graph-fit.png"))
    outside = deep_panel.evaluate(OUTSIDE)
    assert deep_panel.locator(".hw-gnode").count() > 0
    assert not outside, f"{len(outside)} items outside the pane after Fit: {outside[:5]}"

    # the inspector: forward and grad first, the module's four other kinds under a closed "More kinds"
    show_tab(first, "modules")
    first.locator("button.hw-expand-all").click()
    first.locator('.hw-row[data-path="features.conv1"]').click()
    show_tab(first, "inspector")
    toggles = first.locator(".hw-toggles")
    toggles.locator('input.hw-toggle[data-path="features.conv1"]').first.wait_for(timeout=15_000)
    kinds = toggles.locator("input.hw-toggle").evaluate_all("els => els.map((e) => e.dataset.kind)")
    assert kinds == ["forward", "grad", "forward_pre", "backward_pre", "backward", "legacy_backward"]
    more = toggles.locator("details.hw-more-kinds")
    assert more.locator("summary").inner_text() == "More kinds (4)"
    assert toggles.locator('input.hw-toggle[data-kind="forward"]').is_visible()
    assert not toggles.locator('input.hw-toggle[data-kind="backward"]').is_visible()
    more.locator("summary").click()
    assert toggles.locator('input.hw-toggle[data-kind="backward"]').is_visible()
    first.locator(".hw-inspector").screenshot(path=str(lab.artifacts_dir / "first-steps-inspector-kinds.png"))

    # attribution methods in words; the option's value is the id the kernel takes
    show_tab(first, "attribution")
    options = first.locator("select.hw-attr-method option")
    options.first.wait_for(state="attached", timeout=15_000)
    assert options.all_inner_texts() == [
        "Grad-CAM",
        "Grad-CAM++",
        "HiResCAM",
        "XGrad-CAM",
        "LayerCAM",
        "guided Grad-CAM",
        "saliency",
        "input × gradient",
        "guided backprop",
    ]
    first.locator("select.hw-attr-method").select_option("input_x_grad")
    first.locator("button.hw-attr-run").click()
    caption = first.locator(".hw-attribution .hw-plot-caption")
    page.wait_for_function("(el) => el.textContent.length > 0", arg=caption.element_handle(), timeout=60_000)
    assert caption.inner_text().startswith("input × gradient of class ")
    first.locator(".hw-attribution").screenshot(path=str(lab.artifacts_dir / "first-steps-method-words.png"))

    # a failed shape probe is named in the run bar, not "no scores: forward only"
    target = bad.locator("select.hw-run-target option").first
    assert target.inner_text() == (
        "the shape probe failed: RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x5 and 4x3)"
    )
    bad.screenshot(path=str(lab.artifacts_dir / "first-steps-probe-failed.png"))
