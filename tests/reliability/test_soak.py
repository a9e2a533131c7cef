"""Soak: a training loop with every hook kind attached and the widget's live updates running headless.

``make test`` runs 150 steps; ``make soak`` (``HOOKWIDGETS_SOAK_STEPS=2000``) the long one. Resident
memory must stay flat after warm-up, the capture store under its budget, the timeline at its cap,
and every per-hook list the engine keeps bounded.
"""

from __future__ import annotations

import gc
import os
import time
import warnings

import pytest
import torch

from hookwidgets import HookExplorer
from hookwidgets.core.hooks.clock import CALL_STEPS_KEPT
from hookwidgets.core.hooks.kinds import NODE_KINDS
from hookwidgets.core.hooks.registry import TIMELINE_CAP
from hookwidgets.widget import live
from tests.unit.widget._messages import browser_sets

from ._soak_model import SoakNet, attach_every_kind

STEPS = int(os.environ.get("HOOKWIDGETS_SOAK_STEPS", "150"))
WARMUP = max(50, STEPS // 5)
BUDGET = 2 * 2**20  # small, so the store evicts from the first steps on
MAX_GROWTH = 50 * 2**20


def resident_bytes() -> int:
    """Resident set size of this process, from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def fast_pushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Push and redraw as often as the live path allows, so a short soak runs it many times."""
    monkeypatch.setattr(live, "PUSH_INTERVAL_S", 0.0)
    monkeypatch.setattr(live, "PLOT_INTERVAL_S", 0.0)  # images as soon as their share allows, not every 2 s
    monkeypatch.setattr(live, "MAX_SHARE", 0.2)  # the live path may take a fifth of the loop (3% by default)


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
            view = ex.view  # headless: the view exists and live updates follow the loop
            attach_every_kind(ex, model)
            browser_sets(view, selected="features.conv")
            pushes = []
            view.observe(lambda change: pushes.append(change["new"]["state"]), names="status")
            view.observe(lambda change: pushes.append("plots"), names="plots")
            node_hooks = [info for info in ex.hooks if info.kind in NODE_KINDS]
            baseline, samples, started = None, [], time.perf_counter()
            for step in range(1, STEPS + 1):
                optimizer.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(images), labels).backward()
                optimizer.step()
                assert ex.captures.nbytes <= BUDGET
                # A node hook keeps a handle per graph alive when a forward placed it; the loop drops each step's
                # graph, so only the newest is: one kept longer (a reference cycle made in the forward holding
                # it until a collection) is memory the user no longer holds, and would make this count vary.
                assert [len(info._handles) for info in node_hooks] == [1] * len(node_hooks), f"step {step}"
                if step == WARMUP:
                    gc.collect()
                    baseline = resident_bytes()
                if step >= WARMUP and step % 50 == 0:
                    samples.append(resident_bytes())
                if step % 500 == 0 or step == WARMUP - 1:
                    ipython.run_cell("pass")  # a cell ends now and then: the full sync runs too (and in warm-up)
            gc.collect()
            growth = resident_bytes() - baseline
            seconds = time.perf_counter() - started
            check_bounded(ex, pushes)
            mib = 2**20
            print(
                f"\nsoak: {STEPS} steps in {seconds:.0f} s, {len(ex.hooks)} hooks of every kind, widget live updates "
                f"{pushes.count('live')}, image redraws {pushes.count('plots')}; resident memory "
                f"{baseline / mib:.1f} MiB at step {WARMUP}, max {max(samples) / mib:.1f} MiB after it, "
                f"{(baseline + growth) / mib:.1f} MiB at the end: "
                f"growth {growth / mib:+.1f} MiB (bar < {MAX_GROWTH / mib:.0f}); store {ex.captures.nbytes / mib:.2f} "
                f"of {BUDGET / mib:.0f} MiB, {ex.captures.evicted} records evicted; timeline {len(ex.timeline)} "
                f"events (cap {TIMELINE_CAP})"
            )
        finally:
            ex.close()
    assert growth < MAX_GROWTH, f"resident memory grew {growth / 2**20:.1f} MiB after {WARMUP} warm-up steps"


def check_bounded(ex: HookExplorer, pushes: list[str]) -> None:
    """Store, timeline and the engine's per-hook lists are bounded; every hook fired without error."""
    assert ex.step == STEPS + 0
    assert ex.captures.evicted > 0 and ex.captures.nbytes <= BUDGET
    timeline = ex.timeline
    assert len(timeline) == TIMELINE_CAP and timeline[-1].step == STEPS
    assert pushes.count("live") >= 10, f"live updates ran {pushes.count('live')} times in {STEPS} steps"
    assert ex.view.plots.get("target") == "features.conv" and ex.view.plots["items"]
    modules = sum(1 for _ in ex.model.modules())
    for info in ex.hooks:
        assert info.last_error is None, f"{info}: {info.last_error}"
        assert info.fired >= STEPS, f"{info} fired {info.fired} times in {STEPS} steps"
        # a global kind: one or two hooks on each module of the model; node hooks: one, checked above
        most = 2 * modules if info.kind.startswith("global_") else 3
        assert len(info._handles) <= most, f"{info} keeps {len(info._handles)} handles"
    # call counters, firing logs and step beginnings of the newest steps only
    kept = ex._registry.clock.kept_steps()
    assert len(kept) <= CALL_STEPS_KEPT and kept[-1] == STEPS
