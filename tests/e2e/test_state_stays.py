"""State that stays and says when it lags, in a real JupyterLab at 600 px: an edit on its badge (its tooltip naming
it) and in the run bar; a Grad-CAM kept across a selection change, naming both modules; while the user's loop runs,
the Training panel's lag mark, the memory meter saying "evicting", and a status line whose height does not move;
after ``ex.close()`` the placeholder in place of the widget. One notebook, one kernel; light and dark."""

from __future__ import annotations

from typing import Any

import nbformat
import pytest
from playwright.sync_api import Locator

from ._lab import Lab, show_tab
from .test_layout import _left_area
from .test_theme import LOW_CONTRAST
from .test_transformers import _theme

pytestmark = pytest.mark.e2e

# A small CNN whose capture budget holds three of its conv's outputs, an edit on its head, a watched optimizer.
SETUP = """
from collections import OrderedDict
import torch
from torch import nn
from hookwidgets import HookExplorer

torch.manual_seed(0)
model = nn.Sequential(OrderedDict(
    conv=nn.Conv2d(3, 8, 3, padding=1), relu=nn.ReLU(), pool=nn.AdaptiveAvgPool2d(2), flat=nn.Flatten(),
    fc=nn.Linear(32, 10),
))
x = torch.randn(2, 3, 16, 16)
ex = HookExplorer(model, example_inputs=x, memory_budget=3 * 2 * 8 * 16 * 16 * 4)
ex.attach("conv", "forward")
ex.attach("fc", "forward", edit=("scale", 0.5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
ex.watch_optimizer(optimizer)
ex
"""

LOOP = """
import time
started = time.monotonic()
while time.monotonic() - started < 10:
    optimizer.zero_grad()
    model(x).square().mean().backward()
    optimizer.step()
    time.sleep(0.01)
"""

EDIT = "scale 0.5 at forward on 'fc'"
# Where the header's status line is and how tall, and where the panes start: what a wrapping status would move.
PLACES = """(root) => {
  const line = root.querySelector('.hw-status-line').getBoundingClientRect();
  const status = root.querySelector('.hw-status');
  return {line: line.height, top: line.top, body: root.querySelector('.hw-body').getBoundingClientRect().top,
          text: status.textContent, title: status.title, lines: Math.round(status.scrollHeight / line.height)};
}"""


def _places(explorer: Locator) -> dict[str, Any]:
    return explorer.evaluate(PLACES)


def test_edits_kept_results_lag_eviction_a_steady_status_line_and_the_closed_placeholder(lab: Lab) -> None:
    page = lab.page
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SETUP)])
    path = lab.write_notebook("state-stays.ipynb", nb)
    lab.open_notebook(path)
    page.set_viewport_size({"width": 600, "height": 1200})
    _left_area(lab, shown=False)  # a narrow screen: the file browser closed, as a user there keeps it
    lab.run_all(path, timeout=180)
    explorer = page.locator(".hw-explorer")
    try:
        explorer.locator('.hw-row[data-path="fc"]').wait_for(timeout=30_000)

        # The edit: its own badge, its tooltip naming it; the capture's badge stays plain; the run bar says it.
        badge = explorer.locator('.hw-row[data-path="fc"] .hw-badge[data-kind="forward"]')
        assert "hw-badge-edit" in badge.get_attribute("class")
        assert badge.inner_text().startswith("✎")
        assert f"edit: {EDIT}" in badge.get_attribute("title")
        plain = explorer.locator('.hw-row[data-path="conv"] .hw-badge[data-kind="forward"]')
        assert "hw-badge-edit" not in plain.get_attribute("class") and "edit:" not in plain.get_attribute("title")
        edits = explorer.locator(".hw-run-edits")
        assert edits.inner_text() == f"✎ running with 1 edit: {EDIT}"
        assert edits.get_attribute("title").splitlines()[1:] == [EDIT]

        # A Grad-CAM of conv, kept when fc is selected: its image stays and its caption names both.
        explorer.locator('.hw-row[data-path="conv"]').click()
        show_tab(explorer, "attribution")
        explorer.locator("select.hw-attr-method").select_option("gradcam")
        explorer.locator("button.hw-attr-run").click()
        image = explorer.locator("img.hw-attr-image")
        image.wait_for(timeout=60_000)
        caption = explorer.locator(".hw-attribution .hw-plot-caption")
        assert caption.inner_text().startswith("Grad-CAM of") and caption.inner_text().endswith("at conv")
        explorer.locator('.hw-row[data-path="fc"]').click()
        explorer.locator('.hw-row.hw-selected[data-path="fc"]').wait_for(timeout=15_000)
        caption.filter(has_text="(selected: fc)").wait_for(timeout=15_000)
        assert caption.inner_text().endswith("at conv (selected: fc)") and image.is_visible()
        caption.scroll_into_view_if_needed()
        explorer.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / "state-attribution-kept.png"))

        idle = _places(explorer)
        assert idle["text"] in ("viewing fc", "") or idle["text"].startswith(("Grad-CAM", "step")), idle
        assert idle["lines"] == 1 and idle["title"].startswith(idle["text"]), idle

        # The user's loop: the Training panel lags and says so, the meter evicts and says so, the status stays put.
        with lab.running(path, LOOP):  # the user's loop, on a second client
            explorer.locator('.hw-status[data-state="live"]').wait_for(timeout=30_000)
            explorer.locator(".hw-progress:not([hidden])").wait_for(timeout=10_000)
            live = _places(explorer)
            assert "your code is running" in live["title"], live
            assert live["lines"] == 1, live  # one line, cut with "…", the whole in its title
            assert (live["line"], live["top"], live["body"]) == (idle["line"], idle["top"], idle["body"]), (idle, live)
            show_tab(explorer, "training")
            explorer.locator("tr.hw-ratio-row").first.wait_for(timeout=20_000)  # drawn once during the loop
            lag = explorer.locator(".hw-training-lag", has_text="updating…").filter(has_not_text="step 0 of")
            lag.wait_for(timeout=20_000)  # and behind the live step until its next turn
            assert " of " in lag.inner_text()
            explorer.locator(".hw-meter-text.hw-meter-evicting", has_text="evicting").wait_for(timeout=20_000)
            assert "hw-meter-evicting" in explorer.locator(".hw-meter").get_attribute("class")
            lab.screenshot("state-live-600")
        explorer.locator('.hw-status[data-state="idle"]').wait_for(timeout=30_000)
        assert explorer.locator(".hw-training-lag").is_hidden()  # the cell ended: current again
        assert _places(explorer)["body"] == idle["body"]
        meter = explorer.locator(".hw-meter-text")
        assert meter.inner_text().endswith("· evicting") and "budget is full" in meter.get_attribute("title")

        # Light and dark at 600 px: the edit's badge, the run bar and the meter read at 4.5:1.
        show_tab(explorer, "inspector")
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            _theme(lab, theme)
            page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=30_000)  # the theme's splash
            shade = "light" if theme.endswith("Light") else "dark"
            for part in (".hw-header", '.hw-row[data-path="fc"]'):
                low = explorer.locator(part).evaluate(LOW_CONTRAST)
                assert low == [], f"{theme}, {part}: " + "\n".join(low)
            explorer.screenshot(path=str(lab.artifacts_dir / f"state-edits-{shade}-600.png"))
        _theme(lab, "JupyterLab Light")

        # Closed: the output keeps a line saying so, in place of the widget.
        with lab.kernel(path) as kernel:
            restored = kernel.evaluate_json("(ex.close(), not model.fc._forward_hooks)[1]")
        assert restored is True
        closed = page.locator(".hw-explorer.hw-closed")
        closed.wait_for(timeout=15_000)
        assert closed.inner_text() == "closed: hooks removed, model as found"
        assert page.locator(".hw-explorer").count() == 1 and closed.is_visible()
        closed.screenshot(path=str(lab.artifacts_dir / "state-closed-600.png"))
    finally:
        _theme(lab, "JupyterLab Light")
        _left_area(lab, shown=True)
