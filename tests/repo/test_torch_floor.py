"""The torch floor is one version: pyproject.toml declares it, `make test-floor` installs it, the README says it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def declared_floor() -> str:
    """The X.Y of pyproject.toml's ``torch>=X.Y`` requirement."""
    found = re.findall(r'^\s*"torch>=(\d+\.\d+)",$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert len(found) == 1, "pyproject.toml declares one torch floor, as torch>=X.Y"
    return found[0]


def test_make_test_floor_installs_the_declared_floor():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.findall(r"^TORCH_FLOOR := torch==(\S+)$", makefile, re.M) == [f"{declared_floor()}.0"]


def test_the_readme_says_the_declared_floor():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"needs torch only ({declared_floor()} or newer)" in readme
    assert f"runs the unit tests on torch {declared_floor()}" in readme
