"""What the package says to users, and its comments, explain themselves: no tags of notes kept outside it."""

import io
import re
import tokenize
from pathlib import Path

import hookwidgets

PACKAGE = Path(hookwidgets.__file__).parent
FRONTEND = PACKAGE.parent / "js" / "src"
# Section tags of the research notes ("REPORT P1", "(P14)"), their scripts, and the design notes.
TAG = re.compile(r"\bREPORT\b|\bP1?[0-9]\b|reference script|DESIGN\.md|STYLE\.md|\bissue \d+")


def python_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal and comment of a Python file."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    kinds = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    return [(token.start[0], token.string) for token in tokens if token.type in kinds]


def test_no_string_or_comment_of_the_package_cites_internal_notes():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 50 and PACKAGE / "core" / "compare.py" in sources
    hits = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text.strip()[:100]}"
        for path in sources
        for line, text in python_texts(path)
        if TAG.search(text)
    ]
    assert hits == []


def test_no_frontend_source_cites_internal_notes():
    sources = sorted(p for p in FRONTEND.rglob("*") if p.suffix in (".js", ".css"))
    assert any(p.name == "index.js" for p in sources)
    hits = [
        f"{path.relative_to(FRONTEND)}:{number}: {line.strip()[:100]}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TAG.search(line)
    ]
    assert hits == []


def test_the_tag_pattern_finds_what_it_is_for():
    found = [
        text for text in ("(REPORT P1)", "(P14)", "reference script 15", "DESIGN.md", "issue 6") if TAG.search(text)
    ]
    assert len(found) == 5
    assert not TAG.search("P100 of 4 parts; layer P; fp16")
