"""The logit lens in a real JupyterLab, on a long input with a head ablation attached: cells coloured by probability,
the table scrolled to the last position with the layer column and the header pinned, the final answer's first top-1
outlined, and values equal to a headless ``ex.logit_lens()`` with the edit, which the panel says it ran with. One
notebook and one kernel; screenshots light and dark."""

from __future__ import annotations

import pytest

from ._lab import Lab, show_tab
from ._snippets import gpt2
from .test_transformers import _theme

pytestmark = pytest.mark.e2e

LENGTH = 48  # positions: wider than the pane, so the table scrolls sideways
NOTEBOOK = (
    gpt2("model", n_embd=32, n_head=4)
    + f"""
from hookwidgets import HookExplorer

with torch.no_grad():  # weights far from their small initial scale: the heads matter to the lens
    for p in model.parameters():
        p.mul_(4)
text = " ".join((words * 8)[:{LENGTH}])
ex = HookExplorer(model, example_inputs=tokenizer(text, return_tensors="pt"), tokenizer=tokenizer)
ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", [0, 1, 2]))
ex
"""
)
# What the page drew: each cell's probability and background, the scroll box and the pinned cells' places.
DRAWN = """
(root) => {
  const box = root.querySelector('.hw-lens-box');
  const b = box.getBoundingClientRect();
  const head = [...root.querySelectorAll('.hw-lens-table thead th')];
  const last = head[head.length - 1].getBoundingClientRect();
  const layer = root.querySelector('.hw-lens-table tbody th').getBoundingClientRect();
  const rows = [...root.querySelectorAll('.hw-lens-table tbody tr')];
  return {
    box: {left: b.left, right: b.right, top: b.top, scrollLeft: box.scrollLeft,
          scrollable: box.scrollWidth - box.clientWidth},
    last: {left: last.left, right: last.right, text: head[head.length - 1].textContent},
    layerLeft: layer.left,
    probs: rows.map((tr) => [...tr.querySelectorAll('td.hw-lens-cell')].map((td) => Number(td.dataset.prob))),
    backgrounds: rows.map((tr) => [...tr.querySelectorAll('td.hw-lens-cell')].map(
      (td) => getComputedStyle(td).backgroundColor)),
    firsts: [...root.querySelectorAll('td.hw-lens-first')].map((td) => [
      rows.indexOf(td.parentElement), [...td.parentElement.children].indexOf(td) - 1]),
    note: root.querySelector('.hw-lens-panel .hw-edits-note')?.textContent ?? null,
    noteHidden: root.querySelector('.hw-lens-panel .hw-edits-note')?.hidden ?? null,
  };
}
"""
# The headless lens with the edit (as the panel's: top-5), and how far the unedited one is from it.
HEADLESS = "lens, plain = ex.logit_lens(), ex.logit_lens(edits=False)"
HEADLESS_VALUES = """{"probs": lens["probs"][:, 0, :, 0].tolist(), "edits": lens["edits"],
 "differs": float((lens["probs"] - plain["probs"]).abs().max()),
 "first": (lens["answer_ranks"][:, 0] == 1).int().argmax(0).tolist()}"""


def test_the_lens_is_coloured_shows_the_last_position_and_honours_an_edit(lab: Lab) -> None:
    path = lab.run_cells("lens-edits.ipynb", [NOTEBOOK], timeout=180)
    page = lab.page
    page.set_viewport_size({"width": 1200, "height": 1200})
    explorer = page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="transformer"]').wait_for(timeout=30_000)
    show_tab(explorer, "lens")
    explorer.locator("button.hw-lens-run").click()
    explorer.locator("table.hw-lens-table tbody tr").nth(2).wait_for(timeout=60_000)
    page.wait_for_timeout(300)  # the scroll to the last position happens on the next frame too
    drawn = explorer.evaluate(DRAWN)
    with lab.kernel(path, timeout=120) as kernel:
        kernel.evaluate(HEADLESS)
        headless = kernel.evaluate_json(HEADLESS_VALUES)

    # the values are the headless lens's with the edit, which changes them, and the panel says it ran with it
    assert headless["differs"] > 1e-3
    assert len(drawn["probs"]) == 3 and all(len(row) == LENGTH for row in drawn["probs"])
    for shown, expected in zip(drawn["probs"], headless["probs"], strict=True):
        assert shown == pytest.approx(expected, rel=1e-6)
    assert headless["edits"].startswith("with your edits: ablate_heads 0,1,2")
    assert drawn["note"] == headless["edits"] and drawn["noteHidden"] is False
    # coloured by probability: the likeliest cell darker than the least likely, many shades
    flat = [
        (p, bg)
        for row_p, row_bg in zip(drawn["probs"], drawn["backgrounds"], strict=True)
        for p, bg in zip(row_p, row_bg, strict=True)
    ]
    assert len({bg for _, bg in flat}) > 10
    low, high = min(flat)[1], max(flat)[1]
    assert sum(int(v) for v in low[4:-1].split(",")) > sum(int(v) for v in high[4:-1].split(","))
    # the last position in view, the layer column pinned at the box's left edge
    box = drawn["box"]
    assert box["scrollable"] > 100 and box["scrollLeft"] >= box["scrollable"] - 1
    assert box["left"] <= drawn["last"]["left"] and drawn["last"]["right"] <= box["right"] + 1
    assert abs(drawn["layerLeft"] - box["left"]) <= 2
    # one outlined cell per position: the layer where the final answer first leads
    assert sorted(drawn["firsts"], key=lambda rc: rc[1]) == [[row, t] for t, row in enumerate(headless["first"])]
    # the readout of a cell names its top token's probability, log-probability and the final answer's rank
    explorer.locator("table.hw-lens-table tbody tr").nth(0).locator("td.hw-lens-cell").last.hover()
    readout = explorer.locator(".hw-lens-readout").inner_text()
    assert f"position {LENGTH - 1}" in readout and "log p" in readout and "answer" in readout
    assert "NaN" not in readout and "," not in readout.split(" · ")[2]  # the top token, then its probability
    explorer.locator(".hw-lens-panel").screenshot(path=str(lab.artifacts_dir / "lens-edits-light.png"))
    # in a narrow pane the readout wraps to its second line rather than cutting what the cell holds
    page.set_viewport_size({"width": 700, "height": 1200})
    page.wait_for_timeout(500)
    explorer.locator("table.hw-lens-table tbody tr").nth(0).locator("td.hw-lens-cell").last.hover()
    fits = explorer.locator(".hw-lens-readout").evaluate(
        "(el) => [el.scrollHeight <= el.clientHeight + 1, el.scrollWidth <= el.clientWidth + 1, el.clientHeight]"
    )
    assert fits[:2] == [True, True], fits
    page.set_viewport_size({"width": 1200, "height": 1200})

    _theme(lab, "JupyterLab Dark")
    try:
        page.wait_for_function(
            "() => getComputedStyle(document.querySelector('.hw-explorer')).backgroundColor !== 'rgb(255, 255, 255)'"
        )
        page.wait_for_timeout(500)  # the cells are coloured again from the dark page's background
        dark = explorer.evaluate(DRAWN)
        assert all(bg != "rgb(255, 255, 255)" for row in dark["backgrounds"] for bg in row)
        assert len({bg for row in dark["backgrounds"] for bg in row}) > 10
        explorer.locator(".hw-lens-panel").screenshot(path=str(lab.artifacts_dir / "lens-edits-dark.png"))
    finally:
        _theme(lab, "JupyterLab Light")
