"""bench/report.py: what ``make bench`` writes from the scripts' output, on small stand-in scripts."""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("bench_report", BENCH / "report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_report"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_report"]


def script(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


SECTION = """
    import sys
    print("warming up", file=sys.stderr)
    print("a line before the heading")
    print("## Stand-in figures")
    print()
    print("Measured on nothing.")
    print()
    print("| comparison (B vs A) | median B/A | A ms | B ms | bar | verdict |")
    print("|---|---|---|---|---|---|")
    print("| hooks vs plain | 1.050× | 10.00 | 10.50 | ≤ 1.10× | PASS |")
    print("| stats vs plain | 1.700× | 10.00 | 17.00 | ≤ 1.50× | OVER |")
    print()
    print("| figure | median ms | bar ms | verdict |")
    print("|---|---|---|---|")
    print("| paint | 420.0 | ≤ 500 | PASS |")
"""
LEGACY = """
    print("model: tiny")
    print("| comparison (B vs A) | median B/A | A ms | B ms | bar | verdict |")
    print("|---|---|---|---|---|---|")
    print("| legacy row | 0.990× | 5.00 | 4.95 | no bar | — |")
    print("took 1 s")
"""
FAILING = """
    import sys
    print("no chromium here", file=sys.stderr)
    sys.exit(3)
"""


def test_sections_summary_and_commands_are_written(report, tmp_path: Path) -> None:
    script(tmp_path, "good", SECTION)
    script(tmp_path, "legacy", LEGACY)
    runs = [report.run_bench(name, ["--pairs", "15"], 60, folder=tmp_path) for name in ("good", "legacy")]
    assert [run.returncode for run in runs] == [0, 0]
    assert "warming up" in runs[0].stderr and "warming up" not in runs[0].stdout
    text = report.render(runs, "make bench", "2026-01-01 00:00 UTC", "")

    good = text.split("## Stand-in figures", 1)[1].split("## legacy.py", 1)[0]
    assert "a line before the heading" not in text  # logs only
    assert f"> `{os.path.relpath(sys.executable, report.ROOT)} " in good
    assert "good.py --pairs 15` — exit 0" in good and "Measured on nothing." in good
    assert "| stats vs plain | 1.700× | 10.00 | 17.00 | ≤ 1.50× | OVER |" in good

    summary = text.split("## Summary", 1)[1].split("## Stand-in figures", 1)[0]
    rows = [line for line in summary.splitlines() if line.startswith("| good") or line.startswith("| legacy")]
    assert rows == [
        "| good | hooks vs plain | 1.050× (median b/a) | 10.00 (a ms) | ≤ 1.10× | PASS |",
        "| good | stats vs plain | 1.700× (median b/a) | 10.00 (a ms) | ≤ 1.50× | OVER |",
        "| good | paint | 420.0 (median ms) | — | ≤ 500 (bar ms) | PASS |",
        "| legacy | legacy row | 0.990× (median b/a) | 5.00 (a ms) | no bar | — |",
    ]

    legacy = text.split("## legacy.py", 1)[1]
    assert "prints no markdown section yet" in legacy
    assert "```text\nmodel: tiny\n```" in legacy and "```text\ntook 1 s\n```" in legacy
    assert "| legacy row | 0.990× |" in legacy.split("```text\nmodel: tiny\n```")[1]
    for line in ("- Date: 2026-01-01 00:00 UTC.", "- Machine: ", "- Commit: ", "Written by `make bench`"):
        assert line in text


def test_a_failing_script_is_reported_and_fails_the_run(report, tmp_path: Path) -> None:
    script(tmp_path, "broken", FAILING)
    run = report.run_bench("broken", [], 60, folder=tmp_path)
    assert run.returncode == 3
    text = report.render([run], "make bench", "now", "")
    assert "## broken.py — FAILED" in text and "exit 3" in text
    assert "```text\nno chromium here\n```" in text
    assert "- **Failed**: broken (see their sections)." in text


def test_a_script_past_its_timeout_is_killed(report, tmp_path: Path) -> None:
    script(tmp_path, "slow", "import time\nprint('## never')\ntime.sleep(60)\n")
    run = report.run_bench("slow", [], 1, folder=tmp_path)
    assert run.returncode != 0 and run.seconds < 30
    assert "killed after 1 s" in run.stderr


def test_hand_written_notes_below_the_mark_survive_a_rewrite(report, tmp_path: Path) -> None:
    old = tmp_path / "RESULTS.md"
    old.write_text(f"# old figures\n\n{report.NOTES_MARK}\n\nThe stats row is noisy under load.\n")
    notes = report.kept_notes(old)
    assert notes == "The stats row is noisy under load."
    script(tmp_path, "good", SECTION)
    text = report.render([report.run_bench("good", [], 60, folder=tmp_path)], "make bench", "now", notes)
    assert "# old figures" not in text
    assert text.endswith(f"{report.NOTES_MARK}\n\nThe stats row is noisy under load.\n")
    assert report.kept_notes(tmp_path / "missing.md") == ""
