"""docs/api.md: a section per public module (MODULES), an entry per public name, the hand-written blocks of docs/api/.

A module's section has its docstring, its constants, then each public name (``__all__``, or the functions and
classes it defines) under a heading with its real signature, its docstring, its hand-written block, and for a
class its fields, attributes, methods and properties. An object an earlier section documents is pointed to.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, is_typeddict

from .source import attributes, constants, fields, own_doc, package_classes, public_names, returns, signature

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "docs" / "api.md"
HAND = ROOT / "docs" / "api"
INTRO = HAND / "_intro.md"
MODULES = [
    "hookwidgets",
    "hookwidgets.ipython",
    "hookwidgets.core",
    "hookwidgets.plots",
    "hookwidgets.plots.distributed",
    "hookwidgets.distributed",
    "hookwidgets.widget",
    "hookwidgets.examples",
    "hookwidgets.examples.vit",
    "hookwidgets.examples.ddp_demo",
    "hookwidgets.examples.fsdp_demo",
]
"""The public modules, in page order: what users import from. Every other module of the package is internal, and
tests/repo/test_tests_use_public_api.py holds the tests, notebooks, README and docs to these."""
SKIPPED_MEMBERS = {"forward"}  # nn.Module.forward: called through model(x), documented by torch
BLOCK = re.compile(r"^## (\S+)\s*$", re.MULTILINE)


@dataclass
class Entry:
    """One heading of the page: a public name of a module, or a member of a class documented there."""

    module: str
    name: str  # "attach", or "Explorer.attach" for a member
    obj: Any  # the function, class, property, staticmethod or classmethod, as its module or class holds it
    same_as: str | None = None  # the qualified name under which an earlier section documents the object


def collect() -> dict[str, list[Entry]]:
    """Every module's entries in page order; constants are left to ``constants``."""
    modules = {name: importlib.import_module(name) for name in MODULES}
    classes = documented_classes()
    first: dict[int, str] = {}
    out: dict[str, list[Entry]] = {}
    for module_name, module in modules.items():
        entries = out[module_name] = []
        for name in public_names(module):
            obj = getattr(module, name)
            if not callable(obj):
                continue
            if id(obj) in first:
                entries.append(Entry(module_name, name, obj, same_as=first[id(obj)]))
                continue
            first[id(obj)] = f"{module_name}.{name}"
            entries.append(Entry(module_name, name, obj))
            if inspect.isclass(obj):
                entries += [Entry(module_name, f"{name}.{m}", value) for m, value in members(obj, classes)]
    return out


def documented_classes() -> dict[type, str]:
    """Each public class, and the module whose section documents it in full (the first to list it)."""
    found: dict[type, str] = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in public_names(module):
            if inspect.isclass(getattr(module, name)):
                found.setdefault(getattr(module, name), module_name)
    return found


def members(cls: type, documented: dict[type, str]) -> list[tuple[str, Any]]:
    """Public methods, then properties, of ``cls`` in source order (an override adding no docstring is left out)."""
    found: dict[str, Any] = {}
    bases = [b for b in cls.__mro__[1:] if b in documented]
    for owner in package_classes(cls, documented):
        for name, value in vars(owner).items():
            if name.startswith("_") or name in SKIPPED_MEMBERS or name in found:
                continue
            if not (inspect.isfunction(value) or isinstance(value, (property, staticmethod, classmethod))):
                continue
            if own_doc(value) is None and any(name in vars(b) for b in bases):
                continue
            found[name] = value
    methods = [(n, v) for n, v in found.items() if not isinstance(v, property)]
    return methods + [(n, v) for n, v in found.items() if isinstance(v, property)]


def markdown(doc: str) -> str:
    """reStructuredText inline code (````x````, ``:func:`x```) as Markdown code."""
    doc = re.sub(r":\w+:`([^`]+)`", r"`\1`", doc)
    return re.sub(r"``(.+?)``", r"`\1`", doc, flags=re.DOTALL)


def heading(entry: Entry) -> tuple[str, list[tuple[str, str]]]:
    """The entry's ``###`` heading, and the named defaults it uses."""
    obj, is_member = entry.obj, "." in entry.name
    if isinstance(obj, property):
        return f"### `{entry.name}{returns(obj)}`", []
    if inspect.isclass(obj) and issubclass(obj, BaseException):  # a warning or error: its bases say what it is
        return f"### `class {entry.name}({', '.join(base.__name__ for base in obj.__bases__)})`", []
    if inspect.isclass(obj) and is_typeddict(obj):  # a dict of known keys: its fields are the table below
        return f"### `class {entry.name}(TypedDict)`", []
    params, named = signature(obj, is_member)
    if inspect.isclass(obj):
        return f"### `class {entry.name}({params})`", named
    prefix = (
        "@staticmethod " if isinstance(obj, staticmethod) else "@classmethod " if isinstance(obj, classmethod) else ""
    )
    return f"### `{prefix}{entry.name}({params}){returns(obj)}`", named


def anchor(module: str) -> str:
    """The link target GitHub gives the module's ``## `module``` heading."""
    return "#" + re.sub(r"[^\w\- ]", "", module.lower()).replace(" ", "-")


def table(columns: tuple[str, str, str], rows: list[tuple[str, str, str | None]]) -> list[str]:
    """A Markdown table of (name, type or value, docstring) rows."""
    if not rows:
        return []
    lines = [f"| {' | '.join(columns)} |", "|---|---|---|"]
    for name, kind, doc in rows:
        cells = [f"`{name}`", kind, markdown(doc or "").replace("\n", " ")]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return [*lines, ""]


def typed(rows: list[tuple[str, str, str | None]]) -> list[tuple[str, str, str | None]]:
    """Rows with their type written as code."""
    return [(name, f"`{kind}`" if kind else "", doc) for name, kind, doc in rows]


def hand_blocks(module: str) -> dict[str, str]:
    """The hand-written blocks of docs/api/<module>.md by entry name; ``""`` is the module's own."""
    path = HAND / f"{module}.md"
    if not path.exists():
        return {}
    parts = BLOCK.split(path.read_text(encoding="utf-8"))
    blocks = {"": parts[0].strip()}
    blocks.update({name: text.strip() for name, text in zip(parts[1::2], parts[2::2], strict=True)})
    return {name: text for name, text in blocks.items() if text}


def render_entry(entry: Entry, hand: dict[str, str], documented: dict[type, str]) -> list[str]:
    """The heading and text of one entry."""
    title, named = heading(entry)
    lines = [title, ""]
    doc = own_doc(entry.obj)
    if entry.same_as is not None:
        module = entry.same_as.rpartition(".")[0]
        summary = (doc or "").split("\n\n")[0]
        return [
            *lines,
            markdown(summary),
            "",
            f"The same object as `{entry.same_as}` ([`{module}`]({anchor(module)})).",
            "",
        ]
    lines += [markdown(doc or ""), ""]
    if named:
        lines += ["Defaults: " + ", ".join(f"`{name}` = `{value}`" for name, value in dict(named).items()) + ".", ""]
    if entry.name in hand:
        lines += [hand[entry.name], ""]
    if inspect.isclass(entry.obj):
        lines += table(("field", "type", "meaning"), typed(fields(entry.obj)))
        lines += table(("attribute", "type", "meaning"), typed(attributes(entry.obj, documented)))
        bases = [b for b in entry.obj.__mro__[1:] if b in documented]
        if bases:
            section = documented[bases[0]]
            lines += [f"It inherits every member of `{bases[0].__name__}` ([`{section}`]({anchor(section)})).", ""]
    return lines


def render() -> str:
    """The whole page."""
    sections = collect()
    documented = documented_classes()
    lines = [
        "# hookwidgets API reference",
        "",
        "<!-- Written by `make docs` (tools/apidoc) from the code and the hand-written blocks in docs/api/:",
        "     edit those, then run `make docs`. tests/repo/test_api_docs.py fails while this file differs. -->",
        "",
        "Every public name, its arguments and what it returns, module by module, from the code's docstrings.",
        "",
    ]
    for name in MODULES:
        summary = " ".join(markdown(inspect.getdoc(importlib.import_module(name)) or "").split("\n\n")[0].split())
        lines.append(f"- [`{name}`]({anchor(name)}): {summary}")
    lines += ["", INTRO.read_text(encoding="utf-8").strip(), ""]
    for name, entries in sections.items():
        module = importlib.import_module(name)
        hand = hand_blocks(name)
        lines += [f"## `{name}`", "", markdown(inspect.getdoc(module) or ""), ""]
        lines += table(("constant", "value", "meaning"), constants(module))
        if "" in hand:
            lines += [hand[""], ""]
        for entry in entries:
            lines += render_entry(entry, hand, documented)
    return "\n".join(lines).rstrip() + "\n"


def undocumented() -> list[str]:
    """Qualified names of public functions, classes, members, fields, attributes and constants without a docstring."""
    sections = collect()
    documented = documented_classes()
    missing = []
    for module_name, entries in sections.items():
        missing += [f"{module_name}.{n}" for n, _, doc in constants(importlib.import_module(module_name)) if not doc]
        for entry in entries:
            if entry.same_as is not None:
                continue
            if own_doc(entry.obj) is None:
                missing.append(f"{module_name}.{entry.name}")
            if inspect.isclass(entry.obj):
                rows = fields(entry.obj) + attributes(entry.obj, documented)
                missing += [f"{module_name}.{entry.name}.{n}" for n, _, doc in rows if not doc]
    return missing
