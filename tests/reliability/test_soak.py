"""Soak: a training loop with every hook kind attached and the widget's live updates running headless.

``make test`` runs 150 steps; ``make soak`` (``HOOKWIDGETS_SOAK_STEPS=2000``) the long one. Once the store and
the timeline are full (within the warm-up), nothing may grow: resident memory, the Python objects and memory
blocks the engine keeps (per-hook handles, the clock's per-step counters, ...), the hooks on the model; and each
step's graph is freed as soon as the loop lets go of it.
"""

from __future__ import annotations

import gc
import itertools
import os
import sys
import time
import warnings
import weakref
from collections import Counter

import pytest
import torch
from matplotlib.mathtext import MathTextParser

from hookwidgets import HookExplorer
from hookwidgets.core.hooks import dispatch
from hookwidgets.widget import captures, live
from tests.unit.widget._messages import browser_sets

from ._soak_model import SoakNet, attach_every_kind
from ._state import all_hook_state, diff_keys

STEPS = int(os.environ.get("HOOKWIDGETS_SOAK_STEPS", "150"))
WARMUP = max(50, STEPS // 5)
BUDGET = 2 * 2**20  # small, so the store evicts from the first steps on
RECORDS = 2_000  # the store's max_records: ~80 records a step fill it within the warm-up
TIMELINE = 2_000  # the timeline's cap, as small, for the same reason
MAX_GROWTH = 50 * 2**20
MAX_OBJECTS_PER_STEP = 0.5  # a leak of one object a step fails; measured: ±15 objects over 100 steps
MAX_BLOCKS_PER_STEP = 20  # a leak of one dict a step fails; measured: ±300 blocks over 100 steps
MIDWAY = WARMUP + (STEPS - WARMUP) // 2
# A leak grows the heap in both halves after the warm-up. A one-time start-up does not, and when it happens depends
# on time and data: matplotlib builds its mathtext parser (~2,000 objects) on the first label that needs it, and the
# live path redraws images by the clock, so under load the first such label can come after the warm-up.
HOOKED_NODE = "ConvolutionBackward0"  # features.conv's node: node hooks are on it each step


def resident_bytes() -> int:
    """Resident set size of this process, from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def python_heap() -> tuple[int, int]:
    """Objects the garbage collector follows and memory blocks Python's allocator holds, after a full collection.

    matplotlib's cache of mathtext parses is emptied first: it keeps 50, each holding the renderer's parser it was
    made by, and fills at the pace of the images the live path redraws by the clock (a bounded cache, not a leak).
    """
    parses = getattr(MathTextParser, "_parse_cached", None)
    if parses is not None:
        parses.cache_clear()
    gc.collect()
    return len(gc.get_objects()), sys.getallocatedblocks()


class Mark:
    """Put in an autograd node's metadata: it lives exactly as long as the node."""


def mark_node(loss: torch.Tensor, name: str) -> weakref.ref:
    """A reference that dies with the node called ``name`` in ``loss``'s graph."""
    todo, seen = [loss.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        if node.name() == name:
            mark = node.metadata["soak"] = Mark()
            return weakref.ref(mark)
        seen.add(node)
        todo.extend(next_node for next_node, _ in node.next_functions)
    raise AssertionError(f"no {name} in the graph")


@pytest.fixture
def fast_pushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Push and redraw as often as the live path allows, so a short soak runs it many times; a small timeline."""
    monkeypatch.setattr(live, "PUSH_INTERVAL_S", 0.0)
    monkeypatch.setattr(live, "PLOT_INTERVAL_S", 0.0)  # images as soon as their share allows, not every 2 s
    monkeypatch.setattr(live, "MAX_SHARE", 0.2)  # the live path may take a fifth of the loop (3% by default)
    monkeypatch.setattr(dispatch, "TIMELINE_CAP", TIMELINE)
    # One image remembered: each entry holds a figure's hover description (a dict per tile, hundreds of small objects),
    # so a bounded cache filling up at its own pace would read as growth of the heap; a leak would not go away.
    monkeypatch.setattr(captures, "PNG_CACHE_SIZE", 1)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="resident memory is read from /proc (Linux)")
def test_training_with_every_hook_kind_stays_flat(fast_pushes: None, ipython) -> None:
    torch.manual_seed(0)
    model = SoakNet()
    images = torch.randn(8, 3, 8, 8)
    labels = torch.randint(0, 5, (8,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # legacy hook and first-layer warnings, every step
        ex = HookExplorer(model, example_inputs=images, memory_budget=BUDGET)
        try:
            ex.captures.max_records = RECORDS
            view = ex.view  # headless: the view exists and live updates follow the loop
            attach_every_kind(ex, model)
            browser_sets(view, selected="features.conv")
            pushes: Counter[str] = Counter()
            view.observe(lambda change: pushes.update([change["new"]["state"]]), names="status")
            view.observe(lambda change: pushes.update(["plots"]), names="plots")
            baseline, samples, started = None, [], time.perf_counter()
            for step in range(1, STEPS + 1):
                optimizer.zero_grad(set_to_none=True)
                loss = torch.nn.functional.cross_entropy(model(images), labels)
                graph = mark_node(loss, HOOKED_NODE)
                loss.backward()
                del loss
                # Neither the node hooks nor a reference cycle made in the forward may keep the step's graph (memory
                # the user no longer holds) once the loop lets go of it.
                assert graph() is None, f"step {step}: the graph outlived the loop's last reference to it"
                optimizer.step()
                assert ex.captures.nbytes <= BUDGET
                if step == WARMUP:
                    hooks_on_model = all_hook_state(model)
                    heaps = [python_heap()]
                    baseline = resident_bytes()
                if step == MIDWAY:
                    heaps.append(python_heap())
                if step >= WARMUP and step % 50 == 0:
                    samples.append(resident_bytes())
                if step % 500 == 0 or step == WARMUP - 1:
                    ipython.run_cell("pass")  # a cell ends now and then: the full sync runs too (and in warm-up)
            heaps.append(python_heap())
            (objects, blocks), halves = heap_growth(heaps)
            growth = resident_bytes() - baseline
            seconds = time.perf_counter() - started
            check_bounded(ex, pushes)
            assert all_hook_state(model) == hooks_on_model, diff_keys(hooks_on_model, all_hook_state(model))
            mib = 2**20
            print(
                f"\nsoak: {STEPS} steps in {seconds:.0f} s, {len(ex.hooks)} hooks of every kind, widget live updates "
                f"{pushes['live']}, image redraws {pushes['plots']}; resident memory "
                f"{baseline / mib:.1f} MiB at step {WARMUP}, max {max(samples) / mib:.1f} MiB after it, "
                f"{(baseline + growth) / mib:.1f} MiB at the end: "
                f"growth {growth / mib:+.1f} MiB (bar < {MAX_GROWTH / mib:.0f}); Python objects {objects:+d}, "
                f"memory blocks {blocks:+d} in each half after step {WARMUP} (the smaller of {halves}); "
                f"store {ex.captures.nbytes / mib:.2f} of "
                f"{BUDGET / mib:.0f} MiB, {ex.captures.evicted} records evicted; timeline {len(ex.timeline)} events"
            )
        finally:
            ex.close()
    steps = STEPS - MIDWAY  # each half's (the first may be one longer)
    assert growth < MAX_GROWTH, f"resident memory grew {growth / 2**20:.1f} MiB after {WARMUP} warm-up steps"
    assert objects < steps * MAX_OBJECTS_PER_STEP, f"{objects} more Python objects in each {steps} steps: {halves}"
    assert blocks < steps * MAX_BLOCKS_PER_STEP, f"{blocks} more memory blocks in each {steps} steps: {halves}"


def heap_growth(heaps: list[tuple[int, int]]) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """From heaps at the warm-up, midway and the end: the smaller growth of the two halves (objects, blocks), and
    each half's growth."""
    halves = [(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(heaps)]
    return (min(h[0] for h in halves), min(h[1] for h in halves)), halves


def check_bounded(ex: HookExplorer, pushes: Counter[str]) -> None:
    """Store and timeline are full and no fuller; every hook fired at every step, without error."""
    assert ex.step == STEPS + 0
    assert ex.captures.evicted > 0 and ex.captures.nbytes <= BUDGET
    assert sum(len(records) for kinds in ex.captures.values() for records in kinds.values()) <= RECORDS
    timeline = ex.timeline
    assert len(timeline) == TIMELINE and timeline[-1].step == STEPS
    assert pushes["live"] >= 10, f"live updates ran {pushes['live']} times in {STEPS} steps"
    assert ex.view.plots.get("path") == "features.conv" and ex.view.plots["items"]
    for info in ex.hooks:
        assert info.last_error is None, f"{info}: {info.last_error}"
        assert info.fired >= STEPS, f"{info} fired {info.fired} times in {STEPS} steps"
