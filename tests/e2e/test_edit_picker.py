"""The inspector's edit picker on a GPT-2 in a real JupyterLab: ablate heads on an attention module, and patch a
block's output from a recorded run; each attached by a click, checked in the kernel after a Run."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator

from ._lab import Lab

pytestmark = pytest.mark.e2e

GPT2 = """
import torch
import transformers
from hookwidgets import HookExplorer

torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=64)
model = transformers.GPT2LMHeadModel(config).eval()
ids = torch.randint(3, 64, (1, 6), generator=torch.Generator().manual_seed(1))
clean = model(ids).logits.detach()
ex = HookExplorer(model, example_inputs=ids)
"""
CHANGED = "[h.target for h in ex.hooks], [h.as_dict()['edit'] for h in ex.hooks], not model(ids).logits.equal(clean)"


def _open(lab: Lab, name: str, cells: list[str]) -> Locator:
    lab.run_cells(name, cells)
    explorer = lab.page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="transformer"]').wait_for(timeout=30_000)
    explorer.locator("button.hw-expand-all").click()
    return explorer


def _select(explorer: Locator, path: str) -> None:
    explorer.locator(f'.hw-row[data-path="{path}"]').click()
    explorer.locator(".hw-info dd", has_text=path).first.wait_for(timeout=15_000)
    explorer.locator('.hw-info[aria-busy="false"]').wait_for(timeout=15_000)  # Python's answer for this path


def _run(explorer: Locator, step: int) -> None:
    explorer.locator("button.hw-run").click()
    explorer.locator('.hw-status[data-state="idle"]', has_text=f"step {step}:").wait_for(timeout=60_000)


def test_ablate_heads_is_offered_on_an_attention_module_and_attached_by_a_click(lab: Lab) -> None:
    explorer = _open(lab, "edit-heads.ipynb", [GPT2 + "ex"])
    edit = explorer.locator("select.hw-edit")
    _select(explorer, "transformer.h.1.mlp")
    edit.locator('option[value="mean_ablate"]').wait_for(state="attached")
    assert edit.locator('option[value="ablate_heads"]').count() == 0  # no heads on an MLP
    _select(explorer, "transformer.h.1.attn")
    edit.locator('option[value="ablate_heads"]').wait_for(state="attached", timeout=15_000)
    edit.select_option("ablate")  # says what each dim of the module's output is
    axes = "dim 0: batch (1) · dim 1: tokens (6) · dim 2 or -1: features (32)"
    assert explorer.locator(".hw-edit-axes").inner_text() == axes
    assert explorer.locator("input.hw-edit-dim").input_value() == "1"
    explorer.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / "edit-picker-ablate-dim.png"))
    edit.select_option("ablate_heads")
    arg, toggle = explorer.locator("input.hw-edit-arg"), explorer.locator('input.hw-toggle[data-kind="forward"]')
    arg.fill("1, 4")
    toggle.click()  # refused in the page: the module has 4 heads
    problem = explorer.locator(".hw-edit-problem")
    assert problem.inner_text() == "ablate heads: head 4 is out of range, this module has 4 (0 to 3)"
    assert not toggle.is_checked()
    arg.fill("0, 2")
    toggle.check()
    badge = '.hw-row[data-path="transformer.h.1.attn"] .hw-badge[data-kind="forward"]'
    explorer.locator(badge).wait_for(timeout=15_000)
    assert problem.inner_text() == ""
    _run(explorer, 1)
    with lab.kernel("edit-heads.ipynb") as kernel:
        targets, edits, changed = kernel.evaluate_json(f"[{CHANGED}]")
    assert (targets, edits, changed) == (["transformer.h.1.attn"], [[["ablate_heads", [0, 2]]]], True)
    assert "ablate_heads 0,2" in explorer.locator(".hw-hook-action").inner_text()


def test_a_blocks_output_is_patched_from_a_recorded_run(lab: Lab) -> None:
    recorded = """
ex.attach("transformer.h.0", "forward")
ex.run(torch.randint(3, 64, (1, 6), generator=torch.Generator().manual_seed(5)))  # step 1: other tokens
ex.detach("transformer.h.0", "forward")
ex.attach("transformer.h.1", "forward")
ex.run(ids[:, :4])  # step 2: a shorter input, whose output cannot replace the example inputs'
ex.detach("transformer.h.1", "forward")
ex
"""
    explorer = _open(lab, "edit-patch.ipynb", [GPT2, recorded])
    edit, problem = explorer.locator("select.hw-edit"), explorer.locator(".hw-edit-problem")
    toggle = explorer.locator('input.hw-toggle[data-kind="forward"]')
    _select(explorer, "transformer.wpe")  # never captured: the picker says how to get a record
    edit.select_option("replace")
    hint = explorer.locator(".hw-edit-hint")
    assert hint.is_visible() and "capture its forward, Run, then pick the run" in hint.inner_text()
    assert explorer.locator("select.hw-edit-record").is_hidden()

    _select(explorer, "transformer.h.1")
    records = explorer.locator("select.hw-edit-record")
    records.locator('option[value="2/0"]').wait_for(state="attached", timeout=15_000)
    assert records.locator("option").all_inner_texts() == ["step 2 · 1×4×32"]
    toggle.click()  # the engine refuses the shape: said in the picker, and it stays there
    problem.filter(has_text="has shape (1, 4, 32), the hooked tensor (1, 6, 32)").wait_for(timeout=15_000)
    assert not toggle.is_checked()
    explorer.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / "edit-picker-patch-refused.png"))

    _select(explorer, "transformer.h.0")  # another selection: the problem clears
    records.locator('option[value="1/0"]').wait_for(state="attached", timeout=15_000)
    assert problem.inner_text() == "" and edit.input_value() == "replace"
    toggle.check()
    explorer.locator('.hw-row[data-path="transformer.h.0"] .hw-badge[data-kind="forward"]').wait_for(timeout=15_000)
    _run(explorer, 3)
    with lab.kernel("edit-patch.ipynb") as kernel:
        targets, edits, changed = kernel.evaluate_json(f"[{CHANGED}]")
    assert (targets, edits, changed) == (["transformer.h.0"], [[["replace", "tensor (1, 6, 32)"]]], True)
    assert "patches[0]" in explorer.locator("details.hw-code pre").text_content()  # the code shows, folded
