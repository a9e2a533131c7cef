"""Model-derived strings in generated source: as literals, as one-line comments, or as free identifiers only."""

from __future__ import annotations

import builtins
import keyword
import math
import unicodedata
from typing import Any

from ..display import visible


def identifier(names: set[str], wanted: str, fallback: str) -> str:
    """``wanted`` if it is a free identifier (not a builtin either), else ``fallback`` (numbered when taken)."""
    # Python reads identifiers in NFKC form: a fullwidth "ｔｏｒｃｈ" would define `torch` and shadow the module.
    wanted = unicodedata.normalize("NFKC", str(wanted))
    free = wanted.isidentifier() and not keyword.iskeyword(wanted) and not hasattr(builtins, wanted)
    name = wanted if free and wanted not in names else fallback
    base, n = name, 2
    while name in names:
        name, n = f"{base}_{n}", n + 1
    names.add(name)
    return name


def comment(text: str) -> str:
    """A one-line comment of ``text``: a line break or other invisible character in it is escaped, never output."""
    return "# " + visible(text)


def quote(text: str) -> str:
    """A string literal for ``text``: ``repr``, in double quotes when that needs no escape."""
    text = str.__str__(text)  # the characters alone: a str subclass's own __repr__ could write any code
    written = repr(text)
    return f'"{written[1:-1]}"' if written[0] == "'" and '"' not in text else written


class Expression(str):
    """Source written as is where a literal goes: a name the generated code binds (``patches[0]``)."""


def literal(value: Any) -> str:
    """Source for a (nested) tuple of numbers and strings; non-finite floats as ``float("inf")``; an ``Expression``
    as written; else a ValueError."""
    if type(value) is Expression:
        return str.__str__(value)
    if isinstance(value, (tuple, list)):
        items = [literal(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))  # the plain int's repr: a subclass could write any code in its own
    if isinstance(value, float):
        return repr(float(value)) if math.isfinite(value) else f'float("{float(value)}")'
    raise ValueError(f"hook_code writes edits of numbers and strings only, not {type(value).__name__}")
