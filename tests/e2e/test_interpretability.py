"""Issue 24 in a real JupyterLab: a click on a GPT-2 attention module offers the token methods and the rollouts (no
Grad-CAM), draws integrated gradients as coloured tokens, the logit lens as a table, and a patch sweep's figure."""

from __future__ import annotations

import pytest

from ._lab import Lab, show_tab
from .test_transformers import GPT2_WITH_TOKENIZER, WORDS, _theme

pytestmark = pytest.mark.e2e

# Each token's background and text colour, and the contrast between them (WCAG), as the page computed them.
TOKEN_COLOURS = """
(root) => [...root.querySelectorAll('.hw-attr-tokens span.hw-token')].map((span) => {
  const rgb = (text) => text.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const style = getComputedStyle(span);
  const [a, b] = [lum(rgb(style.backgroundColor)), lum(rgb(style.color))].sort((x, y) => y - x);
  return { text: span.textContent, score: Number(span.dataset.score), background: style.backgroundColor,
           contrast: (a + 0.05) / (b + 0.05) };
})
"""


def test_token_attribution_lens_and_patching_from_clicks_in_a_gpt2_explorer(lab: Lab) -> None:
    path = lab.run_cells("gpt2-interp.ipynb", [GPT2_WITH_TOKENIZER], timeout=180)
    page = lab.page
    page.set_viewport_size({"width": 1400, "height": 1400})
    explorer = page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="transformer"]').wait_for(timeout=30_000)
    explorer.locator("button.hw-expand-all").click()

    # an attention module offers the token methods and the rollouts, and no Grad-CAM
    explorer.locator('.hw-row[data-path="transformer.h.1.attn"]').click()
    methods = explorer.locator("select.hw-attr-method option")
    methods.first.wait_for(state="attached", timeout=15_000)
    assert methods.all_inner_texts() == [  # in words; each option's value is the id the kernel takes
        "integrated gradients",
        "saliency",
        "input × gradient",
        "attention rollout",
        "gradient-weighted attention rollout",
    ]
    show_tab(explorer, "attribution")
    explorer.locator("select.hw-attr-method").select_option("integrated_gradients")
    explorer.locator("button.hw-attr-run").click()
    tokens = explorer.locator(".hw-attr-tokens span.hw-token")
    tokens.nth(len(WORDS) - 1).wait_for(timeout=60_000)
    drawn = explorer.evaluate(TOKEN_COLOURS)
    assert [t["text"] for t in drawn] == WORDS
    with lab.kernel(path) as kernel:
        expected = kernel.evaluate_json("ex.attribute(method='integrated_gradients')[0].tolist()")
    assert [t["score"] for t in drawn] == pytest.approx(expected, rel=1e-4, abs=1e-7)
    assert len({t["background"] for t in drawn}) > 1  # coloured by score, not one colour
    assert min(t["contrast"] for t in drawn) >= 4.5
    caption = explorer.locator(".hw-attribution .hw-plot-caption").inner_text()
    assert caption.startswith("integrated gradients of token") and caption.endswith("at transformer.wte")
    explorer.locator(".hw-attribution").screenshot(path=str(lab.artifacts_dir / "gpt2-token-attribution-light.png"))
    _theme(lab, "JupyterLab Dark")
    try:
        page.wait_for_function(
            "() => getComputedStyle(document.querySelector('.hw-explorer')).backgroundColor !== 'rgb(255, 255, 255)'"
        )
        page.wait_for_timeout(500)  # the tokens are coloured again from the dark page's background
        dark = explorer.evaluate(TOKEN_COLOURS)
        assert min(t["contrast"] for t in dark) >= 4.5
        assert all(t["background"] != "rgb(255, 255, 255)" for t in dark)  # no white boxes on the dark page
        explorer.locator(".hw-attribution").screenshot(path=str(lab.artifacts_dir / "gpt2-token-attribution-dark.png"))
    finally:
        _theme(lab, "JupyterLab Light")

    # a method that does not fit: the error stays while the module is selected, and goes with the selection
    explorer.locator('.hw-row[data-path="transformer.h.1.mlp"]').click()
    explorer.locator("select.hw-attr-method option").first.wait_for(state="attached", timeout=15_000)
    assert "attention rollout" not in explorer.locator("select.hw-attr-method option").all_inner_texts()
    with lab.kernel(path) as kernel:
        kernel.evaluate(
            "ex.view.attribution = {**ex.view.attribution, 'layer': 'transformer.h.1.mlp', "
            "'method': 'gradcam', 'error': 'gradcam does not fit'}"
        )
    explorer.locator(".hw-attr-error", has_text="gradcam does not fit").wait_for(timeout=15_000)
    explorer.locator('.hw-row[data-path="transformer.h.0.mlp"]').click()
    page.wait_for_function("() => document.querySelector('.hw-attr-error').textContent === ''", timeout=15_000)

    # the logit lens: one row per block and the output, one column per token
    show_tab(explorer, "lens")
    explorer.locator("button.hw-lens-run").click()
    rows = explorer.locator("table.hw-lens-table tbody tr")
    rows.nth(2).wait_for(timeout=60_000)
    assert [rows.nth(i).get_attribute("data-layer") for i in range(3)] == [
        "transformer.h.0",
        "transformer.h.1",
        "output",
    ]
    header = explorer.locator("table.hw-lens-table thead th").all_inner_texts()
    assert header[1:] == WORDS
    with lab.kernel(path) as kernel:
        top = kernel.evaluate_json("[row[0] for row in ex.logit_lens(top_k=1)['labels'][-1][0]]")
    shown = explorer.locator('table.hw-lens-table tr[data-layer="output"] .hw-lens-token').all_inner_texts()
    assert shown == top
    explorer.locator(".hw-lens-panel").screenshot(path=str(lab.artifacts_dir / "gpt2-logit-lens.png"))

    # a patch sweep from Python lands in the patching panel
    with lab.kernel(path, timeout=120) as kernel:
        kernel.evaluate(
            "clean = tokenizer('the cat sat on a mat', return_tensors='pt')['input_ids']\n"
            "corrupt = tokenizer('the dog sat on a mat', return_tensors='pt')['input_ids']\n"
            "sweep = ex.patch_sweep(clean, corrupt)"
        )
    show_tab(explorer, "patching")  # offered from the start: a GPT-2 with example inputs
    explorer.locator("img.hw-patching-image").wait_for(timeout=30_000)
    assert "layers patched in at each of 6 positions" in explorer.locator(".hw-patching-caption").inner_text()
    assert explorer.locator("div.hw-error").is_hidden()
    explorer.locator(".hw-patching-panel").screenshot(path=str(lab.artifacts_dir / "gpt2-patch-sweep.png"))
