"""The Training panel in a real JupyterLab: a training loop's update ratios and its DDP communication."""

from __future__ import annotations

import nbformat
import pytest

from ._lab import Lab, show_tab

pytestmark = pytest.mark.e2e

MODEL = """
import tempfile
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from hookwidgets import HookExplorer

# One gloo rank in this kernel: DDP calls the communication hook as it would on a cluster.
dist.init_process_group("gloo", init_method=f"file://{tempfile.mkdtemp()}/rendezvous", rank=0, world_size=1)
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))
ddp = DDP(model)
ex = HookExplorer(ddp, example_inputs=torch.randn(4, 1, 8, 8))
ex
"""

LOOP = """
opt = torch.optim.SGD([
    {"params": model[0].parameters(), "lr": 1e-7},  # far too small a learning rate: flagged
    {"params": model[3].parameters(), "lr": 0.05},
])
monitor = ex.watch_optimizer(opt)
inspector = ex.watch_ddp()
for step in range(20):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(ddp(torch.randn(16, 1, 8, 8)), torch.randint(10, (16,)))
    loss.backward()
    opt.step()
"""

DECODED = "(img) => img.complete && img.naturalWidth > 0"


def test_the_training_panel_shows_update_ratios_and_ddp_of_the_users_loop(lab: Lab) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(MODEL), nbformat.v4.new_code_cell(LOOP)])
    path = lab.write_notebook("training.ipynb", nb)
    lab.open_notebook(path)
    lab.run_all(path, timeout=180)
    explorer = lab.page.locator(".hw-explorer")
    explorer.locator('button.hw-tab.hw-tab-fresh[data-tab="training"]').wait_for(timeout=30_000)  # marked: new
    show_tab(explorer, "training")
    panel = explorer.locator(".hw-training-panel")
    panel.wait_for(timeout=30_000)
    chart = panel.locator("img.hw-ratio-chart")
    chart.wait_for(timeout=30_000)
    with lab.kernel(path) as kernel:
        params = kernel.evaluate_json("[n for n, _ in ddp.named_parameters()]")
        newest = kernel.evaluate_json("{r['param']: r['ratio'] for r in monitor.records if r['step'] == 19}")
        ready = kernel.evaluate_json("[r['param'] for r in inspector.ready_order if r['step'] == inspector.step - 1]")
    rows = panel.locator("tr.hw-ratio-row")
    assert rows.evaluate_all("els => els.map((e) => e.dataset.param)") == params  # as text, in the model's order
    low = panel.locator("tr.hw-ratio-row.hw-ratio-low")
    assert low.evaluate_all("els => els.map((e) => e.dataset.param)") == [p for p in params if newest[p] < 1e-5]
    assert low.count() == 2  # the conv's weight and bias, stepped with lr=1e-7
    assert chart.evaluate(DECODED)  # the PNG bytes made an image

    panel.locator('th[data-field="ratio"]').click()
    assert panel.locator('th[data-field="ratio"]').get_attribute("aria-sort") == "descending"
    assert rows.first.get_attribute("data-param") == max(newest, key=newest.get)

    for image in ("img.hw-ddp-buckets", "img.hw-ddp-ranks"):
        panel.locator(image).wait_for(timeout=10_000)
        assert panel.locator(image).evaluate(DECODED)
    # named as in the tree and the ratio table (the DDP wrapper's "module.0.weight"), not as ddp.module names them
    shown = panel.locator("tr.hw-ready-row").evaluate_all("els => els.map((e) => e.dataset.param)")
    assert shown == ["module." + name for name in ready] and set(shown) <= set(params)
    assert "rank 0 of 1" in panel.locator(".hw-ddp-source").inner_text()
    lab.page.set_viewport_size({"width": 1400, "height": 1600})  # the whole panel fits the notebook's scroller
    panel.scroll_into_view_if_needed()
    explorer.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / "training-panel.png"))
