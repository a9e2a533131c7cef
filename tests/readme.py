"""The README's sections and fenced code blocks, for the tests that check what it says or run its examples."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def sections() -> list[str]:
    """The ``##`` headings, in order."""
    return re.findall(r"^## (.+)$", README, re.MULTILINE)


def section(title: str) -> str:
    """The text under the ``## title`` heading, up to the next one."""
    if title not in sections():
        raise KeyError(f"README.md has no '## {title}' section; its sections: {sections()}")
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def code_blocks(text: str = README, language: str | None = None) -> list[str]:
    """The fenced code blocks of ``text`` (all of them, or those of ``language``), in order."""
    return [code for lang, code in _FENCE.findall(text) if language is None or lang == language]


FIRST_LOOK = "A first look"
"""The section of the README's first example."""


def first_example() -> str:
    """The README's first Python example, the one a new user runs after ``pip install hookwidgets``: the cells of
    "A first look", one after the other."""
    return "\n".join(code_blocks(section(FIRST_LOOK), "python"))
