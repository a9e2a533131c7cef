"""Transformer figures in a real JupyterLab + Chromium: a 12-layer GPT-2-shaped model's explorer and graph painted.

The model is transformers' ``GPT2LMHeadModel`` built from a config (12 layers, width 128, 4 heads, vocabulary
5000, random weights: nothing is downloaded; its default attention implementation), in eval mode, with example
inputs of 1 × 64 token ids. transformers is a bench dependency (``pip install -e ".[bench]"``, which ``make bench``
runs). The protocol and the page-side timing are ``frontend.py``'s (``performance.now()`` in the page, 3 warm-ups,
then ``--loads`` timed repetitions; median with p10–p90).

Bars: the explorer painted (tree rows and module count) ≤ 1.5 s after its cell starts to run (the cell's first
output, printed before ``HookExplorer(...)`` is built: the example forward and the tree are in the time); Record
graph pressed → the graph painted ≤ 2 s.

    .venv/bin/python bench/frontend_gpt2.py
    .venv/bin/python bench/frontend_gpt2.py --only gpt2_tree_paint --loads 20
"""

from __future__ import annotations

import argparse
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _protocol import MIN_PAIRS, WARMUP_PAIRS, machine, revision
from frontend import _EXPAND, _WATCH_TREE, MARKDOWN_HEADER, VIEWPORT, Figure, Session, open_graph_tab

MISSING = 'the GPT-2 figures need transformers: pip install -e ".[bench]" (make bench does)'

MODEL = """
import torch
import transformers
from hookwidgets import HookExplorer

config = transformers.GPT2Config(
    n_layer=12, n_embd=128, n_head=4, vocab_size=5000, n_positions=64, bos_token_id=0, eos_token_id=0
)
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(config).eval()
ids = torch.randint(0, config.vocab_size, (1, 64))
"""

# The print marks the cell's start in the page: its stream output is the cell's first output.
DISPLAY = """
if "ex" in globals():
    ex.close()
print("building the explorer", flush=True)
ex = HookExplorer(model, example_inputs=ids)
ex
"""

RECORD_DISPLAY = """
ex = HookExplorer(model, example_inputs=ids)
ex
"""


def module_count() -> str:
    """The explorer header's count for the model, as the page writes it ("1,234 modules")."""
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        raise SystemExit(f"{MISSING} ({exc})") from None
    scope: dict = {}
    exec(MODEL, scope)  # the notebook's own model, so the count cannot drift from it
    return f"{len(list(scope['model'].modules())):,} modules"


def gpt2_tree_paint(session: Session, loads: int) -> Figure:
    """The GPT-2 explorer: from its cell's first output (the cell started) to its tree rows and count painted."""
    count = module_count()
    path = session.notebook("bench_gpt2_tree.ipynb", MODEL, DISPLAY)
    page = session.page
    values, after_output = [], []
    for i in range(WARMUP_PAIRS + loads):
        page.evaluate(_WATCH_TREE, count)
        session.lab.run_all(path, timeout=300)
        page.wait_for_function("() => window.__hwBench && window.__hwBench.painted !== null", timeout=120_000)
        times = page.evaluate("() => window.__hwBench")
        if i >= WARMUP_PAIRS:
            values.append(times["painted"] - times["output"])
            after_output.append(times["painted"] - times["ready"])
    page.locator(".hw-explorer:not([data-bench-old])").screenshot(
        path=str(session.lab.artifacts_dir / "gpt2-tree-painted.png")
    )
    note = "cell starts (its first output) → HookExplorer with example forward → tree rows and count → next frame"
    ready = sorted(after_output)[len(after_output) // 2]
    return Figure("GPT-2 (12 layers) explorer painted", values, 1500, note, f"{count}; rows → painted {ready:.0f} ms")


def gpt2_graph_record(session: Session, loads: int) -> Figure:
    """Record graph pressed → the GPT-2 forward's autograd graph painted: recording in Python, transfer, layout."""
    page = session.page
    page.evaluate("() => document.querySelectorAll('.hw-graph-panel').forEach((el) => { el.dataset.benchOld = '1'; })")
    path = session.notebook("bench_gpt2_record.ipynb", MODEL, RECORD_DISPLAY)
    session.lab.run_all(path, timeout=300)
    panel = ".hw-graph-panel:not([data-bench-old])"
    page.wait_for_selector(f'{panel} .hw-graph-status[data-state="empty"]', state="attached")
    open_graph_tab(page)
    page.wait_for_selector(f'{panel} .hw-graph-status[data-state="ready"]', timeout=120_000)  # the first visit's
    values = []
    with session.lab.kernel(path) as kernel:
        for i in range(WARMUP_PAIRS + loads):
            # Untimed: empty the panel, so the next recording is sent in full (an equal graph is not resent).
            kernel.evaluate("ex.view.graph = {'autograd': None, 'dataflow': None, 'error': ''}")
            page.wait_for_selector(f'{panel} .hw-graph-status[data-state="empty"]')
            result = page.evaluate(_EXPAND, {"selector": "button.hw-graph-record", "shift": False})
            if result["state"] != "ready":
                raise RuntimeError(f"recording the GPT-2 graph did not end ready: {result}")
            if i >= WARMUP_PAIRS:
                values.append(result["ms"])
    shown = page.locator(f"{panel} .hw-graph-status").text_content() or ""
    page.locator(panel).screenshot(path=str(session.lab.artifacts_dir / "gpt2-graph-recorded.png"))
    note = "click → Python records the example forward → state sent → panel ready, painted"
    return Figure("Record graph → GPT-2 (12 layers) graph painted", values, 2000, note, shown)


MEASUREMENTS: dict[str, Callable[[Session, int], Figure]] = {
    "gpt2_tree_paint": gpt2_tree_paint,
    "gpt2_graph_record": gpt2_graph_record,
}
"""Every figure of this benchmark, by name, in the order they run."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, default=MIN_PAIRS, help=f"timed repetitions (at least {MIN_PAIRS})")
    parser.add_argument("--only", action="append", choices=sorted(MEASUREMENTS), help="run only these figures")
    args = parser.parse_args()
    if args.loads < MIN_PAIRS:
        parser.error(f"the protocol needs at least {MIN_PAIRS} loads")
    module_count()  # fails early, before a browser starts, without transformers
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = shlex.join([".venv/bin/python", "bench/frontend_gpt2.py", *sys.argv[1:]])
    figures = []
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as workdir, Session(Path(workdir)) as session:
        browser = session.page.context.browser.version
        for name in args.only or list(MEASUREMENTS):
            figure = MEASUREMENTS[name](session, args.loads)
            print(figure.line(), file=sys.stderr, flush=True)
            figures.append(figure)
    print(markdown_section(figures, command=command, started=started, browser=browser, loads=args.loads))


def markdown_section(figures: list[Figure], *, command: str, started: str, browser: str, loads: int) -> str:
    """The section for bench/RESULTS.md: what was run, where, and the table of figures with bars and verdicts."""
    import jupyterlab

    over = [f.name for f in figures if f.verdict == "OVER"]
    verdict = f"over the bar: {', '.join(over)}" if over else "every figure with a bar is within it"
    return "\n".join(
        [
            "## Transformer figures in the browser: a 12-layer GPT-2",
            "",
            f"Command: `{command}` — {started}, hookwidgets at {revision()}.",
            "",
            f"Machine: {machine()}; Chromium {browser} headless (`--disable-gpu`), JupyterLab {jupyterlab.__version__},"
            f" viewport {VIEWPORT['width']}×{VIEWPORT['height']}, {platform.machine()}.",
            "",
            "Model: transformers' GPT2LMHeadModel from a config (12 layers, width 128, 4 heads, vocabulary 5000, random"
            " weights, default attention), eval mode, example inputs 1 × 64 token ids.",
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
