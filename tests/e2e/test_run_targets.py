"""The run bar on a language model in a real JupyterLab: targets in the model's words, a position field, and a
default Run that backpropagates from the top next token."""

from __future__ import annotations

import pytest

from ._lab import Lab

pytestmark = pytest.mark.e2e

GPT2_MODEL = """
import torch
import transformers
from hookwidgets import HookExplorer

torch.manual_seed(0)
config = transformers.GPT2Config(
    n_layer=2, n_embd=32, n_head=4, vocab_size=96, n_positions=64, bos_token_id=1, eos_token_id=2
)
model = transformers.GPT2LMHeadModel(config).eval()
ids = torch.randint(3, 96, (1, 8), generator=torch.Generator().manual_seed(1))
ex = HookExplorer(model, example_inputs={"input_ids": ids})
ex.attach("transformer.ln_f.weight", "grad")
ex
"""


def test_the_run_bar_of_a_language_model_offers_next_tokens_and_runs_from_the_top_one(lab: Lab) -> None:
    path = lab.run_cells("gpt2-run.ipynb", [GPT2_MODEL], timeout=180)
    explorer = lab.page.locator(".hw-explorer")
    explorer.locator(".hw-row").first.wait_for(timeout=30_000)
    target = explorer.locator("select.hw-run-target")
    options = target.locator("option").evaluate_all("els => els.map((e) => [e.value, e.textContent])")
    assert options[0] == ["top", "top next token"] and len(options) == 6
    assert all(text.startswith(f"token id {value} (") for value, text in options[1:])
    position = explorer.locator("input.hw-run-position")
    assert position.is_visible() and position.get_attribute("min") == "-8" and position.get_attribute("max") == "7"

    explorer.locator("button.hw-run").click()  # the default: the top next token at the last position
    status = explorer.locator('.hw-status[data-state="idle"]', has_text="top next token")
    status.wait_for(timeout=60_000)
    assert status.inner_text() == "step 1: forward, then backward from output.logits[:, -1] · top next token"
    assert explorer.locator("div.hw-error").is_hidden()  # no error box
    explorer.locator(".hw-header").screenshot(path=str(lab.artifacts_dir / "gpt2-run-bar.png"))

    target.select_option(options[1][0])
    position.fill("2")
    explorer.locator("button.hw-run").click()
    explorer.locator(".hw-status", has_text="step 2:").wait_for(timeout=60_000)
    assert explorer.locator(".hw-status").inner_text() == (
        f"step 2: forward, then backward from output.logits[:, 2] · token id {options[1][0]}"
    )
    with lab.kernel(path) as kernel:
        seen = kernel.evaluate_json("[ex.last_score.position, len(ex.captures['transformer.ln_f.weight']['grad'])]")
    assert seen == [2, 2]
