"""The measuring protocol shared by the benchmarks in bench/.

Two sides, A (baseline) and B, run in one process as interleaved pairs after 3 warm-up pairs, at
a fixed ``torch.set_num_threads``; each pair gives a ratio B/A. Reported: the median ratio with
p10–p90, and the median absolute times of A and B. The order inside a pair alternates (AB, BA, …)
so that a drift of the machine does not favour one side. Setup and teardown run outside the
timed region, so hooks can be attached just before B and removed just after it. Each timed call
starts from a full garbage collection (outside the timed region): the objects a setup made (an
explorer and its widget, tens of thousands of them) would otherwise set off a full collection of the
whole process (~0.2 s with torch and the widget stack loaded) inside whichever timed call came next,
charging a one-time cost to a few steps. Collections that the timed code's own objects set off still
fall inside it, as they would in the user's loop. Minor page faults
of each timed call are counted too: unlike times they do not depend on the load of the machine,
and fresh memory (activations kept alive by captures) shows up there.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

WARMUP_PAIRS = 3
MIN_PAIRS = 15


@dataclass
class Side:
    """One side of a comparison: the timed zero-arg callable and untimed setup/teardown around it."""

    fn: Callable[[], object]
    setup: Callable[[], None] | None = None
    teardown: Callable[[], None] | None = None

    def timed(self) -> tuple[float, int]:
        """Seconds and minor page faults of one call of ``fn``; setup and teardown are not counted."""
        if self.setup is not None:
            self.setup()
        try:
            gc.collect()
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            self.fn()
            seconds = time.perf_counter() - start
            return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        finally:
            if self.teardown is not None:
                self.teardown()


@dataclass
class Comparison:
    """The result of one A/B comparison: per-pair ratios and times, and the bar it is held to."""

    name: str
    ratios: list[float]
    a_s: list[float]
    b_s: list[float]
    a_faults: list[int] = field(default_factory=list)
    b_faults: list[int] = field(default_factory=list)
    bar: float | None = None
    note: str = ""
    threads: int = field(default_factory=torch.get_num_threads)

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def p10(self) -> float:
        return quantile(self.ratios, 0.10)

    @property
    def p90(self) -> float:
        return quantile(self.ratios, 0.90)

    @property
    def a_ms(self) -> float:
        return statistics.median(self.a_s) * 1e3

    @property
    def b_ms(self) -> float:
        return statistics.median(self.b_s) * 1e3

    @property
    def faults(self) -> tuple[float, float]:
        """Median minor page faults of one A call and one B call (4 KiB of fresh memory each)."""
        return statistics.median(self.a_faults or [0]), statistics.median(self.b_faults or [0])

    @property
    def verdict(self) -> str:
        """PASS when the median ratio is within the bar, OVER when not, "—" without a bar."""
        if self.bar is None:
            return "—"
        return "PASS" if self.median <= self.bar else "OVER"

    def line(self) -> str:
        """One printable line: ratio, spread, absolute times, bar and verdict."""
        bar = f"bar ≤{self.bar:.2f}× {self.verdict}" if self.bar is not None else "no bar"
        note = f"  ({self.note})" if self.note else ""
        return (
            f"{self.name:<44} {self.median:6.3f}×  p10–p90 {self.p10:.3f}–{self.p90:.3f}  "
            f"A {self.a_ms:8.2f} ms  B {self.b_ms:8.2f} ms  faults A {self.faults[0]:.0f} B {self.faults[1]:.0f}  "
            f"n={len(self.ratios)}  {bar}{note}"
        )

    def markdown_row(self) -> str:
        """A row for the table in RESULTS.md."""
        bar = f"≤ {self.bar:.2f}×" if self.bar is not None else (self.note or "—")
        fa, fb = self.faults
        return (
            f"| {self.name} | {self.median:.3f}× | {self.p10:.3f}–{self.p90:.3f} | "
            f"{self.a_ms:.2f} | {self.b_ms:.2f} | {fa:.0f} / {fb:.0f} | {bar} | {self.verdict} |"
        )


MARKDOWN_HEADER = (
    "| comparison (B vs A) | median B/A | p10–p90 | A ms | B ms | minor faults A / B | bar | verdict |\n"
    "|---|---|---|---|---|---|---|---|"
)


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` with linear interpolation between order statistics."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def compare(
    name: str,
    a: Side | Callable[[], object],
    b: Side | Callable[[], object],
    *,
    pairs: int = MIN_PAIRS,
    bar: float | None = None,
    note: str = "",
    show: bool = True,
) -> Comparison:
    """Time ``a`` against ``b`` in interleaved pairs after 3 warm-up pairs; print and return the result."""
    if pairs < MIN_PAIRS:
        raise ValueError(f"the protocol needs at least {MIN_PAIRS} pairs, got {pairs}")
    side_a = a if isinstance(a, Side) else Side(a)
    side_b = b if isinstance(b, Side) else Side(b)
    for _ in range(WARMUP_PAIRS):
        side_a.timed()
        side_b.timed()
    runs_a: list[tuple[float, int]] = []
    runs_b: list[tuple[float, int]] = []
    for i in range(pairs):
        if i % 2 == 0:
            runs_a.append(side_a.timed())
            runs_b.append(side_b.timed())
        else:
            runs_b.append(side_b.timed())
            runs_a.append(side_a.timed())
    a_s, a_faults = (list(column) for column in zip(*runs_a, strict=True))
    b_s, b_faults = (list(column) for column in zip(*runs_b, strict=True))
    ratios = [tb / ta for ta, tb in zip(a_s, b_s, strict=True)]
    result = Comparison(name, ratios, a_s, b_s, a_faults, b_faults, bar, note)
    if show:
        print(result.line(), flush=True)
    return result


def add_arguments(parser: argparse.ArgumentParser, pairs: int = 30) -> None:
    """The protocol's command-line flags: ``--pairs`` and ``--threads``."""
    parser.add_argument("--pairs", type=int, default=pairs, help=f"timed A/B pairs (at least {MIN_PAIRS})")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads for every timing")


def set_threads(threads: int) -> None:
    """Fix torch's intra-op thread count for the whole run."""
    torch.set_num_threads(threads)


def machine() -> str:
    """The machine in one line, for RESULTS.md: CPU model, cores, torch, threads, Python."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for row in cpuinfo:
                if row.startswith("model name"):
                    model = row.split(":", 1)[1].strip()
                    break
    except OSError:
        model = platform.processor() or model
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return (
        f"{model}, {os.cpu_count()} cores ({usable} usable), torch {torch.__version__}, "
        f"torch.set_num_threads({torch.get_num_threads()}), Python {platform.python_version()}, {platform.system()}"
    )


def revision(path: str = "hookwidgets") -> str:
    """The git commit measured, with "+ uncommitted changes" when ``path`` differs from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown commit"
    dirty = git("status", "--porcelain", "--", path)
    return f"{commit} + uncommitted changes in {path}/" if dirty else commit


class _Tee(io.TextIOBase):
    """A text stream writing to stderr and keeping a copy."""

    def __init__(self) -> None:
        self.kept = io.StringIO()

    def write(self, text: str) -> int:
        sys.stderr.write(text)
        return self.kept.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


@contextlib.contextmanager
def progress_to_stderr():
    """Inside it, ``print`` goes to stderr (progress, bench/README.md); the context gives the text kept,
    for a section to quote: ``with progress_to_stderr() as log: ...; log.getvalue()``."""
    tee = _Tee()
    with contextlib.redirect_stdout(tee):
        yield tee.kept
