"""The compact layout in a real JupyterLab at 1400, 900 and 600 px, light and dark: the explorer keeps its fixed
height side by side (stacked, each pane gets its own), every tab of both panes opens, and nothing is clipped or
outside the widget's box."""

from __future__ import annotations

import pytest

from ._lab import Lab, show_tab
from .test_theme import LOW_CONTRAST, shrunk_after_redraw
from .test_transformers import GPT2_WITH_TOKENIZER, _theme

pytestmark = pytest.mark.e2e

# Elements outside the explorer's box (unless a scrolling ancestor inside it clips them on purpose), and tab pages
# that would need a horizontal scroll bar: what a user could not see without scrolling sideways.
OUTSIDE = """
(root) => {
  const box = root.getBoundingClientRect();
  const outside = [];
  for (const el of root.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    let scrolled = false;
    for (let a = el.parentElement; a && a !== root; a = a.parentElement) {
      const style = getComputedStyle(a);
      if (style.overflowX !== 'visible' || style.overflowY !== 'visible') { scrolled = true; break; }
    }
    if (scrolled) continue;
    if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
      outside.push(`${el.tagName.toLowerCase()}.${el.className}`);
    }
  }
  const sideways = [...root.querySelectorAll('.hw-tab-page:not([hidden])')]
    .filter((page) => page.scrollWidth > page.clientWidth + 1)
    .map((page) => {
      const right = page.getBoundingClientRect().right;
      const wide = [...page.querySelectorAll('*')].filter((el) => el.getBoundingClientRect().right > right + 1);
      const named = wide.slice(-3).map((el) => `${el.tagName.toLowerCase()}.${el.className}`);
      return `${page.dataset.tab}: ${page.scrollWidth} > ${page.clientWidth} (${named.join(', ')})`;
    });
  const navigator = root.querySelector('.hw-navigator'), details = root.querySelector('.hw-details');
  const stacked = Boolean(navigator && details)  // the run view has no panes
    && details.getBoundingClientRect().top >= navigator.getBoundingClientRect().bottom;
  return { outside, sideways, height: box.height, stacked };
}
"""
TABS = {
    "modules": "navigator",
    "graph": "navigator",
    "inspector": "details",
    "attribution": "details",
    "summary": "details",
    "lens": "details",
}


@pytest.mark.parametrize("frontend", ["lab", "notebook7"])
def test_the_compact_layout_keeps_everything_inside_the_widget_at_every_width(
    frontend: str, request: pytest.FixtureRequest
) -> None:
    lab: Lab = request.getfixturevalue(frontend)
    shots = "" if frontend == "lab" else f"{frontend}-"
    lab.run_cells("layout.ipynb", [GPT2_WITH_TOKENIZER], timeout=180)
    page = lab.page
    page.set_viewport_size({"width": 1400, "height": 1200})
    explorer = page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="transformer"]').wait_for(timeout=30_000)
    explorer.locator("button.hw-expand-all").click()
    explorer.locator('.hw-row[data-path="transformer.h.0.attn"]').click()
    explorer.locator('input.hw-toggle[data-kind="forward"]').check()
    explorer.locator("button.hw-run").click()
    explorer.locator('.hw-status[data-state="idle"]', has_text="step 1:").wait_for(timeout=60_000)
    show_tab(explorer, "graph")
    explorer.locator("button.hw-graph-record").click()
    explorer.locator('.hw-graph-status[data-state="ready"]').wait_for(timeout=60_000)
    show_tab(explorer, "lens")
    explorer.locator("button.hw-lens-run").click()
    explorer.locator("table.hw-lens-table tbody tr").first.wait_for(timeout=60_000)
    try:
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            _theme(lab, theme)
            for width in (1400, 900, 600):
                page.set_viewport_size({"width": width, "height": 1200})
                if width == 600:  # a narrow screen: the file browser closed, as a user there keeps it
                    _left_area(lab, shown=False)
                page.wait_for_timeout(300)  # the notebook lays out at the new width
                for tab in TABS:
                    show_tab(explorer, tab)
                    found = explorer.evaluate(OUTSIDE)
                    where = f"{theme}, {width} px, tab {tab}"
                    assert found["outside"] == [], where
                    assert found["sideways"] == [], where
                    low = explorer.evaluate(LOW_CONTRAST)  # the lens's cells and the tokens too, in both themes
                    assert low == [], f"text under 4.5:1, {where}:\n" + "\n".join(low)
                    assert shrunk_after_redraw(explorer) == [], where  # drawn for the pane, never shrunk
                    status = explorer.locator(".hw-status")  # the run bar wraps: its status is never cut to "log…"
                    assert status.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1"), where
                    if found["stacked"]:  # each pane its own height: the tree 380 px (the graph 460), the panels 520
                        assert 900 <= found["height"] <= 1200, where
                    else:
                        assert 600 <= found["height"] <= 720, where  # fixed height, not a long column
                    if tab == "graph":  # the canvas fills its pane: the graph is not squeezed to nothing
                        assert explorer.locator("svg.hw-graph-canvas").bounding_box()["height"] >= 200, where
                shade = "light" if theme.endswith("Light") else "dark"
                show_tab(explorer, "modules")
                show_tab(explorer, "inspector")
                explorer.screenshot(path=str(lab.artifacts_dir / f"{shots}layout-{shade}-{width}.png"))
    finally:
        _left_area(lab, shown=True)
        _theme(lab, "JupyterLab Light")


def _left_area(lab: Lab, shown: bool) -> None:
    """Open or close JupyterLab's left sidebar (the file browser) as its View menu does (Notebook 7 has none)."""
    has = lab.page.evaluate("() => window.jupyterapp.commands.hasCommand('application:toggle-left-area')")
    collapsed = lab.page.evaluate("() => window.jupyterapp.shell.leftCollapsed")
    if has and collapsed == shown:
        lab.page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
        lab.page.wait_for_function(f"() => window.jupyterapp.shell.leftCollapsed === {str(not shown).lower()}")
