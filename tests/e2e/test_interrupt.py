"""A kernel interrupt while the explorer updates live: the kernel comes back, the explorer still works.

A training loop of a small MLP runs with hooks of many kinds and live updates pushed on every step, so
most of the loop's time is hook and update code and the interrupt is likely to land there (each round
prints where it landed). JupyterLab's interrupt command stops it, three times; after each, the kernel
is idle, the cell failed with KeyboardInterrupt, the hook dicts hold the explorer's hooks and nothing
else; then a Run click round-trips, and ``ex.close()`` leaves the model exactly as found.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from playwright.sync_api import Page

from ._kernel import NotebookKernel
from ._lab import Lab

pytestmark = pytest.mark.e2e

SETUP = """
import torch
import torch.nn.modules.module as module_globals
from torch import nn
from hookwidgets import HookExplorer
from hookwidgets.widget import live

GLOBALS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_forward_hooks_with_kwargs",
           "_global_forward_hooks_always_called", "_global_backward_pre_hooks", "_global_backward_hooks")
LOCALS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks", "_forward_hooks_with_kwargs",
          "_forward_hooks_always_called", "_backward_pre_hooks", "_backward_hooks")

def snapshot():
    state = {f"{p}:{d}": list(getattr(m, d)) for p, m in model.named_modules() for d in LOCALS}
    state.update({f"{p}:full": m._is_full_backward_hook for p, m in model.named_modules()})
    state.update({f"{n}:hooks": list(q._backward_hooks or {}) for n, q in model.named_parameters()})
    state.update({g: list(getattr(module_globals, g)) for g in GLOBALS})
    state["global full"] = module_globals._global_is_full_backward_hook
    state["modes"] = torch._C._len_torch_function_stack()
    state["module call"] = nn.Module.__call__
    return state

torch.manual_seed(0)
model = nn.Sequential()
model.add_module("features", nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh()))
model.add_module("classifier", nn.Sequential())
model.classifier.add_module("fc", nn.Linear(16, 4))
images, labels = torch.randn(16, 8), torch.randint(0, 4, (16,))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
before = snapshot()
ex = HookExplorer(model, example_inputs=images[:2])
ex.attach("features.0", ["forward", "grad"])
ex.attach("classifier.fc", ["backward", "backward_pre"])
ex.attach("classifier.fc.weight", "post_accumulate", action="stats")
ex.attach("", ["global_forward", "global_grad"], action="stats")
ex.attach("classifier.fc/AddmmBackward0#0", "node_pre")
attached = snapshot()
live.PUSH_INTERVAL_S, live.MAX_SHARE = 0.0, 1.0  # push on every step: the interrupt lands in updates often
ex
"""

LOOP = """
steps = 0
while True:
    optimizer.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(images), labels).backward()
    optimizer.step()
    steps += 1
"""

_START_ALL = """
(path) => {
  const panel = window.__hwFindPanel(path);
  window.jupyterapp.commands.execute('notebook:run-all-cells', {widgetId: panel.id});  // not awaited: it never ends
}
"""

_RERUN_LOOP = """
(path) => {
  const panel = window.__hwFindPanel(path);
  panel.content.activeCellIndex = 1;
  window.jupyterapp.commands.execute('notebook:run-cell', {widgetId: panel.id});  // not awaited: it never ends
}
"""

_INTERRUPT = """
async (path) => {
  const panel = window.__hwFindPanel(path);
  await window.jupyterapp.commands.execute('notebook:interrupt-kernel', {widgetId: panel.id});
}
"""

_CELL = """
([path, index]) => {
  const cell = window.__hwFindPanel(path).content.widgets[index];
  const prompt = cell.node.querySelector('.jp-InputPrompt').textContent;
  const outputs = cell.model.outputs.toJSON();
  const errors = outputs.filter((o) => o.output_type === 'error');
  const streams = outputs.filter((o) => o.output_type === 'stream').map((o) => [].concat(o.text).join(''));
  return {prompt, streams, errors: errors.map((o) => ({ename: o.ename, traceback: o.traceback.join('\\n')}))};
}
"""


def test_a_kernel_interrupt_during_live_updates_leaves_the_kernel_and_the_explorer_working(lab: Lab) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(LOOP)])
    path = lab.write_notebook("interrupt.ipynb", nb)
    lab.open_notebook(path)
    page = lab.page
    page.evaluate(_START_ALL, path)
    setup = wait_cell_done(page, path, 0, timeout=180)
    assert setup["errors"] == [], setup["errors"]
    explorer = page.locator(".hw-explorer")
    explorer.wait_for(timeout=120_000)
    status = explorer.locator(".hw-status")
    step = 0
    for round_ in range(3):
        if round_:
            page.evaluate(_RERUN_LOOP, path)
        page.wait_for_function(  # the loop runs and its live updates reach the page
            "([el, after]) => el.dataset.state === 'live' && Number(/step ([0-9]+)/.exec(el.textContent)?.[1]) > after",
            arg=[status.element_handle(), step + 20],
            timeout=120_000,
        )
        page.evaluate(_INTERRUPT, path)
        lab.wait_kernel_idle(path, timeout=60)
        # The kernel's idle status can reach the page before the cell's error and execute reply do.
        cell = wait_cell_done(page, path, 1)
        assert "[*]" not in cell["prompt"]
        page.wait_for_function("(el) => el.dataset.state === 'idle'", arg=status.element_handle(), timeout=30_000)
        traceback = _interrupt_traceback(cell)
        landed = " > ".join(re.findall(r"File [^,]*?([\w.]+\.py)", traceback))
        print(f"round {round_}: the interrupt landed in {landed}")  # pytest -s shows where
        with lab.kernel(path) as kernel:
            state = _kernel_state(kernel)
        check_state(state)
        assert state["step"] > step + 20
        step = state["step"]
    lab.screenshot("interrupt-after")

    # The explorer still works: a Run click reaches the kernel, runs, and its result comes back.
    explorer.locator("button.hw-run").click()
    expected = state["step"] + 1
    page.wait_for_function(
        "([el, step]) => el.dataset.state === 'idle' && el.textContent.startsWith(`step ${step}: forward, then`)",
        arg=[status.element_handle(), expected],
        timeout=60_000,
    )
    with lab.kernel(path) as kernel:
        after_run = _kernel_state(kernel)
        records = kernel.evaluate_json(
            "[ex.captures['features.0']['forward'][-1].step, ex.captures['classifier.fc']['backward'][-1].step]"
        )
        check_state(after_run)
        assert after_run["step"] == expected and records == [expected, expected]
        closed = kernel.evaluate_json("(ex.close(), snapshot() == before)[1]")
    assert closed is True


def _interrupt_traceback(cell: dict) -> str:
    """The cell's KeyboardInterrupt traceback: its error output, or the text IPython printed when formatting it failed.

    IPython's rich traceback formatter can itself fail on a frame the interrupt left half-run; it then prints
    "Unexpected exception formatting exception" and the plain traceback to a stream instead of an error output.
    """
    if cell["errors"]:
        assert [e["ename"] for e in cell["errors"]] == ["KeyboardInterrupt"], cell
        return re.sub(r"\x1b\[[0-9;]*m", "", cell["errors"][0]["traceback"])
    printed = "".join(cell["streams"])
    assert "Unexpected exception formatting exception" in printed and "KeyboardInterrupt" in printed, cell
    print(f"IPython could not format the interrupt's traceback:\n{printed}")
    return printed


def wait_cell_done(page: Page, path: str, index: int, timeout: float = 60) -> dict:
    """Wait until cell ``index`` has its execution count (the reply came), then its prompt and error outputs."""
    done = f"(args) => {{ const c = ({_CELL})(args); return !c.prompt.includes('[*]') && /[0-9]/.test(c.prompt); }}"
    page.wait_for_function(done, arg=[path, index], timeout=timeout * 1000)
    return page.evaluate(_CELL, [path, index])


def check_state(state: dict) -> None:
    """The hook dicts hold the explorer's hooks and nothing else; every hook is there, none failed."""
    assert state["same_as_attached"], state["differences"]
    assert [h[:2] for h in state["hooks"]] == [
        ["features.0", "forward"],
        ["features.0", "grad"],
        ["classifier.fc", "backward"],
        ["classifier.fc", "backward_pre"],
        ["classifier.fc.weight", "post_accumulate"],
        ["", "global_forward"],
        ["", "global_grad"],
        ["classifier.fc/AddmmBackward0#0", "node_pre"],
    ]
    assert all(error is None for _, _, error in state["hooks"]), state["hooks"]


def _kernel_state(kernel: NotebookKernel) -> dict:
    """Hook dicts against the snapshot taken after attaching, the explorer's hooks, and the step counts."""
    return kernel.evaluate_json(
        "{'same_as_attached': snapshot() == attached, "
        "'differences': [k for k in attached if snapshot().get(k) != attached[k]], "
        "'hooks': [[h.target, h.kind, h.last_error] for h in ex.hooks if not h.foreign], "
        "'step': ex.step, 'steps': steps}"
    )
