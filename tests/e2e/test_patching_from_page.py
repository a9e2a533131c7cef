"""Issue 36 in a real JupyterLab: a patch sweep started from the page (texts typed, Patch sweep clicked, progress, the
figure and its caption, the differing position marked), a refused pair of lengths, and the figure's colour agreeing
with its caption for both signs of clean − corrupted, light and dark, at 600 px. One notebook, one kernel."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator

from ._lab import Lab, show_tab
from ._snippets import gpt2
from .test_layout import _left_area
from .test_transformers import _theme

pytestmark = pytest.mark.e2e

CELL = (
    gpt2("gpt", n_embd=32, n_head=4)
    + """
from hookwidgets import HookExplorer
ex = HookExplorer(gpt, example_inputs=tokenizer("the cat sat on a mat", return_tensors="pt"), tokenizer=tokenizer)
ex
"""
)
CLEAN, CORRUPTED = "the cat sat on a mat", "the cat sat on a dog"  # this GPT-2 answers "mat", then "dog"
# A metric whose clean value is below its corrupted one: a full restoration is its lowest value, and still red.
NEGATIVE = """
clean = tokenizer("the cat sat on a mat", return_tensors="pt")["input_ids"]
corrupt = tokenizer("the cat sat on a dog", return_tensors="pt")["input_ids"]
answer = int(gpt(clean).logits[0, -1].argmax())
negative = ex.patch_sweep(clean, corrupt, metric=lambda out: -out.logits[:, -1, answer])
"""
# The colour of the figure's cell (row, col) as the page shows it: the PNG drawn on a canvas, read at the cell's centre.
CELL_COLOUR = """
([row, col, box, rows, cols, ratio]) => {
  const img = document.querySelector('.hw-explorer img.hw-patching-image');
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const context = canvas.getContext('2d');
  context.drawImage(img, 0, 0);
  const x = (box[0] + (col + 0.5) * (box[2] - box[0]) / cols) * ratio;
  const y = (box[1] + (row + 0.5) * (box[3] - box[1]) / rows) * ratio;
  const [r, g, b] = context.getImageData(Math.round(x), Math.round(y), 1, 1).data;
  return {r, g, b};
}
"""
REGION = (
    "[{k: r[k] for k in ('box', 'rows', 'cols')} | {'ratio': ex.view.patching['hover']['ratio']} "
    "for r in ex.view.patching['hover']['regions'] if r['type'] == 'cells'][0]"
)


def _colour(explorer: Locator, lab: Lab, path: str, row: int, col: int) -> dict[str, int]:
    with lab.kernel(path) as kernel:
        region = kernel.evaluate_json(REGION)
    return explorer.page.evaluate(
        CELL_COLOUR, [row, col, region["box"], region["rows"], region["cols"], region["ratio"]]
    )


def _caption(explorer: Locator) -> str:
    return explorer.locator(".hw-patching-caption").inner_text()


def test_a_sweep_started_from_the_page_and_its_colours_agree_with_its_caption_for_both_signs(lab: Lab) -> None:
    path = lab.run_cells("patching-from-page.ipynb", [CELL], timeout=180)
    page = lab.page
    page.set_viewport_size({"width": 600, "height": 1200})
    _left_area(lab, shown=False)
    explorer = page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="transformer"]').wait_for(timeout=30_000)

    # offered before any sweep, the clean box holding the example's text and the corrupted one a hint
    show_tab(explorer, "patching")
    clean, corrupted = explorer.locator("input.hw-patching-clean"), explorer.locator("input.hw-patching-corrupted")
    assert clean.input_value() == CLEAN and corrupted.input_value() == ""
    assert "one word changed" in (corrupted.get_attribute("placeholder") or "")
    assert explorer.locator("select.hw-patching-metric").input_value() == "recovered"

    # different lengths: refused, both named
    corrupted.fill("the big cat sat on a dog")
    explorer.locator("button.hw-patching-run").click()
    error = explorer.locator(".hw-patching-error")
    error.filter(has_text="the clean input is 6 tokens and the corrupted input 7").wait_for(timeout=30_000)

    # typed, clicked: progress, then the figure, its caption and the differing position marked
    corrupted.fill(CORRUPTED)
    with lab.kernel(path) as kernel:
        kernel.evaluate("seen = []; ex.view.observe(lambda c: seen.append(c['new']['progress']), names='patching')")
    explorer.locator("button.hw-patching-run").click()
    explorer.locator("img.hw-patching-image").wait_for(timeout=60_000)
    page.wait_for_function("() => document.querySelector('.hw-patching-error').textContent === ''", timeout=15_000)
    with lab.kernel(path) as kernel:
        assert [12, 12] in kernel.evaluate_json("seen")  # the page got the sweep's progress
    caption = _caption(explorer)
    assert caption.startswith("activation patching: the fraction of the logit difference recovered (0: corrupted")
    assert "red: toward the clean run (a full restoration: 1)" in caption
    tokens = explorer.locator(".hw-patching-tokens .hw-patching-token")
    assert tokens.all_inner_texts() == CLEAN.split()
    assert explorer.locator(".hw-patching-token.hw-differs").get_attribute("data-position") == "5"
    full = _colour(explorer, lab, path, 1, 5)  # the last block at the last position: all of it recovered
    assert full["r"] > full["b"] + 50, f"a full restoration is drawn {full}, the caption says red"
    width = explorer.locator("img.hw-patching-image").bounding_box()
    pane = explorer.locator(".hw-details").bounding_box()
    assert width is not None and pane is not None and width["x"] + width["width"] <= pane["x"] + pane["width"] + 1
    explorer.locator(".hw-patching-panel").screenshot(path=str(lab.artifacts_dir / "patching-page-light.png"))

    # a metric whose clean value is negative: the full restoration, its lowest value, still red as the caption says
    with lab.kernel(path, timeout=120) as kernel:
        kernel.evaluate(NEGATIVE)
        clean_value = kernel.evaluate_json("negative.clean - negative.corrupted")
    assert clean_value < 0
    explorer.locator(".hw-patching-caption", has_text="activation patching: your metric").wait_for(timeout=30_000)
    assert "red: toward the clean run (a full restoration: -" in _caption(explorer)
    negative = _colour(explorer, lab, path, 1, 5)
    assert negative["r"] > negative["b"] + 50, f"a full restoration is drawn {negative}, the caption says red"

    _theme(lab, "JupyterLab Dark")
    try:
        page.wait_for_function(
            "() => getComputedStyle(document.querySelector('.hw-explorer')).backgroundColor !== 'rgb(255, 255, 255)'"
        )
        page.wait_for_timeout(1500)  # the figure is drawn again in the dark theme
        dark = _colour(explorer, lab, path, 1, 5)
        assert dark["r"] > dark["b"] + 50
        explorer.locator(".hw-patching-panel").screenshot(path=str(lab.artifacts_dir / "patching-page-dark.png"))
    finally:
        _theme(lab, "JupyterLab Light")
