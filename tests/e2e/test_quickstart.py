"""The quickstart in JupyterLab 4 and in Notebook 7: `%load_ext hookwidgets` and `%hookexplorer` show the
explorer; click a conv layer, toggle its forward hook, Run, and see the very image Python drew."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ._lab import Lab, show_tab

pytestmark = pytest.mark.e2e

QUICKSTART = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
LAYER = "features.conv1"
SCREENSHOTS = {"lab": "quickstart-widget.png", "notebook7": "notebook7-quickstart.png"}

_IMAGE_BYTES = """
async (img) => {
  const response = await fetch(img.src);
  return Array.from(new Uint8Array(await response.arrayBuffer()));
}
"""

_KERNEL_STATE = f"""
import hashlib, json
from IPython import get_ipython
from hookwidgets.ipython import _STATE
_plots = {{item["kind"]: item for item in ex.view.plots["items"]}}
_records = ex.captures[{LAYER!r}]["forward"]
print(json.dumps({{
    "made_by_magic": any(e is ex for e in _STATE[get_ipython()].explorers),
    "magic": "hookexplorer" in get_ipython().magics_manager.magics["line"],
    "modules": [p for p, _ in model.named_modules()],
    "hooks": [[h.target, h.kind, h.fired] for h in ex.hooks],
    "shape": list(_records[-1].tensor.shape),
    "tree_shape": ex.tree["children"][0]["children"][0]["shape"],
    "plots_path": ex.view.plots["path"],
    "png_sha256": hashlib.sha256(_plots["forward"]["png"]).hexdigest(),
    "grads": [p.grad is None for p in model.parameters()],
    "graph_nodes": len(ex.graph()["nodes"]),
}}))
"""


@pytest.mark.parametrize("frontend", ["lab", "notebook7"])
def test_quickstart_through_load_ext_click_toggle_run_and_see_the_python_image(
    frontend: str, request: pytest.FixtureRequest
) -> None:
    app: Lab = request.getfixturevalue(frontend)
    source = QUICKSTART.read_text()
    assert "%load_ext hookwidgets" in source and "%hookexplorer model x --name ex" in source
    path = app.copy_notebook(QUICKSTART)
    app.open_notebook(path)
    app.run_all(path, timeout=180)
    page = app.page
    explorer = page.locator(".hw-explorer")
    explorer.wait_for(timeout=30_000)
    assert explorer.count() == 1  # the magic's cell shows one explorer
    count = explorer.locator(".hw-count").inner_text()
    rows = explorer.locator(".hw-row").evaluate_all("els => els.map((e) => e.dataset.path)")

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

    # "attribution here": Grad-CAM of the top class at the selected layer, the input beside it
    show_tab(explorer, "attribution")
    explorer.locator("button.hw-attr-run").click()
    overlay = explorer.locator("img.hw-attr-image")
    overlay.wait_for(timeout=60_000)
    assert explorer.locator("img.hw-attr-input").is_visible()
    assert explorer.locator(".hw-attribution .hw-plot-caption").inner_text().startswith("Grad-CAM of class ")
    for img in (overlay, explorer.locator("img.hw-attr-input")):
        page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=img.element_handle())

    # the quickstart's `ex.graph()` cell filled the graph panel (laid out and drawn in this frontend too)
    show_tab(explorer, "graph")
    status = explorer.locator('.hw-graph-status[data-state="ready"]')
    status.wait_for(timeout=30_000)
    graph_status = status.inner_text()

    if frontend == "lab":
        app.page.set_viewport_size({"width": 1400, "height": 1500})
        explorer.screenshot(path=str(app.artifacts_dir / "quickstart-graph-attribution.png"))
        show_tab(explorer, "modules")
        show_tab(explorer, "inspector")  # the tree beside the feature maps: the README's first picture
        _screenshot_main_view(app, SCREENSHOTS[frontend])
    else:
        # the cell with `%load_ext hookwidgets` and `%hookexplorer` on top, its explorer below
        explorer.evaluate("(el) => el.closest('.jp-Cell').scrollIntoView({block: 'start'})")
        app.screenshot(SCREENSHOTS[frontend].removesuffix(".png"))

    # The page shows what the kernel drew last: a pane resized by the tab switches above is drawn again for its width,
    # so both sides are read until that redraw has arrived.
    with app.kernel(path) as kernel:
        for _ in range(40):
            state = json.loads(kernel.evaluate(_KERNEL_STATE))
            shown = bytes(image.evaluate(_IMAGE_BYTES))
            if hashlib.sha256(shown).hexdigest() == state["png_sha256"]:
                break
            page.wait_for_timeout(250)
    assert state["made_by_magic"] and state["magic"]
    assert rows == state["modules"]  # every module has its row, in order
    assert count == f"{len(state['modules'])} modules"
    assert [LAYER, "forward", 1] in state["hooks"]
    assert state["shape"] == state["tree_shape"] == [1, 16, 32, 32]
    assert state["plots_path"] == LAYER
    assert hashlib.sha256(shown).hexdigest() == state["png_sha256"]
    assert all(state["grads"])  # the Run button left the model's .grad as found
    assert graph_status.startswith(f"{state['graph_nodes']} autograd nodes · ")
    assert explorer.locator(".hw-status").get_attribute("data-state") == "idle"


def _screenshot_main_view(app: Lab, name: str) -> None:
    """The explorer's header, tree and inspector (the graph and the other tabs have screenshots of their own)."""
    page = app.page
    page.set_viewport_size({"width": 1400, "height": 1500})  # a taller notebook area: the whole view fits
    explorer = page.locator(".hw-explorer")
    explorer.evaluate("(el) => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)  # JupyterLab lays the panel out again
    top = explorer.bounding_box()
    body = explorer.locator(".hw-body").bounding_box()
    assert top is not None and body is not None
    clip = {"x": top["x"], "y": top["y"], "width": top["width"], "height": body["y"] + body["height"] - top["y"] + 8}
    page.screenshot(path=str(app.artifacts_dir / name), clip=clip)
