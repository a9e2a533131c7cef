"""README.md keeps its two commands, links the API reference, lists every notebook, and links nothing missing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # [text](path) and ![alt](path), anchors dropped


def test_the_two_commands_are_there():
    assert "make demo" in README and "make test" in README


def test_it_links_the_api_reference_and_every_notebook():
    links = set(LINK.findall(README))
    assert "docs/api.md" in links
    notebooks = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 5
    assert [n for n in notebooks if n not in links] == []


def test_every_local_link_and_image_exists():
    local = [link for link in LINK.findall(README) if not re.match(r"[a-z]+:", link)]
    assert any(link.endswith(".png") for link in local)  # the gallery shows screenshots
    assert [link for link in local if not (ROOT / link).exists()] == []


def _layout() -> dict[str, str]:
    """The README's Layout block: path -> what it says the path holds."""
    block = README.split("## Layout", 1)[1].split("```", 2)[1]
    return dict(line.split(maxsplit=1) for line in block.strip().splitlines())


def test_the_layout_names_only_paths_that_exist():
    assert [path for path in _layout() if not (ROOT / path).exists()] == []


def test_the_layout_names_every_package_and_test_folder():
    listed = set(_layout())
    folders = [
        p
        for parent in ("hookwidgets", "hookwidgets/core", "tests", "tools")
        for p in sorted((ROOT / parent).iterdir())
        if p.is_dir() and (p / "__init__.py").exists()
    ]
    assert len(folders) > 10
    assert [
        f"{p.relative_to(ROOT).as_posix()}/" for p in folders if f"{p.relative_to(ROOT).as_posix()}/" not in listed
    ] == []


def test_unit_tests_mirror_the_package():
    """Every folder of tests/unit/ is a package folder of hookwidgets/, and each package folder with code has one."""
    tests = ROOT / "tests" / "unit"
    mirrored = {p.relative_to(tests).as_posix() for p in tests.rglob("*") if p.is_dir() and any(p.glob("test_*.py"))}
    package = ROOT / "hookwidgets"
    folders = {
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_dir() and (p / "__init__.py").exists() and "templates" not in p.parts
    }
    assert mirrored - folders == set(), "a tests/unit folder with no package folder of that name"
    assert folders - mirrored == set(), "a package folder whose tests live elsewhere"
