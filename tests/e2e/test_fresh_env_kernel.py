"""The wheel's widget in a browser: JupyterLab from the dev environment, the notebook's kernel in the fresh
environment (torch, the wheel and ipykernel only). The bundle shipped in the wheel renders and answers clicks."""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest

from tests.release._fresh_env import FreshEnv

from ._lab import Lab
from ._server import JupyterServer

pytestmark = pytest.mark.e2e

KERNEL = "hookwidgets-wheel"
LAYER = "conv"
CELL = """
from collections import OrderedDict

import torch
from torch import nn

from hookwidgets import HookExplorer

model = nn.Sequential(OrderedDict(
    conv=nn.Conv2d(3, 4, 3, padding=1), act=nn.ReLU(), pool=nn.AdaptiveAvgPool2d(2), flat=nn.Flatten(),
    fc=nn.Linear(16, 5),
))
ex = HookExplorer(model, example_inputs=torch.randn(1, 3, 8, 8))
ex
"""


def _register_kernel(server: JupyterServer, env: FreshEnv) -> None:
    """A kernelspec for the fresh environment's python, in the server's own (temporary) Jupyter data dir."""
    spec = {
        "argv": [str(env.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hookwidgets wheel",
        "language": "python",
    }
    folder = server.data_dir / "kernels" / KERNEL
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(spec))


def _selected_in_python(lab: Lab, path: str, expected: str, timeout: float = 10.0) -> str:
    """Python's ``ex.view.selected`` once it is ``expected`` (the page's save reaches the kernel asynchronously)."""
    deadline = time.monotonic() + timeout
    with lab.kernel(path) as kernel:
        while (selected := kernel.evaluate_json("ex.view.selected")) != expected and time.monotonic() < deadline:
            time.sleep(0.2)
    return selected


@pytest.mark.timeout(900)  # the first test to ask for the fresh environment waits for it to be built (~1 min)
def test_the_wheels_widget_renders_and_answers_clicks_on_a_kernel_of_the_fresh_environment(
    fresh_env: FreshEnv, lab: Lab
) -> None:
    _register_kernel(lab.server, fresh_env)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "hookwidgets wheel", "language": "python"}
    path = lab.write_notebook("fresh-env.ipynb", nb)
    lab.open_notebook(path, timeout=180)  # torch's first import in the fresh environment compiles its bytecode
    lab.run_all(path, timeout=180)

    with lab.kernel(path) as kernel:
        where = kernel.evaluate_json("[__import__('sys').prefix, __import__('hookwidgets').__file__]")
    assert Path(where[0]) == fresh_env.root  # the kernel is the fresh environment's python
    assert Path(where[1]).is_relative_to(fresh_env.root)  # and imports the wheel's hookwidgets, not the repository's

    explorer = lab.page.locator(".hw-explorer")
    explorer.wait_for(timeout=60_000)
    rows = explorer.locator(".hw-row").evaluate_all("els => els.map((e) => e.dataset.path)")
    assert rows == ["", "conv", "act", "pool", "flat", "fc"]

    row = explorer.locator(f'.hw-row[data-path="{LAYER}"]')
    row.click()
    explorer.locator(f'.hw-row.hw-selected[data-path="{LAYER}"]').wait_for(timeout=10_000)
    assert _selected_in_python(lab, path, LAYER) == LAYER

    explorer.locator('input.hw-toggle[data-kind="forward"]').check()
    row.locator('.hw-badge[data-kind="forward"]').wait_for(timeout=15_000)  # Python attached it and said so
    explorer.locator("button.hw-run").click()
    image = explorer.locator('img.hw-plot[data-kind="forward"]')
    image.wait_for(timeout=60_000)  # drawn by the fresh environment's matplotlib
    lab.page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    with lab.kernel(path) as kernel:
        assert kernel.evaluate_json("[[h.target, h.kind, h.fired] for h in ex.hooks]") == [[LAYER, "forward", 1]]
    lab.screenshot("fresh-env-kernel")
