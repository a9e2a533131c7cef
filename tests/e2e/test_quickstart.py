"""The quickstart in a real JupyterLab: click a conv layer, toggle its forward hook, Run, see its maps."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ._lab import Lab

pytestmark = pytest.mark.e2e

QUICKSTART = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
LAYER = "features.conv1"

_IMAGE_BYTES = """
async (img) => {
  const response = await fetch(img.src);
  return Array.from(new Uint8Array(await response.arrayBuffer()));
}
"""

_KERNEL_STATE = f"""
import hashlib, json
_plots = {{item["kind"]: item for item in ex.view.plots["items"]}}
_records = ex.captures[{LAYER!r}]["forward"]
print(json.dumps({{
    "hooks": [[h.target, h.kind, h.fired] for h in ex.hooks],
    "shape": list(_records[-1].tensor.shape),
    "tree_shape": ex.tree["children"][0]["children"][0]["shape"],
    "plots_target": ex.view.plots["target"],
    "png_sha256": hashlib.sha256(_plots["forward"]["png"]).hexdigest(),
    "grads": [p.grad is None for p in model.parameters()],
}}))
"""


def test_click_a_conv_layer_toggle_forward_run_and_see_the_python_image(lab: Lab) -> None:
    path = lab.copy_notebook(QUICKSTART)
    lab.open_notebook(path)
    lab.run_all(path, timeout=180)
    page = lab.page
    explorer = page.locator(".hw-explorer")
    explorer.wait_for(timeout=30_000)

    row = explorer.locator(f'.hw-row[data-path="{LAYER}"]')
    row.click()
    explorer.locator(f'.hw-row.hw-selected[data-path="{LAYER}"]').wait_for(timeout=10_000)
    assert "Conv2d" in row.inner_text() and "16×32×32" in row.inner_text()

    explorer.locator('input.hw-toggle[data-kind="forward"]').check()
    row.locator('.hw-badge[data-kind="forward"]').wait_for(timeout=15_000)  # Python attached it

    explorer.locator("button.hw-run").click()
    image = explorer.locator('img.hw-plot[data-kind="forward"]')
    image.wait_for(timeout=60_000)
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    shown = bytes(image.evaluate(_IMAGE_BYTES))
    explorer.screenshot(path=str(lab.artifacts_dir / "quickstart-widget.png"))

    with lab.kernel(path) as kernel:
        state = json.loads(kernel.evaluate(_KERNEL_STATE))
    assert [LAYER, "forward", 1] in state["hooks"]
    assert state["shape"] == state["tree_shape"] == [1, 16, 32, 32]
    assert state["plots_target"] == LAYER
    assert hashlib.sha256(shown).hexdigest() == state["png_sha256"]
    assert all(state["grads"])  # the Run button left the model's .grad as found
    assert explorer.locator(".hw-status").get_attribute("data-state") == "idle"
