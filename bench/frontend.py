"""Frontend figures in a real JupyterLab + Chromium: how fast the explorer paints and stays interactive (issue 6).

Each measurement is one function ``(session, loads) -> Figure`` listed in ``MEASUREMENTS``; add a
measurement by writing such a function and listing it. Times are taken inside the page
(``performance.now()``), repeated ``--loads`` times (at least 15) after 3 warm-ups; the median with
p10–p90 is reported against the bar. Main-thread blocking is read from ``PerformanceObserver``
long-task entries (tasks over 50 ms; none means the longest task was under 50 ms). The run ends
with a markdown section for bench/RESULTS.md (command, date, machine, table with bars and verdicts).

Bars (issue 6): a 10,000-module explorer painted ≤ 1 s after its cell's output arrives; a 5,000-node
autograd graph painted collapsed ≤ 1 s; click → hook attached in Python → badge shown ≤ 150 ms.
Issue 25: a 600-node graph's search-and-centre ≤ 100 ms; switching tabs ≤ 100 ms; no main-thread task over 50 ms while
the view updates during a training loop (and what the open page costs that loop).
Issue 35: the value under the mouse of a 12-head attention figure shown ≤ 16 ms after the mousemove, no long task.

    .venv/bin/python bench/frontend.py                 # every measurement, 15 loads each
    .venv/bin/python bench/frontend.py --only tree_paint --only click_badge --loads 20
"""

from __future__ import annotations

import argparse
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat
from playwright.sync_api import Locator, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _protocol import MIN_PAIRS, WARMUP_PAIRS, machine, quantile, revision  # noqa: E402

from tests.e2e._browser import CHROMIUM_ARGS, require_chromium  # noqa: E402
from tests.e2e._lab import Lab  # noqa: E402
from tests.e2e._server import JupyterServer  # noqa: E402
from tests.e2e._snippets import gpt2  # noqa: E402

VIEWPORT = {"width": 1400, "height": 1000}

# 10 stages × 50 residual blocks × 10 autograd nodes (two Linear: Addmm, T, 2 AccumulateGrad each;
# ReLU; the residual Add) = 5,000 nodes. Expanding one stage fully shows 500 of them.
GRAPH_MODEL = """
import torch
from torch import nn
from hookwidgets import HookExplorer

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.act, self.lin2 = nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)
    def forward(self, x):
        return x + self.lin2(self.act(self.lin1(x)))

torch.manual_seed(0)
model = nn.Sequential(*[nn.Sequential(*[Block() for _ in range(50)]) for _ in range(10)])
x = torch.randn(2, 8)
"""

GRAPH_DISPLAY = """
if "ex" in globals():
    ex.close()
ex = HookExplorer(model, example_inputs=x)
assert len(ex.graph()["nodes"]) == 5000
ex
"""

# 6 stages × 10 of the blocks above = 600 autograd nodes, for the graph's search.
SEARCH_MODEL = """
import torch
from torch import nn
from hookwidgets import HookExplorer

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.act, self.lin2 = nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)
    def forward(self, x):
        return x + self.lin2(self.act(self.lin1(x)))

torch.manual_seed(0)
model = nn.Sequential(*[nn.Sequential(*[Block() for _ in range(10)]) for _ in range(6)])
x = torch.randn(2, 8)
"""

SEARCH_DISPLAY = """
if "ex" in globals():
    ex.close()
ex = HookExplorer(model, example_inputs=x)
assert len(ex.graph()["nodes"]) == 600
ex
"""

EXPLORER_DISPLAY = """
ex = HookExplorer(model, example_inputs=x)
ex
"""

# 9,998 Linear in a ModuleList + the list + the root = 10,000 modules (the "huge model").
WIDE_MODEL = """
from torch import nn
from hookwidgets import HookExplorer

class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(1, 1) for _ in range(9998))

model = Wide()
"""

WIDE_DISPLAY = """
if "ex" in globals():
    ex.close()
ex = HookExplorer(model)
assert ex.view.tree and len(list(model.modules())) == 10000
ex
"""

CLICK_MODEL = """
import torch
from hookwidgets import HookExplorer
from hookwidgets.examples import DigitsCNN

torch.manual_seed(0)
model = DigitsCNN().eval()
ex = HookExplorer(model, example_inputs=torch.randn(1, 1, 32, 32))
ex.run(target=0)  # captures exist, as after a first Run in the quickstart
ex
"""

# Issue 25's training loop, in the notebook: a GPT-2-shaped LM (6 layers, width 128, batch 8×64) under AdamW with
# stats on every layer's output and gradient, one capture and the optimizer monitor; the explorer shown.
LIVE_MODEL = """
import time
import torch
from transformers import GPT2Config, GPT2LMHeadModel
from hookwidgets import HookExplorer

torch.manual_seed(0)
config = GPT2Config(n_layer=6, n_embd=128, n_head=4, vocab_size=5000, n_positions=64, bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config).train()
ids = torch.randint(0, 5000, (8, 64))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ex = HookExplorer(model, example_inputs=ids[:1])
ex.attach("", ["global_forward", "global_grad"], action="stats")
ex.attach("transformer.h.0", "forward")
ex.watch_optimizer(opt)

def loop(steps):
    started = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        model(ids, labels=ids).loss.backward()
        opt.step()
    return (time.perf_counter() - started) * 1000
ex
"""
LIVE_STEPS = 20

# Collects the page's long tasks (over 50 ms) from now on; `_LONGEST` reads the longest and stops.
_WATCH_LONG_TASKS = """
() => {
  window.__hwLong = { longest: 0, count: 0 };
  window.__hwLongObserver?.disconnect();
  window.__hwLongObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      window.__hwLong.longest = Math.max(window.__hwLong.longest, entry.duration);
      window.__hwLong.count += 1;
    }
  });
  window.__hwLongObserver.observe({ type: "longtask", buffered: false });
}
"""
_LONGEST = """
async () => {
  await new Promise((r) => setTimeout(r, 300));  // the last pushes of the loop are handled
  window.__hwLongObserver.disconnect();
  return window.__hwLong;
}
"""

# Clicks a tab and times until its page is shown and painted (two frames), with the longest main-thread task seen.
_TAB_SWITCH = """
async (tab) => {
  const explorer = document.querySelector('.hw-explorer:not([data-bench-old])');
  const button = explorer.querySelector(`button.hw-tab[data-tab="${tab}"]`);
  if (!button || button.hidden) throw new Error(`no tab ${tab}`);
  const start = performance.now();
  button.click();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const page = explorer.querySelector(`.hw-tab-page[data-tab="${tab}"]`);
  if (page.hidden) throw new Error(`tab ${tab} did not open`);
  return performance.now() - start;
}
"""

# Marks what is on the page now, then times the next explorer: its output's arrival, its tree showing
# its first rows and its count, and the frame after that (painted).
_WATCH_TREE = """
(count) => {
  for (const el of document.querySelectorAll('.jp-OutputArea-child, .hw-explorer')) el.dataset.benchOld = '1';
  const times = {output: null, ready: null, painted: null, rows: 0};
  window.__hwBench = times;
  const fresh = (sel) => [...document.querySelectorAll(sel)].find((el) => !el.dataset.benchOld);
  const observer = new MutationObserver(() => {
    const now = performance.now();
    if (times.output === null && fresh('.jp-OutputArea-child')) times.output = now;
    const explorer = fresh('.hw-explorer');
    const rows = explorer ? explorer.querySelectorAll('.hw-row').length : 0;
    if (times.ready === null && rows > 0 && explorer.querySelector('.hw-count')?.textContent === count) {
      times.ready = now;
      times.rows = rows;
      observer.disconnect();
      requestAnimationFrame(() => requestAnimationFrame(() => { times.painted = performance.now(); }));
    }
  });
  observer.observe(document.body, {childList: true, subtree: true, characterData: true});
}
"""

# Ticks a hook toggle and times until its badge is on the tree row and painted (Python attached it).
_CLICK_BADGE = """
async ({path, kind}) => {
  const explorer = document.querySelector('.hw-explorer:not([data-bench-old])');
  const toggle = explorer.querySelector(`input.hw-toggle[data-kind="${kind}"][data-path="${path}"]`);
  const badge = () => explorer.querySelector(`.hw-row[data-path="${path}"] .hw-badge[data-kind="${kind}"]`);
  if (!toggle || toggle.checked || badge()) throw new Error(`toggle ${kind} on ${path} not ready`);
  const start = performance.now();
  const shown = new Promise((resolve) => {
    const watch = new MutationObserver(() => { if (badge()) { watch.disconnect(); resolve(); } });
    watch.observe(explorer, {childList: true, subtree: true});
  });
  toggle.click();
  await shown;
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - start;
}
"""

# Unticks it again (untimed) and waits until the badge is gone and the toggle usable.
_UNCLICK = """
async ({path, kind}) => {
  const explorer = document.querySelector('.hw-explorer:not([data-bench-old])');
  const toggle = explorer.querySelector(`input.hw-toggle[data-kind="${kind}"][data-path="${path}"]`);
  toggle.click();
  const gone = () => !explorer.querySelector(`.hw-row[data-path="${path}"] .hw-badge[data-kind="${kind}"]`);
  while (!(gone() && !toggle.disabled && !toggle.checked)) await new Promise((r) => setTimeout(r, 10));
}
"""

# Clicks a tab and times until its page is shown and painted (two frames), with the longest main-thread task seen.
_TAB_SWITCH = """
async (tab) => {
  const explorer = document.querySelector('.hw-explorer:not([data-bench-old])');
  const button = explorer.querySelector(`button.hw-tab[data-tab="${tab}"]`);
  if (!button || button.hidden) throw new Error(`no tab ${tab}`);
  const start = performance.now();
  button.click();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const page = explorer.querySelector(`.hw-tab-page[data-tab="${tab}"]`);
  if (page.hidden) throw new Error(`tab ${tab} did not open`);
  return performance.now() - start;
}
"""

# Marks what is on the page now, then times the next explorer: its output's arrival, its graph panel
# reaching "ready", and the frame after that (painted).
_WATCH_PAINT = """
() => {
  for (const el of document.querySelectorAll('.jp-OutputArea-child, .hw-graph-panel, .hw-explorer')) {
    el.dataset.benchOld = '1';
  }
  const times = {output: null, opened: false, ready: null, painted: null};
  window.__hwBench = times;
  const fresh = (sel) => [...document.querySelectorAll(sel)].find((el) => !el.dataset.benchOld);
  const observer = new MutationObserver(() => {
    const now = performance.now();
    if (times.output === null && fresh('.jp-OutputArea-child')) times.output = now;
    const tab = fresh('.hw-explorer')?.querySelector('button.hw-tab[data-tab="graph"]');
    if (!times.opened && tab) {  // the user opens the Graph tab as soon as the explorer shows
      times.opened = true;
      tab.click();
    }
    const panel = fresh('.hw-graph-panel');
    if (times.ready === null && panel && panel.dataset.state === 'ready') {
      times.ready = now;
      observer.disconnect();
      requestAnimationFrame(() => requestAnimationFrame(() => { times.painted = performance.now(); }));
    }
  });
  observer.observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ['data-state']});
}
"""

# Clicks a block (shift: every level below it) and times until the panel is ready and painted,
# keeping every long task of the main thread seen meanwhile.
_EXPAND = """
async ({selector, shift}) => {
  const panel = document.querySelector('.hw-graph-panel:not([data-bench-old])');
  const block = panel.querySelector(selector);
  const tasks = [];
  const observer = new PerformanceObserver((list) => tasks.push(...list.getEntries().map((e) => e.duration)));
  observer.observe({type: 'longtask'});
  const start = performance.now();
  const ready = new Promise((resolve) => {
    const watch = new MutationObserver(() => {
      if (panel.dataset.state === 'ready' || panel.dataset.state === 'error') { watch.disconnect(); resolve(); }
    });
    watch.observe(panel, {attributes: true, attributeFilter: ['data-state']});
  });
  block.dispatchEvent(new MouseEvent('click', {bubbles: true, shiftKey: shift}));
  await ready;
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const end = performance.now();
  await new Promise((r) => setTimeout(r, 50));  // let the observer deliver the last entries
  observer.disconnect();
  return {ms: end - start, longest: Math.max(0, ...tasks), state: panel.dataset.state,
          nodes: panel.querySelectorAll('.hw-gnode[data-op]').length};
}
"""

# Types a query in the graph's search box and presses Enter; times until the match is marked as the current
# one, the panel ready (a block that hid it opened and laid out again) and painted; says whether it is in view.
_SEARCH = """
async ({query}) => {
  const panel = document.querySelector('.hw-graph-panel:not([data-bench-old])');
  const input = panel.querySelector('input.hw-graph-search');
  const tasks = [];
  const observer = new PerformanceObserver((list) => tasks.push(...list.getEntries().map((e) => e.duration)));
  observer.observe({type: 'longtask'});
  const done = () => panel.dataset.state === 'ready' && panel.querySelector('.hw-gmatch-current');
  const start = performance.now();
  const ready = new Promise((resolve) => {
    const watch = new MutationObserver(() => { if (done()) { watch.disconnect(); resolve(); } });
    watch.observe(panel, {attributes: true, subtree: true, attributeFilter: ['class', 'data-state']});
  });
  input.value = query;
  input.dispatchEvent(new Event('input', {bubbles: true}));
  input.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}));
  if (!done()) await ready;
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const end = performance.now();
  await new Promise((r) => setTimeout(r, 50));  // let the observer deliver the last entries
  observer.disconnect();
  const box = panel.querySelector('.hw-gmatch-current').getBoundingClientRect();
  const view = panel.querySelector('svg.hw-graph-canvas').getBoundingClientRect();
  const inside = box.left >= view.left && box.right <= view.right && box.top >= view.top && box.bottom <= view.bottom;
  return {ms: end - start, longest: Math.max(0, ...tasks), inside,
          path: panel.querySelector('.hw-gmatch-current').dataset.path};
}
"""


# Issue 35: a GPT-2 of 12 heads over 32 tokens; its first block's attention module selected shows all 12 heads.
HOVER_MODEL = (
    gpt2("model", n_embd=96, n_head=12)
    + """from hookwidgets import HookExplorer

text = " ".join(words[i % len(words)] for i in range(32))
ex = HookExplorer(model, example_inputs=tokenizer(text, return_tensors="pt"), tokenizer=tokenizer)
ex
"""
)
# Where the attention figure's cell grids are in its image (CSS px of the figure), as the kernel sent them.
HOVER_REGIONS = """
[{"width": i["hover"]["width"], "regions": [
    {"box": r["box"], "rows": r["rows"], "cols": r["cols"]} for r in i["hover"]["regions"] if r["type"] == "cells"]}
 for i in ex.view.plots["items"] if i["kind"] == "attention" and i.get("hover")][0]
"""
HOVER_POINTS = 24
"""Cells hovered per load, each a different one (the readout changes every time)."""

# Dispatches a mousemove at each point (image CSS px) on the image, one per frame as a mouse sends them; times
# each from the event to the readout's text changed, and keeps the main thread's long tasks meanwhile.
_HOVER = """
async ({points, width}) => {
  const explorer = document.querySelector('.hw-explorer:not([data-bench-old])');
  const img = explorer.querySelector('img[data-figure="attention"]');
  if (!img) throw new Error('no img[data-figure="attention"]: the page does not mark its figures (issue 35)');
  const holder = img.closest('[tabindex="0"]');
  const readout = holder && holder.querySelector('.hw-readout');
  if (!readout) throw new Error("no .hw-readout in the figure's focusable container (issue 35)");
  const tasks = [];
  const observer = new PerformanceObserver((list) => tasks.push(...list.getEntries().map((e) => e.duration)));
  observer.observe({type: 'longtask'});
  const times = [];
  const cells = [];
  for (const [fx, fy] of points) {
    const box = img.getBoundingClientRect();
    const x = box.left + fx * box.width / width;
    const y = box.top + fy * box.width / width;  // shown at the figure's aspect: one scale for both axes
    const before = readout.textContent;
    let watch = null;
    const changed = new Promise((resolve) => {
      watch = new MutationObserver(() => { if (readout.textContent !== before) resolve(performance.now()); });
      watch.observe(readout, {childList: true, characterData: true, subtree: true});
      setTimeout(() => resolve(null), 1000);
    });
    const start = performance.now();
    // On the image, where the mouse would be: the 12 heads are taller than the pane, whose scroll is not measured.
    img.dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true, view: window}));
    const end = readout.textContent !== before ? performance.now() : await changed;
    watch.disconnect();
    if (end === null) throw new Error(`the readout did not change at (${x}, ${y}): ${before}`);
    times.push(end - start);
    cells.push([readout.dataset.region, readout.dataset.row, readout.dataset.col].join(','));
    await new Promise((r) => requestAnimationFrame(() => r()));  // one event a frame, as a mouse sends them
  }
  await new Promise((r) => setTimeout(r, 50));  // let the observer deliver the last entries
  observer.disconnect();
  return {times, cells, longest: Math.max(0, ...tasks)};
}
"""


@dataclass
class Figure:
    """One measured figure: values in ms, the bar it is held to, and what was measured."""

    name: str
    values: list[float]
    bar_ms: float | None
    note: str = ""
    extra: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def verdict(self) -> str:
        if self.bar_ms is None:
            return "—"
        return "PASS" if self.median <= self.bar_ms else "OVER"

    @property
    def bar(self) -> str:
        return "no bar" if self.bar_ms is None else f"≤ {self.bar_ms:.0f}"

    def line(self) -> str:
        p10, p90 = quantile(self.values, 0.1), quantile(self.values, 0.9)
        return (
            f"{self.name:<52} median {self.median:8.1f} ms  p10–p90 {p10:.1f}–{p90:.1f}  "
            f"n={len(self.values)}  bar {self.bar} ms {self.verdict}  {self.extra}"
        )

    def markdown_row(self) -> str:
        p10, p90 = quantile(self.values, 0.1), quantile(self.values, 0.9)
        return (
            f"| {self.name} | {self.median:.1f} | {p10:.1f}–{p90:.1f} | {min(self.values):.1f}–{max(self.values):.1f} "
            f"| {len(self.values)} | {self.bar} | {self.verdict} | {self.note} |"
        )


MARKDOWN_HEADER = (
    "| figure | median ms | p10–p90 | min–max | n | bar ms | verdict | what |\n|---|---|---|---|---|---|---|---|"
)


class Session:
    """A JupyterLab server and one Chromium page driving it, for the whole benchmark run."""

    def __init__(self, workdir: Path) -> None:
        self.server = JupyterServer(workdir / "jupyter", workdir / "jupyter-server.log")
        self._playwright = None
        self.page: Page | None = None
        self.lab: Lab | None = None

    def __enter__(self) -> Session:
        self.server.start()
        self._playwright = sync_playwright().start()
        browser = self._playwright.chromium.launch(
            executable_path=str(require_chromium()), args=CHROMIUM_ARGS, headless=True
        )
        self.page = browser.new_context(viewport=VIEWPORT).new_page()
        self.page.set_default_timeout(120_000)
        artifacts = ROOT / "artifacts" / "bench"
        artifacts.mkdir(parents=True, exist_ok=True)
        self.lab = Lab(self.page, self.server, artifacts)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._playwright is not None:
            self._playwright.stop()
        self.server.stop()

    def notebook(self, name: str, *cells: str) -> str:
        """Write and open a notebook of code cells; returns its path."""
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        path = self.lab.write_notebook(name, nb)
        self.lab.open_notebook(path)
        return path


def _paint_once(session: Session, path: str) -> float:
    page = session.page
    page.evaluate(_WATCH_PAINT)
    session.lab.run_all(path, timeout=300)
    page.wait_for_function("() => window.__hwBench && window.__hwBench.painted !== null", timeout=120_000)
    times = page.evaluate("() => window.__hwBench")
    return times["painted"] - times["output"]


def tree_paint(session: Session, loads: int) -> Figure:
    """A 10,000-module explorer: its first rows and the count "10,000 modules" painted, from its cell's output."""
    path = session.notebook("bench_tree_paint.ipynb", WIDE_MODEL, WIDE_DISPLAY)
    page = session.page
    values = []
    rows = 0
    for i in range(WARMUP_PAIRS + loads):
        page.evaluate(_WATCH_TREE, "10,000 modules")
        session.lab.run_all(path, timeout=300)
        page.wait_for_function("() => window.__hwBench && window.__hwBench.painted !== null", timeout=120_000)
        times = page.evaluate("() => window.__hwBench")
        rows = times["rows"]
        if i >= WARMUP_PAIRS:
            values.append(times["painted"] - times["output"])
    page.locator(".hw-explorer:not([data-bench-old])").screenshot(
        path=str(session.lab.artifacts_dir / "tree-10000-painted.png")
    )
    note = "cell output arrives → first rows and the count shown → next frame"
    return Figure("10,000-module explorer painted", values, 1000, note, f"{rows} rows drawn (virtualized)")


def _fresh_explorer(session: Session, name: str, code: str) -> tuple[str, Locator]:
    """Run ``code`` in a new notebook ``name``; returns its path and the explorer it shows (those already on the page
    are marked old first, so that the locator finds only the new one)."""
    session.page.evaluate(
        "() => document.querySelectorAll('.hw-explorer').forEach((el) => { el.dataset.benchOld = '1'; })"
    )
    path = session.notebook(name, code)
    session.lab.run_all(path, timeout=300)
    return path, session.page.locator(".hw-explorer:not([data-bench-old])")


def click_badge(session: Session, loads: int) -> Figure:
    """A hook toggle ticked → the attach message → Python attaches → the badge on the tree row painted."""
    page = session.page
    _, explorer = _fresh_explorer(session, "bench_click_badge.ipynb", CLICK_MODEL)
    layer, kind = "features.conv2", "forward"
    explorer.locator(f'.hw-row[data-path="{layer}"]').click()
    explorer.locator(f'input.hw-toggle[data-kind="{kind}"][data-path="{layer}"]').wait_for()
    values = []
    for i in range(WARMUP_PAIRS + loads):
        ms = page.evaluate(_CLICK_BADGE, {"path": layer, "kind": kind})
        if i >= WARMUP_PAIRS:
            values.append(ms)
        page.evaluate(_UNCLICK, {"path": layer, "kind": kind})
    note = "toggle clicked → comm message → ex.attach → hooks traitlet → badge painted"
    return Figure("click → hook attached in Python → badge shown", values, 150, note, "digits CNN after a Run")


def graph_paint(session: Session, loads: int) -> Figure:
    """A 5,000-node autograd graph (recorded before display) painted collapsed, from its cell's output arriving."""
    path = session.notebook("bench_graph_paint.ipynb", GRAPH_MODEL, GRAPH_DISPLAY)
    values = []
    for i in range(WARMUP_PAIRS + loads):
        ms = _paint_once(session, path)
        if i >= WARMUP_PAIRS:
            values.append(ms)
    panel = session.page.locator(".hw-graph-panel:not([data-bench-old])")
    shown = panel.locator(".hw-graph-status").text_content()
    panel.screenshot(path=str(session.lab.artifacts_dir / "graph-5000-collapsed.png"))
    return Figure(
        "5,000-node autograd graph painted collapsed",
        values,
        1000,
        "cell output arrives → Graph tab opened → panel ready → next frame",
        shown or "",
    )


def graph_expand(session: Session, loads: int) -> Figure:
    """Longest main-thread task while one stage of the 5,000-node graph expands to its 500 nodes."""
    path = session.notebook("bench_graph_expand.ipynb", GRAPH_MODEL, GRAPH_DISPLAY)
    _paint_once(session, path)
    page = session.page
    stage = '.hw-gblock[data-path="3"]'
    longest, total = [], []
    for i in range(WARMUP_PAIRS + loads):
        result = page.evaluate(_EXPAND, {"selector": stage, "shift": True})
        if result["state"] != "ready" or result["nodes"] != 500:
            raise RuntimeError(f"expanding stage 3 did not show its 500 nodes: {result}")
        if i >= WARMUP_PAIRS:
            longest.append(result["longest"])
            total.append(result["ms"])
        if i == WARMUP_PAIRS:
            page.locator(".hw-graph-panel:not([data-bench-old])").screenshot(
                path=str(session.lab.artifacts_dir / "graph-5000-expanded.png")
            )
        page.evaluate(_EXPAND, {"selector": '.hw-gbox[data-path="3"] > .hw-gbox-label', "shift": False})
    ready = f"click → 500 nodes painted: median {statistics.median(total):.0f} ms (layout in the worker)"
    return Figure(
        "longest main-thread task expanding 500 nodes",
        longest,
        200,
        "PerformanceObserver longtask; 0 = no task over 50 ms",
        ready,
    )


def open_graph_tab(page: Page) -> None:
    """Open the Graph tab of the explorer whose graph panel is not marked old, as a user does; its first visit records
    the example inputs' graph (untimed): the caller waits for it to be drawn."""
    page.evaluate(
        "() => document.querySelector('.hw-graph-panel:not([data-bench-old])').closest('.hw-explorer')"
        ".querySelector('button.hw-tab[data-tab=\"graph\"]').click()"
    )


def graph_record(session: Session, loads: int) -> Figure:
    """Record graph pressed -> the 5,000-node graph painted: recording in Python, transfer, layout, drawing."""
    page = session.page
    page.evaluate("() => document.querySelectorAll('.hw-graph-panel').forEach((el) => { el.dataset.benchOld = '1'; })")
    path = session.notebook("bench_graph_record.ipynb", GRAPH_MODEL, EXPLORER_DISPLAY)
    session.lab.run_all(path, timeout=300)
    page.wait_for_selector(".hw-graph-panel:not([data-bench-old]) .hw-graph-status", state="attached")
    open_graph_tab(page)
    page.wait_for_selector('.hw-graph-panel:not([data-bench-old]) .hw-graph-status[data-state="ready"]')
    values = []
    with session.lab.kernel(path) as kernel:
        for i in range(WARMUP_PAIRS + loads):
            # Untimed: empty the panel, so the next recording is sent in full (an equal graph is not resent).
            kernel.evaluate("ex.view.graph = {'autograd': None, 'dataflow': None, 'error': ''}")
            page.wait_for_selector('.hw-graph-panel:not([data-bench-old]) .hw-graph-status[data-state="empty"]')
            result = page.evaluate(_EXPAND, {"selector": "button.hw-graph-record", "shift": False})
            if result["state"] != "ready":
                raise RuntimeError(f"recording the graph did not end ready: {result}")
            if i >= WARMUP_PAIRS:
                values.append(result["ms"])
    note = "click → Python records → ~0.5 MB state sent → panel ready, painted"
    return Figure("Record graph → 5,000-node graph painted", values, None, note)


def graph_search(session: Session, loads: int) -> Figure:
    """A module of a 600-node graph searched: typed, Enter, its collapsed block opened, centred, marked, painted."""
    path = session.notebook("bench_graph_search.ipynb", SEARCH_MODEL, SEARCH_DISPLAY)
    _paint_once(session, path)
    page = session.page
    values, longest = [], []
    for i in range(WARMUP_PAIRS + loads):
        # A different block each time, so each search opens the block that hides it (the slow case).
        module = f"{i % 6}.{(i // 6) % 10}.lin2"
        result = page.evaluate(_SEARCH, {"query": module})
        if result["path"] != module or not result["inside"]:
            raise RuntimeError(f"searching {module} did not centre it: {result}")
        if i >= WARMUP_PAIRS:
            values.append(result["ms"])
            longest.append(result["longest"])
    page.locator(".hw-graph-panel:not([data-bench-old])").screenshot(
        path=str(session.lab.artifacts_dir / "graph-600-search.png")
    )
    return Figure(
        "600-node graph: search → match centred",
        values,
        100,
        "query typed + Enter → block opened, laid out, centred, marked → next frame",
        f"longest main-thread task {max(longest):.0f} ms",
    )


def tab_switch(session: Session, loads: int) -> Figure:
    """A tab clicked → its page shown and painted, on the digits CNN after a Run with a recorded graph: the right
    pane between the inspector (images), the summary and the attribution, the left between the tree and the graph."""
    page = session.page
    graphed = CLICK_MODEL.replace("ex.run(target=0)", "ex.run(target=0, record_graph=True)")
    _, explorer = _fresh_explorer(session, "bench_tab_switch.ipynb", graphed)
    explorer.locator('.hw-row[data-path="features.conv2"]').click()
    explorer.locator("input.hw-toggle[data-kind='forward']").wait_for()
    cycle = ["summary", "graph", "attribution", "modules", "inspector"]
    values = []
    for i in range(WARMUP_PAIRS + loads):
        for tab in cycle:
            ms = page.evaluate(_TAB_SWITCH, tab)
            if i >= WARMUP_PAIRS:
                values.append(ms)
    note = "tab clicked → its page shown → next frame painted (every tab of both panes, in turn)"
    return Figure("switching tabs", values, 100, note, f"{len(cycle)} tabs per round")


def live_loop(session: Session, loads: int) -> list[Figure]:
    """The user's training loop in the kernel while the view updates live: the page's longest main-thread task
    during it (bar 50 ms), and what the open page costs the loop (its time with the explorer's output shown in the
    page against the same loop, same hooks and view, with that output cleared from the page)."""
    page = session.page
    path, explorer = _fresh_explorer(session, "bench_live_loop.ipynb", LIVE_MODEL)
    explorer.locator('.hw-row[data-path="transformer"]').wait_for()
    explorer.locator('button.hw-tab[data-tab="summary"]').click()  # the panel a loop updates the most
    longest, shown, cleared, tasks = [], [], [], 0
    with session.lab.kernel(path, timeout=600) as kernel:
        kernel.evaluate(f"loop({LIVE_STEPS})")  # warm: the first steps allocate
        for i in range(WARMUP_PAIRS + loads):
            page.evaluate(_WATCH_LONG_TASKS)
            ms = float(kernel.evaluate(f"print(loop({LIVE_STEPS}))").strip())
            seen = page.evaluate(_LONGEST)
            if i >= WARMUP_PAIRS:
                longest.append(seen["longest"])
                shown.append(ms)
                tasks += seen["count"]
        page.evaluate(
            "() => document.querySelector('.hw-explorer:not([data-bench-old])').closest('.jp-OutputArea')"
            ".querySelectorAll('.jp-OutputArea-child').forEach((el) => { el.style.display = 'none'; })"
        )
        for i in range(WARMUP_PAIRS + loads):
            ms = float(kernel.evaluate(f"print(loop({LIVE_STEPS}))").strip())
            if i >= WARMUP_PAIRS:
                cleared.append(ms)
    cost = statistics.median(shown) / statistics.median(cleared)
    what = f"GPT-2 6×128 b8×64, {LIVE_STEPS} AdamW steps, stats on every layer, a capture, the optimizer monitor"
    return [
        Figure(
            "longest main-thread task while the view updates live",
            longest,
            50,
            f"{what}; PerformanceObserver longtask, 0 = none over 50 ms",
            f"{tasks} tasks over 50 ms in all",
        ),
        Figure(
            "the loop with the page drawing the view (ms per loop)",
            shown,
            None,
            f"{what}; kernel-side time with the explorer shown",
            f"{cost:.2f}× the same loop with the view hidden in the page (median {statistics.median(cleared):.0f} ms)",
        ),
    ]


def _hover_points(drawn: dict) -> tuple[list[list[float]], list[str]]:
    """``HOVER_POINTS`` cell centres spread over every head's grid (image CSS px), and the "region,row,col" each is."""
    points, cells = [], []
    regions = drawn["regions"]
    for i in range(HOVER_POINTS):
        k = i % len(regions)
        region = regions[k]
        rows, cols = region["rows"], region["cols"]
        row, col = (i * 5) % rows, (i * 7 + k) % cols
        x0, y0, x1, y1 = region["box"]
        points.append([x0 + (col + 0.5) * (x1 - x0) / cols, y0 + (row + 0.5) * (y1 - y0) / rows])
        cells.append(f"{k},{row},{col}")
    return points, cells


def hover_readout(session: Session, loads: int) -> list[Figure]:
    """Issue 35: the mouse over a 12-head attention figure (12 × 32 × 32 cells): mousemove → the readout says the
    cell's value, read in the page from the hover description the kernel sent (no round trip)."""
    page = session.page
    path, explorer = _fresh_explorer(session, "bench_hover_readout.ipynb", HOVER_MODEL)
    explorer.locator('.hw-row[data-path="transformer"]').wait_for()
    explorer.locator(".hw-search").fill("transformer.h.0.attn")
    explorer.locator('.hw-row.hw-match[data-path="transformer.h.0.attn"]').click()
    explorer.locator(".hw-search").fill("")
    image = explorer.locator('figure[data-kind="attention"] img')
    image.wait_for(timeout=120_000)
    if image.get_attribute("data-figure") != "attention":
        raise RuntimeError("the attention figure's img has no data-figure: the page has no readout yet (issue 35)")
    image.scroll_into_view_if_needed()
    with session.lab.kernel(path) as kernel:
        drawn = kernel.evaluate_json(HOVER_REGIONS)
    points, expected = _hover_points(drawn)
    times, longest = [], []
    for i in range(WARMUP_PAIRS + loads):
        result = page.evaluate(_HOVER, {"points": points, "width": drawn["width"]})
        if result["cells"] != expected:  # the readout must say the cell under the mouse, or the time means nothing
            raise RuntimeError(f"the readout named other cells: {result['cells']} for {expected}")
        if i >= WARMUP_PAIRS:
            times.extend(result["times"])
            longest.append(result["longest"])
    explorer.locator(".hw-details").screenshot(path=str(session.lab.artifacts_dir / "hover-readout-attention.png"))
    what = f"GPT-2 12 heads × 32 tokens, all heads drawn; {HOVER_POINTS} cells per load, one mousemove a frame"
    return [
        Figure(
            "hover readout: mousemove → value shown",
            times,
            16,
            f"{what}; mousemove dispatched → .hw-readout text changed",
            f"{len(times)} moves",
        ),
        Figure(
            "longest main-thread task while hovering",
            longest,
            50,
            f"{what}; PerformanceObserver longtask, 0 = none over 50 ms",
        ),
    ]


MEASUREMENTS: dict[str, Callable[[Session, int], Figure | list[Figure]]] = {
    "tree_paint": tree_paint,
    "graph_paint": graph_paint,
    "click_badge": click_badge,
    "graph_expand": graph_expand,
    "graph_record": graph_record,
    "graph_search": graph_search,
    "tab_switch": tab_switch,
    "live_loop": live_loop,
    "hover_readout": hover_readout,
}
"""Every figure of this benchmark, by name, in the order they run."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, default=MIN_PAIRS, help=f"timed repetitions (at least {MIN_PAIRS})")
    parser.add_argument("--only", action="append", choices=sorted(MEASUREMENTS), help="run only these figures")
    args = parser.parse_args()
    if args.loads < MIN_PAIRS:
        parser.error(f"the protocol needs at least {MIN_PAIRS} loads")
    names = args.only or list(MEASUREMENTS)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = shlex.join([".venv/bin/python", "bench/frontend.py", *sys.argv[1:]])
    figures = []
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as workdir, Session(Path(workdir)) as session:
        browser = session.page.context.browser.version
        for name in names:
            measured = MEASUREMENTS[name](session, args.loads)
            for figure in measured if isinstance(measured, list) else [measured]:
                print(figure.line(), flush=True)
                figures.append(figure)
    print()
    print(markdown_section(figures, command=command, started=started, browser=browser, loads=args.loads))


def markdown_section(figures: list[Figure], *, command: str, started: str, browser: str, loads: int) -> str:
    """The section for bench/RESULTS.md: what was run, where, and the table of figures with bars and verdicts."""
    import jupyterlab

    over = [f.name for f in figures if f.verdict == "OVER"]
    verdict = f"over the bar: {', '.join(over)}" if over else "every figure with a bar is within it"
    return "\n".join(
        [
            "## Frontend figures (issue 6)",
            "",
            f"Command: `{command}` — {started}, hookwidgets at {revision()}.",
            "",
            f"Machine: {machine()}; Chromium {browser} headless (`--disable-gpu`), JupyterLab {jupyterlab.__version__},"
            f" viewport {VIEWPORT['width']}×{VIEWPORT['height']}, {platform.machine()}.",
            "",
            f"Protocol: {WARMUP_PAIRS} warm-ups, then {loads} timed loads per figure; times taken in the page with"
            " `performance.now()`; median with p10–p90.",
            "",
            MARKDOWN_HEADER,
            *(figure.markdown_row() for figure in figures),
            "",
            f"Verdict: {verdict}.",
        ]
    )


if __name__ == "__main__":
    main()
