"""The generated code's helpers as text: read from the ``templates`` modules, the model's variable named."""

from __future__ import annotations

import ast
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
    return unannotated(body.strip("\n"))


def unannotated(source: str) -> str:
    """``source`` without its type annotations (of parameters, returns and assignments) and ``# type: ignore[...]``
    comments, written as before them: the templates are typed for the checker, the code they emit stays plain."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:  # ast's columns count UTF-8 bytes
        start = starts[line - 1]
        return start + len(source[start : starts[line]].encode()[:column].decode())

    cuts: list[tuple[int, int, str]] = []  # (start, end, replacement)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and node.value is None:  # a declaration alone: its lines go
            start, end = starts[node.lineno - 1], starts[node.end_lineno or node.lineno]
            before = source[start : offset(node.lineno, node.col_offset)]
            after = source[offset(node.end_lineno or node.lineno, node.end_col_offset or 0) : end].strip()
            if before.strip() or (after and not after.startswith("#")):
                raise ValueError(f"line {node.lineno}: a declaration shares its line with other code")
            cuts.append((start, end, ""))
        elif isinstance(node, ast.AnnAssign):
            target, annotation = node.target, node.annotation
            start = offset(target.end_lineno or target.lineno, target.end_col_offset or 0)
            cuts.append((start, offset(annotation.end_lineno or 0, annotation.end_col_offset or 0), ""))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            defaults = dict(zip(arguments.args[::-1], arguments.defaults[::-1], strict=False))
            defaults |= {
                a: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d is not None
            }
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
            for arg in every:
                if arg is None or arg.annotation is None:
                    continue
                start = offset(arg.lineno, arg.col_offset) + len(arg.arg)
                default = defaults.get(arg)
                if default is None:
                    end = offset(arg.end_lineno or 0, arg.end_col_offset or 0)
                    cuts.append((start, end, ""))
                else:  # "x: T = v" was "x=v"
                    cuts.append((start, offset(default.lineno, default.col_offset), "="))
            if node.returns is not None:
                end = offset(node.returns.end_lineno or 0, node.returns.end_col_offset or 0)
                start = source.rindex("->", 0, offset(node.returns.lineno, node.returns.col_offset))
                cuts.append((len(source[:start].rstrip()), end, ""))
    for start, end, replacement in sorted(cuts, reverse=True):  # from the end: a cut never moves one still to come
        source = source[:start] + replacement + source[end:]
    lines = source.splitlines(keepends=True)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.string.startswith("# type: ignore["):
            row, column = token.start  # the comment, with its reason, runs to the end of its line
            line = lines[row - 1]
            lines[row - 1] = line[:column].rstrip() + line[len(line.rstrip("\r\n")) :]
    return "".join(lines)


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
