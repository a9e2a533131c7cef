"""The widget says what is going on, in a real JupyterLab: an edit changed on an attached hook applies at once, and
the static snapshot the notebook saves for pages without widgets follows it (hidden here); while a cell runs, the
inspector says the kernel is busy and the summary that it lags the live step; a failed Run names and marks its module,
with the explorer's own traceback frames folded."""

from __future__ import annotations

import json
import re
import time

import pytest

from ._lab import Lab, show_tab

pytestmark = pytest.mark.e2e

SETUP = """
from collections import OrderedDict
import torch
from torch import nn
from hookwidgets import HookExplorer

class Flaky(nn.Module):
    fail = False

    def forward(self, x):
        if self.fail:
            raise ValueError("flaky failed on purpose")
        return x

torch.manual_seed(0)
model = nn.Sequential(OrderedDict(
    features=nn.Sequential(OrderedDict(lin=nn.Linear(8, 16), act=nn.ReLU(), flaky=Flaky())),
    fc=nn.Linear(16, 4),
))
x = torch.randn(2, 8)
ex = HookExplorer(model, example_inputs=x)
ex.attach("", ["global_forward", "global_grad"], action="stats")
ex
"""

LOOP = """
import time
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
started = time.monotonic()
while time.monotonic() - started < 12:
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
    time.sleep(0.005)
"""


def test_edits_apply_at_once_the_busy_kernel_and_a_failed_run_are_said(lab: Lab) -> None:
    path = lab.run_cells("honest-state.ipynb", [SETUP], timeout=180)
    explorer = lab.page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="features"]').wait_for(timeout=30_000)
    explorer.locator("button.hw-expand-all").click()
    note = explorer.locator(".hw-stats-note")  # stats on every layer, attached from Python, and no statistics yet
    assert "Stats attached on every layer's output and gradient: Run, or your own training loop" in note.inner_text()

    # An attached hook's edit changed in the picker: the kernel's hook has it at once, and a Run uses it.
    explorer.locator('.hw-row[data-path="fc"]').click()
    toggle = explorer.locator('input.hw-toggle[data-kind="forward"]')
    toggle.wait_for(timeout=15_000)
    assert "the module's output, each time its forward returns" in toggle.locator("xpath=..").get_attribute("title")
    toggle.check()
    explorer.locator('.hw-row[data-path="fc"] .hw-badge[data-kind="forward"]').wait_for(timeout=15_000)
    explorer.locator("select.hw-edit").select_option("zero")
    explorer.locator(".hw-hook-action", has_text="zero").wait_for(timeout=15_000)
    explorer.locator("button.hw-run").click()
    explorer.locator('.hw-status[data-state="idle"]', has_text="step 1:").wait_for(timeout=60_000)
    note.wait_for(state="hidden", timeout=15_000)  # the Run filled the summary

    # The static snapshot, an output of its own under the widget for pages without widgets: here the widget shows,
    # once, and the snapshot's output is hidden whole (prompt and all), taking no height. The notebook keeps the
    # snapshot as the page left the explorer, with no cell run: saved, the .ipynb has the hook attached and run here.
    assert explorer.count() == 1
    snapshot = lab.page.locator(".jp-OutputArea-child:has(.hw-static)")
    assert snapshot.count() == 1 and snapshot.is_hidden() and snapshot.bounding_box() is None
    assert snapshot.evaluate("el => el.previousElementSibling.querySelectorAll('.hw-explorer').length") == 1
    saved = _saved_snapshot(lab, path, has="&lt;HookExplorer of Sequential: 6 modules, 3 hooks, step 1&gt;")
    (row,) = re.findall(r'<div class="hw-s-row[^"]*" title="fc">.*?</div>', saved)
    assert re.findall(r'data-kind="(\w+)"[^>]*>([^<]*)</span>', row) == [("forward", "fwd 1")]
    lab.screenshot("honest-state-snapshot-hidden")

    with lab.kernel(path) as kernel:
        edits, zeroed = kernel.evaluate_json(
            "[[h.as_dict()['edit'] for h in ex.hooks if h.target == 'fc'], bool((model(x) == 0).all())]"
        )
    assert (edits, zeroed) == ([[["zero"]]], True)
    badge = explorer.locator('.hw-row[data-path="fc"] .hw-badge[data-kind="forward"]')
    assert "forward: the module's output" in badge.get_attribute("title")

    # While the user's loop runs: the summary says it lags, a new selection says the kernel is busy.
    with lab.running(path, LOOP):  # the user's loop, on a second client
        explorer.locator('.hw-status[data-state="live"]').wait_for(timeout=30_000)
        show_tab(explorer, "summary")
        explorer.locator(".hw-summary-lag", has_text="updating…").wait_for(timeout=15_000)
        assert " of " in explorer.locator(".hw-summary-lag").inner_text()
        show_tab(explorer, "inspector")  # fc's capture, drawn at an earlier step, says so too
        explorer.locator(".hw-plot-lag", has_text="updating…").first.wait_for(timeout=15_000)
        explorer.locator('.hw-row[data-path="features.lin"]').click()
        busy = explorer.locator(".hw-kernel-busy")
        busy.wait_for(timeout=10_000)
        assert "busy running a cell" in busy.inner_text()
        assert explorer.locator(".hw-toggles .hw-hint").count() == 0  # not "No hook can be attached here."
        lab.screenshot("honest-state-busy")
    busy.wait_for(state="hidden", timeout=30_000)
    explorer.locator('input.hw-toggle[data-kind="forward"][data-path="features.lin"]').wait_for(timeout=15_000)
    assert explorer.locator(".hw-summary-lag").is_hidden()

    # A Run that fails inside a module: named, marked in the tree, selected by a click; own frames folded.
    with lab.kernel(path) as kernel:
        kernel.evaluate("model.features.flaky.fail = True")
    explorer.locator("button.hw-run").click()
    explorer.locator('.hw-status[data-state="error"]').wait_for(timeout=60_000)
    explorer.locator('.hw-row.hw-row-failed[data-path="features.flaky"]').wait_for(timeout=15_000)
    name = explorer.locator("button.hw-error-module")
    assert name.inner_text() == "Failed in features.flaky: select it"
    text = explorer.locator("pre.hw-error-text")
    assert "failed in module 'features.flaky' (Flaky)" in text.inner_text()
    folded = text.locator("details.hw-trace-own")
    assert folded.count() >= 1 and not folded.first.evaluate("d => d.open")
    assert "frames of hookwidgets" in folded.first.locator("summary").inner_text()
    shown = "".join(text.locator(".hw-trace-user").all_inner_texts())
    assert 'raise ValueError("flaky failed on purpose")' in shown  # the user's frame, unfolded
    explorer.locator(".hw-error").screenshot(path=str(lab.artifacts_dir / "honest-state-run-error.png"))
    name.click()
    explorer.locator(".hw-info dd", has_text="features.flaky").first.wait_for(timeout=15_000)
    explorer.locator("button.hw-error-dismiss").click()
    explorer.locator(".hw-row.hw-row-failed").wait_for(state="detached", timeout=15_000)

    # Selecting a hooked module shows its hook's edit in the picker: a change of the action keeps that edit.
    explorer.locator('.hw-row[data-path="features.act"]').click()
    explorer.locator('input.hw-toggle[data-path="features.act"]').first.wait_for(timeout=15_000)
    explorer.locator("select.hw-edit").select_option("scale")  # no hook here: nothing is sent
    explorer.locator('.hw-row[data-path="fc"]').click()
    explorer.locator('input.hw-toggle[data-path="fc"]').first.wait_for(timeout=15_000)
    assert explorer.locator("select.hw-edit").input_value() == "zero"
    explorer.locator("select.hw-action").select_option("stats")
    explorer.locator(".hw-hook-action", has_text="stats").wait_for(timeout=15_000)
    with lab.kernel(path) as kernel:
        assert kernel.evaluate_json("[[h.action, h.as_dict()['edit']] for h in ex.hooks if h.target == 'fc']") == [
            ["stats", [["zero"]]]
        ]


def _saved_snapshot(lab: Lab, path: str, has: str, timeout: float = 30.0) -> str:
    """The explorer's snapshot in the notebook file as JupyterLab saves it, once it ``has`` the given text (the
    kernel replaces it a second after the page's last change)."""
    deadline = time.monotonic() + timeout
    while True:
        lab.page.evaluate("async (path) => { await window.__hwFindPanel(path).context.save(); }", path)
        saved = json.loads((lab.server.root_dir / path).read_text(encoding="utf-8"))
        outputs = saved["cells"][0]["outputs"]
        snapshots = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
        assert len(snapshots) == 1, outputs  # the widget's output carries no HTML of its own
        html = "".join(snapshots[0])
        if has in html or time.monotonic() > deadline:
            heading = re.search(r'<div class="hw-s-head">(.*?)</div>', html)
            assert has in html, f"the saved snapshot was never replaced: {heading and heading.group(1)}"
            return html
        time.sleep(0.5)
