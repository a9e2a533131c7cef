"""A GPT-2 explorer in a real JupyterLab, as a user builds it: tokens from a tokenizer, the default Run, a block's
hidden states with token labels, and an attention module's heads with sdpa left on."""

from __future__ import annotations

import pytest

from ._lab import Lab
from ._snippets import gpt2

pytestmark = pytest.mark.e2e

GPT2_WITH_TOKENIZER = (
    gpt2("model", n_embd=32, n_head=4)
    + """from hookwidgets import HookExplorer

ex = HookExplorer(model, example_inputs=tokenizer("the cat sat on a mat", return_tensors="pt"), tokenizer=tokenizer)
ex
"""
)
WORDS = ["the", "cat", "sat", "on", "a", "mat"]


def _theme(lab: Lab, name: str) -> None:
    """Switch JupyterLab's theme as its Settings menu does, and wait until the page wears it."""
    lab.page.evaluate(f"window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{name}'}})")
    light = "true" if name == "JupyterLab Light" else "false"
    lab.page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=30_000)


def test_a_gpt2_explorer_runs_by_default_labels_tokens_and_shows_attention_heads(lab: Lab) -> None:
    path = lab.run_cells("gpt2-tokens.ipynb", [GPT2_WITH_TOKENIZER], timeout=180)
    page = lab.page
    page.set_viewport_size({"width": 1400, "height": 1400})
    explorer = page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="transformer"]').wait_for(timeout=30_000)

    # a block's forward hook, attached by a click as a user does
    explorer.locator("button.hw-expand-all").click()
    explorer.locator('.hw-row[data-path="transformer.h.0"]').click()
    explorer.locator('input.hw-toggle[data-kind="forward"]').check()
    explorer.locator('.hw-row[data-path="transformer.h.0"] .hw-badge[data-kind="forward"]').wait_for(timeout=15_000)

    # the run bar names the next tokens in the tokenizer's words; the default Run backpropagates the top one
    options = explorer.locator("select.hw-run-target option").all_inner_texts()
    assert options[0] == "top next token"
    assert any(f'"{word}"' in text for text in options[1:] for word in WORDS)
    explorer.locator("button.hw-run").click()
    status = explorer.locator('.hw-status[data-state="idle"]', has_text="step 1:")
    status.wait_for(timeout=60_000)
    assert status.inner_text() == "step 1: forward, then backward from output.logits[:, -1] · top next token"
    assert explorer.locator("div.hw-error").is_hidden()  # no error box
    assert explorer.locator("select.hw-attr-target option").all_inner_texts() == options  # the same words

    # the block's hidden states: a token map labelled with the tokens
    figure = explorer.locator('figure[data-kind="forward"]')
    figure.locator("button.hw-view-active", has_text="tokens").wait_for(timeout=30_000)
    with lab.kernel(path) as kernel:
        shown = kernel.evaluate_json("[(i['kind'], i['view'], i['tokens']) for i in ex.view.plots['items']]")
    assert shown == [["forward", "tokens", WORDS]]
    lab.screenshot("gpt2-block-token-map")

    # an attention module with no hook: its heads, computed with sdpa left on, one head picked
    explorer.locator('.hw-row[data-path="transformer.h.1.attn"]').click()
    heads = explorer.locator('figure[data-kind="attention"]')
    heads.locator("button.hw-view-active", has_text="heads").wait_for(timeout=30_000)
    picker = heads.locator("select.hw-head")
    assert picker.locator("option").all_inner_texts() == ["all 4 heads", "head 0", "head 1", "head 2", "head 3"]
    picker.select_option("2")
    heads.locator(".hw-plot-caption", has_text="head 2").wait_for(timeout=15_000)
    with lab.kernel(path) as kernel:
        seen = kernel.evaluate_json(
            "[model.config._attn_implementation, [i['tokens'] for i in ex.view.plots['items']], sorted(ex.attention())]"
        )
    assert seen == ["sdpa", [WORDS], ["transformer.h.0.attn", "transformer.h.1.attn"]]
    assert explorer.locator("div.hw-error").is_hidden()
    explorer.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / "gpt2-attention-heads-light.png"))
    _theme(lab, "JupyterLab Dark")
    try:
        explorer.screenshot(path=str(lab.artifacts_dir / "gpt2-explorer-dark.png"))
        page.set_viewport_size({"width": 900, "height": 1400})
        page.wait_for_timeout(300)  # the notebook lays out at the new width
        frame, run = explorer.bounding_box(), explorer.locator("button.hw-run").bounding_box()
        assert run["x"] + run["width"] <= frame["x"] + frame["width"]  # Run stays on the page, the bar wraps
        explorer.screenshot(path=str(lab.artifacts_dir / "gpt2-explorer-dark-900.png"))
    finally:
        _theme(lab, "JupyterLab Light")
