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
