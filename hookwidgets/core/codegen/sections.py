"""The generated code's helpers as text: read from the ``templates`` modules, the model's variable named."""

from __future__ import annotations

import io
import re
import tokenize
from functools import cache
from importlib import resources

MARKER = "# --- generated code ---"
MODEL = "model"  # the name the templates give the user's model
_BRANCH = re.compile(r'^(?P<indent> *)(?:el)?if edit\[0\] == "(?P<name>\w+)":$')


@cache
def _emitted(name: str) -> str:
    """What follows the marker line of template ``name``, without the blank lines around it."""
    text = resources.files(__package__).joinpath("templates", f"{name}.py").read_text(encoding="utf-8")
    _, marker, body = text.partition(f"\n{MARKER}\n")
    if not marker:
        raise RuntimeError(f"the codegen template {name!r} has no {MARKER!r} line")
    return body.strip("\n")


@cache
def section(name: str, model_name: str = MODEL) -> str:
    """The source template ``name`` emits, with its variable ``model`` written ``model_name``."""
    text = _emitted(name)
    return text if model_name == MODEL else rename(text, MODEL, model_name)


def edit_section(used: set[str]) -> str:
    """The ``edit_tensor`` template with only the ``_edit_tensor`` branches of the edits in ``used``, in its order."""
    lines, chain, keep, first = [], None, True, True
    for line in section("edit_tensor").splitlines():
        branch = _BRANCH.match(line)
        if branch:
            chain, keep = len(branch["indent"]), branch["name"] in used
            if keep:
                lines.append(f'{branch["indent"]}{"if" if first else "elif"} edit[0] == "{branch["name"]}":')
                first = False
            continue
        if chain is not None and line.strip() and len(line) - len(line.lstrip()) <= chain:
            chain, keep = None, True  # the first line after the if/elif chain
        if keep:
            lines.append(line)
    return "\n".join(lines)


def edit_names() -> list[str]:
    """The edits the ``edit_tensor`` template has a branch for, in its order."""
    return [match["name"] for line in section("edit_tensor").splitlines() if (match := _BRANCH.match(line))]


def rename(source: str, old: str, new: str) -> str:
    """``source`` with the variable ``old`` written ``new``: names only, never an attribute, a string or a comment."""
    spots, previous = [], ""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string == old and previous != ".":
            spots.append(token.start)
        if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = token.string
    lines = source.splitlines(keepends=True)
    for row, column in reversed(spots):  # from the end: a replacement never moves a spot still to come
        line = lines[row - 1]
        lines[row - 1] = line[:column] + new + line[column + len(old) :]
    return "".join(lines)
