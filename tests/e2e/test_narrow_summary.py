"""A 24-block GPT-2 in a narrow JupyterLab (700 and 600 px): the stacked panes each get their own height, the tree
shows a dozen rows and scrolls the selection into view, and the summary's table fits its pane and filters."""

from __future__ import annotations

import nbformat
import pytest

from ._lab import Lab, show_tab
from .test_layout import _left_area

pytestmark = pytest.mark.e2e

BIG_GPT2 = """
import torch
import transformers
from hookwidgets import HookExplorer

torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=24, n_embd=64, n_head=4, vocab_size=500)
model = transformers.GPT2LMHeadModel(config).eval()
ex = HookExplorer(model, example_inputs=torch.randint(0, 500, (1, 8)))
ex.attach("", ["global_forward", "global_grad"], action="stats")
for _ in range(2):
    ex.run(target=3)
ex
"""
DEEP = "transformer.h.22.mlp.c_proj"

# The stacked panes' boxes, the tree rows wholly inside the tree's viewport, and what is wider than the details pane.
MEASURE = """
(root) => {
  const box = (el) => el.getBoundingClientRect();
  const nav = root.querySelector('.hw-navigator'), details = root.querySelector('.hw-details');
  const tree = box(root.querySelector('.hw-tree'));
  const rows = [...root.querySelectorAll('.hw-tree .hw-row')].filter((r) => {
    const b = box(r);
    return b.top >= tree.top - 1 && b.bottom <= tree.bottom + 1;
  });
  const selected = root.querySelector('.hw-tree .hw-row.hw-selected');
  const right = box(details).right;
  const wide = [...details.querySelectorAll('*')]
    .filter((el) => el.getBoundingClientRect().width > 0 && box(el).right > right + 1)
    .slice(0, 6)
    .map((el) => `${el.tagName.toLowerCase()}.${el.className}`);
  const page = details.querySelector('.hw-tab-page:not([hidden])');
  return {
    nav: [box(nav).top, box(nav).bottom, box(nav).height], details: [box(details).top, box(details).height],
    explorer: box(root).height, width: box(root).width, rows: rows.length,
    selectedShown: selected !== null && rows.includes(selected) ? selected.dataset.path : null,
    wide, sideways: page.scrollWidth - page.clientWidth,
  };
}
"""


def test_a_big_model_in_a_narrow_window_stacks_panes_of_their_own_height_and_fits_the_summary(lab: Lab) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BIG_GPT2)])
    path = lab.write_notebook("narrow.ipynb", nb)
    page = lab.page
    page.set_viewport_size({"width": 700, "height": 1000})
    lab.open_notebook(path)
    _left_area(lab, shown=False)  # a narrow screen: the file browser closed, as a user there keeps it
    try:
        lab.run_all(path, timeout=120)
        explorer = page.locator(".hw-explorer")
        explorer.locator('.hw-row[data-path="transformer"]').wait_for(timeout=30_000)
        # the root's global badge counts steps (2 Runs), not firings summed over ~300 modules
        count = explorer.locator('.hw-row[data-path=""] .hw-badge[data-kind="global_forward"] .hw-badge-count')
        assert count.inner_text() == "2"
        explorer.locator("button.hw-expand-all").click()
        # a deep module picked by the tree's search: selected, and its row scrolled into the tree's view
        explorer.locator("input.hw-search").fill(DEEP)
        explorer.locator(".hw-match-count", has_text="1 match").wait_for(timeout=10_000)
        explorer.locator("input.hw-search").press("Enter")
        explorer.locator(f'.hw-row.hw-selected[data-path="{DEEP}"]').wait_for(timeout=10_000)
        explorer.locator("input.hw-search").press("Escape")

        show_tab(explorer, "summary")
        rows = explorer.locator("tr.hw-summary-row")
        rows.first.wait_for(timeout=30_000)
        total = rows.count()
        assert total > 24 * 12  # every layer of the 24 blocks that ran
        for width in (700, 600):
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_timeout(400)  # the notebook lays out at the new width
            found = explorer.evaluate(MEASURE)
            where = f"{width} px: {found}"
            assert found["width"] < 720, where  # narrow enough to stack
            _, nav_bottom, nav_height = found["nav"]
            details_top, details_height = found["details"]
            assert details_top >= nav_bottom and 360 <= nav_height <= 400 and 500 <= details_height <= 540, where
            assert found["explorer"] > 900, where  # the widget grew instead of squeezing both into 680 px
            assert found["rows"] >= 12, where
            assert found["selectedShown"] == DEEP, where
            assert found["wide"] == [] and found["sideways"] <= 1, where
            box = explorer.locator(".hw-summary-table-box")
            assert box.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1"), where
            explorer.screenshot(path=str(lab.artifacts_dir / f"narrow-summary-{width}.png"))

        # a row of the summary selects its module: the tree, scrolled away, brings it into view
        page.locator(".hw-tree").evaluate("(el) => { el.scrollTop = 0; }")
        explorer.locator('tr.hw-summary-row[data-path="transformer.h.20.attn"]').click()
        explorer.locator('.hw-tree .hw-row.hw-selected[data-path="transformer.h.20.attn"]').wait_for(timeout=10_000)
        assert explorer.evaluate(MEASURE)["selectedShown"] == "transformer.h.20.attn"

        # side by side, the tree dragged to its narrowest: the root's name is not cut by its badges
        page.set_viewport_size({"width": 1400, "height": 1000})
        explorer.locator(".hw-navigator").evaluate("(el) => { el.style.width = '240px'; }")
        page.locator(".hw-tree").evaluate("(el) => { el.scrollTop = 0; }")
        label = explorer.locator('.hw-row[data-path=""] .hw-label')
        label.wait_for(timeout=10_000)
        assert label.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1 && el.clientWidth > 0")
        explorer.locator(".hw-navigator").evaluate("(el) => { el.style.width = ''; }")
        page.set_viewport_size({"width": 600, "height": 1000})

        # the filter cuts the table (and the heatmap, drawn for the kept layers) to what it keeps
        explorer.locator("input.hw-summary-filter").fill("mlp.c_fc")
        page.wait_for_function("() => document.querySelectorAll('tr.hw-summary-row').length === 24", timeout=15_000)
        paths = rows.evaluate_all("els => els.map((e) => e.dataset.path)")
        assert paths == [f"transformer.h.{i}.mlp.c_fc" for i in range(24)]
        assert "24 of" in explorer.locator(".hw-summary-shown").inner_text()
        explorer.locator("input.hw-summary-filter").fill("")
        explorer.locator("input.hw-summary-blocks").check()
        page.wait_for_function(
            "() => [...document.querySelectorAll('tr.hw-summary-row')].every((e) => /^transformer\\.h\\.\\d+$/"
            ".test(e.dataset.path))",
            timeout=15_000,
        )
        assert rows.count() == 24
        explorer.screenshot(path=str(lab.artifacts_dir / "narrow-summary-blocks.png"))
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
        _left_area(lab, shown=True)
