"""Run every benchmark in bench/ and write bench/RESULTS.md from what each one prints (``make bench``).

The contract a bench script follows (bench/README.md says the same, with an example):

1. ``python bench/<name>.py`` with the flags listed in ``BENCHES`` below runs the full measurement.
2. Its **stdout is one markdown section**: a ``## `` heading (the title), what was measured (model,
   sizes, protocol), the command, date, machine and commit, and a table of its figures. Progress
   lines go to **stderr**; any stdout line before the first ``## `` heading is kept in the log only.
3. Each figure is a row of a markdown table whose header has a ``bar`` column and a ``verdict``
   column (``PASS``, ``OVER`` or ``—``), with its baseline beside it (e.g. the protocol's ``A ms``).
   Those rows are also gathered into the summary at the top of RESULTS.md.
4. Exit status 0 when it measured (a missed bar is a result, not a failure); non-zero when it could
   not measure. A failed script gets a section with the tail of its stderr, and ``make bench`` fails.

This file adds the header (date, machine, commit, load), the summary, and under each section's
heading the exact command it ran, its exit status, wall time and the load average around it. A
script whose stdout has no ``## `` heading yet is still reported: its tables as markdown, its other
lines in a text block. Text below ``NOTES_MARK`` in the old RESULTS.md is kept (hand-written notes).
Full stdout and stderr of each script go to ``artifacts/bench/<name>.log``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "RESULTS.md"
LOGS = ROOT / "artifacts" / "bench"
NOTES_MARK = "<!-- hand-written notes below: kept by bench/report.py when make bench rewrites this file -->"

BENCHES: dict[str, list[str]] = {
    "capture_overhead": ["--pairs", "60", "--profile"],
    "graph_scale": ["--pairs", "40"],  # the recording-forward ratio sits near its bar: more pairs, a steadier median
    "attribution": [],
    "plots": [],
    "frontend": [],
    "frontend_gpt2": [],
    "live_overhead": ["--pairs", "30"],
    "ddp_overhead": ["--pairs", "60"],
    "other_models": ["--pairs", "30"],
    "attention": [],
    "token_attribution": [],
    "induction_training": [],
    "interp": [],
    "run_log": [],  # writes a ~9 GB synthetic log to the temp dir, then removes it
    "fsdp_step": ["--pairs", "30"],
}
"""Every benchmark ``make bench`` runs, in this order, with its flags."""


@dataclass
class Run:
    """One bench script's run: its command, exit status, output and the load around it."""

    name: str
    command: list[str]
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    load: tuple[float, float] = (0.0, 0.0)
    started: str = ""

    @property
    def shown_command(self) -> str:
        return " ".join(os.path.relpath(part, ROOT) if os.path.isabs(part) else part for part in self.command)


@dataclass
class Figure:
    """One row of a table with a verdict column, for the summary."""

    bench: str
    cells: dict[str, str] = field(default_factory=dict)
    first: str = ""


def run_bench(name: str, args: list[str], timeout: float, folder: Path = BENCH) -> Run:
    """Run ``<folder>/<name>.py``, echoing its output to our stderr as it comes; keep stdout and stderr."""
    command = [sys.executable, str(folder / f"{name}.py"), *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    load_before = os.getloadavg()[0]
    started = time.strftime("%H:%M UTC", time.gmtime())
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=_tee, args=(proc.stdout, out, f"[{name}] "), daemon=True),
        threading.Thread(target=_tee, args=(proc.stderr, err, f"[{name}:err] "), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        returncode = proc.wait()
        err.append(f"\nbench/report.py: killed after {timeout:.0f} s (--timeout)\n")
    for reader in readers:
        reader.join()
    seconds = time.perf_counter() - start
    return Run(
        name, command, returncode, seconds, "".join(out), "".join(err), (load_before, os.getloadavg()[0]), started
    )


def _tee(stream: IO[str], into: list[str], prefix: str) -> None:
    for line in stream:
        into.append(line)
        sys.stderr.write(prefix + line)
        sys.stderr.flush()


def section(run: Run) -> str:
    """The markdown section of one run: the script's own section, or its raw output framed, plus how it ran."""
    ran = (
        f"> `{run.shown_command}` — exit {run.returncode}, {run.seconds:.0f} s, started {run.started}, "
        f"1-min load average {run.load[0]:.2f} before and {run.load[1]:.2f} after"
    )
    if run.returncode != 0:
        tail = "\n".join(run.stderr.rstrip().splitlines()[-40:])
        said = "It could not measure; the end of its stderr:"
        return f"## {run.name}.py — FAILED\n\n{ran}\n\n{said}\n\n```text\n{tail}\n```\n"
    lines = run.stdout.rstrip().splitlines()
    heading = next((i for i, line in enumerate(lines) if line.startswith("## ")), None)
    if heading is None:
        note = "This script prints no markdown section yet (bench/README.md); its stdout as printed:"
        return f"## {run.name}.py\n\n{ran}\n\n{note}\n\n{frame_raw(lines)}\n"
    body = "\n".join(lines[heading + 1 :]).strip("\n")
    return f"{lines[heading]}\n\n{ran}\n\n{body}\n"


def frame_raw(lines: list[str]) -> str:
    """Markdown tables as they are; every other run of lines in a text block."""
    blocks: list[str] = []
    for is_table, group in _groups(lines):
        text = "\n".join(group).strip("\n")
        if not text:
            continue
        blocks.append(text if is_table else f"```text\n{text}\n```")
    return "\n\n".join(blocks)


def _groups(lines: list[str]) -> Iterable[tuple[bool, list[str]]]:
    current: list[str] = []
    current_table = False
    for line in lines:
        is_table = line.lstrip().startswith("|")
        if current and is_table != current_table:
            yield current_table, current
            current = []
        current_table = is_table
        current.append(line)
    if current:
        yield current_table, current


def figures(bench: str, markdown: str) -> list[Figure]:
    """Rows of every table whose header has ``bar`` and ``verdict`` columns, by column name."""
    found: list[Figure] = []
    header: list[str] | None = None
    for line in markdown.splitlines():
        if not line.lstrip().startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if all(cell and set(cell) <= set("-: ") for cell in cells):
            continue  # the separator row
        if "verdict" in header and any(h.startswith("bar") for h in header):
            found.append(Figure(bench, dict(zip(header, cells, strict=False)), cells[0]))
    return found


def summary(found: list[Figure]) -> str:
    """One table of every figure: its value, its baseline, its bar and its verdict."""
    rows = [
        "| bench | figure | result | baseline | bar | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for fig in found:
        headers = list(fig.cells)
        value_key = headers[1] if len(headers) > 1 else ""
        baseline_key = next((h for h in headers if h in ("a ms", "baseline") or h.startswith("baseline")), None)
        bar_key = next(h for h in headers if h.startswith("bar"))
        value = f"{fig.cells.get(value_key, '')} ({value_key})" if value_key else ""
        baseline = f"{fig.cells[baseline_key]} ({baseline_key})" if baseline_key else "—"
        bar = fig.cells[bar_key] + (f" ({bar_key})" if bar_key != "bar" else "")
        rows.append(f"| {fig.bench} | {fig.first} | {value} | {baseline} | {bar} | {fig.cells.get('verdict', '')} |")
    return "\n".join(rows)


def machine() -> str:
    """CPU model, cores, memory, torch and Python versions, OS (no torch import: the scripts set threads)."""
    cpu, mem_kib = platform.processor() or "unknown CPU", 0
    try:
        cpu = next(
            r.split(":", 1)[1].strip() for r in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in r
        )
        mem_kib = int(
            next(r.split()[1] for r in Path("/proc/meminfo").read_text().splitlines() if r.startswith("MemTotal"))
        )
    except (OSError, StopIteration, ValueError):
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = f", {mem_kib / 2**20:.0f} GiB RAM" if mem_kib else ""
    return (
        f"{cpu}, {os.cpu_count()} cores ({usable} usable){memory}, torch {_version('torch')}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def commit() -> str:
    """The commit measured, saying when hookwidgets/ or bench/ differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown commit"
    dirty = git("status", "--porcelain", "--", "hookwidgets", "bench")
    return f"{head} + uncommitted changes in hookwidgets/ or bench/" if dirty else head


def kept_notes(path: Path) -> str:
    """The hand-written notes below ``NOTES_MARK`` in the current file, if any."""
    if not path.exists():
        return ""
    text = path.read_text()
    return text.split(NOTES_MARK, 1)[1].strip("\n") if NOTES_MARK in text else ""


def render(runs: list[Run], command: str, started: str, notes: str) -> str:
    """The whole RESULTS.md."""
    sections = [section(run) for run in runs]
    found = [fig for run, text in zip(runs, sections, strict=True) for fig in figures(run.name, text)]
    failed = [run.name for run in runs if run.returncode != 0]
    header = [
        "# Benchmark results",
        "",
        f"Written by `{command}` (bench/report.py) from what each script in bench/ printed; do not edit by hand",
        "above the notes mark at the end. Protocol: bench/_protocol.py.",
        "",
        f"- Date: {started}.",
        f"- Machine: {machine()}.",
        f"- Commit: {commit()}.",
        f"- Load: 1-min load average {runs[0].load[0]:.2f} at the start, {runs[-1].load[1]:.2f} at the end"
        " (each section gives its own; a busy machine makes the ratios noisy).",
    ]
    if failed:
        header.append(f"- **Failed**: {', '.join(failed)} (see their sections).")
    parts = ["\n".join(header), "## Summary: every figure, its baseline and its bar", summary(found), *sections]
    parts.append(NOTES_MARK + ("\n\n" + notes if notes else ""))
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(BENCHES), help="run only these scripts")
    parser.add_argument("--output", type=Path, default=RESULTS, help="the file to write (default bench/RESULTS.md)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one script may run")
    parser.add_argument("--command", default="make bench", help="the command named in the header")
    args = parser.parse_args()
    if args.only and args.output.resolve() == RESULTS:
        parser.error("a partial run would drop the other sections of bench/RESULTS.md: pass --output elsewhere")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    LOGS.mkdir(parents=True, exist_ok=True)
    runs = []
    for name in args.only or list(BENCHES):
        run = run_bench(name, BENCHES[name], args.timeout)
        (LOGS / f"{name}.log").write_text(f"$ {run.shown_command}\n--- stdout\n{run.stdout}--- stderr\n{run.stderr}")
        runs.append(run)
    args.output.write_text(render(runs, args.command, started, kept_notes(args.output)))
    print(f"wrote {os.path.relpath(args.output)}; logs in {os.path.relpath(LOGS)}/", file=sys.stderr)
    return 1 if any(run.returncode != 0 for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
