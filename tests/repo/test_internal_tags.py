"""What the repository says, in its code, comments and documents, explains itself: no tags of notes kept outside it."""

import io
import json
import re
import tokenize
from pathlib import Path

import hookwidgets

PACKAGE = Path(hookwidgets.__file__).parent
REPOSITORY = PACKAGE.parent
FRONTEND = REPOSITORY / "js" / "src"
# Section tags of the research notes ("REPORT P1", "(P14)"), their scripts, and the design notes.
NOTES = re.compile(r"\bREPORT\b|\bP1?[0-9]\b|reference script|DESIGN\.md|STYLE\.md")
TAG = re.compile(NOTES.pattern + r"|\bissue \d+")


def python_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal and comment of a Python file."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    kinds = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    return [(token.start[0], token.string) for token in tokens if token.type in kinds]


def test_no_string_or_comment_of_the_package_cites_internal_notes():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 50 and PACKAGE / "core" / "explorer.py" in sources
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


def _hits(texts: list[tuple[Path, int, str]], pattern: re.Pattern) -> list[str]:
    return [
        f"{path.relative_to(REPOSITORY)}:{line}: {text.strip()[:100]}"
        for path, line, text in texts
        if pattern.search(text)
    ]


def _markdown(path: Path) -> list[tuple[Path, int, str]]:
    return [(path, number, line) for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]


def test_no_test_cites_internal_notes():
    sources = [p for p in sorted((REPOSITORY / "tests").rglob("*.py")) if p != Path(__file__)]
    assert len(sources) > 50
    assert _hits([(path, line, text) for path in sources for line, text in python_texts(path)], TAG) == []


def test_no_document_or_notebook_cites_internal_notes():
    documents = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
    texts = [entry for path in documents for entry in _markdown(path)]
    for notebook in sorted((REPOSITORY / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        texts += [(notebook, number, "".join(cell["source"])) for number, cell in enumerate(cells, 1)]
    assert len(documents) >= 3 and any(path.suffix == ".ipynb" for path, _, _ in texts)
    assert _hits(texts, TAG) == []


def test_no_benchmark_cites_internal_notes():
    """Their section titles name the tracker's issue whose bar they measure, as bench/RESULTS.md does."""
    scripts = sorted((REPOSITORY / "bench").glob("*.py"))
    assert any(p.name == "_protocol.py" for p in scripts)
    texts = [(path, line, text) for path in scripts for line, text in python_texts(path)]
    assert _hits(texts + _markdown(REPOSITORY / "bench" / "README.md"), NOTES) == []


def test_the_tag_pattern_finds_what_it_is_for():
    found = [
        text for text in ("(REPORT P1)", "(P14)", "reference script 15", "DESIGN.md", "issue 6") if TAG.search(text)
    ]
    assert len(found) == 5
    assert not TAG.search("P100 of 4 parts; layer P; fp16")
