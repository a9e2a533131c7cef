"""docs/api.md cannot fall behind the code: every public name is there, with its real signature.

Each ``## `module``` section documents that module's public names (``__all__``, or the public functions
and classes it defines). An entry is a heading ``### `name(params) -> return``` (or ``### `class Name(...)```,
or ``### `Class.member``` for a property); its parameters, their order, keyword-only marker and defaults,
and its return annotation, must be those of the real object. Members of a documented class (methods,
properties, dataclass and named-tuple fields, attributes set in ``__init__``) must be named in its section.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hookwidgets.core.attribution import METHODS
from hookwidgets.core.hooks.actions import BUILTIN_ACTIONS
from hookwidgets.core.hooks.edits import EDIT_NAMES
from hookwidgets.core.hooks.kinds import KINDS
from hookwidgets.ipython import USAGE

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
MODULES = [
    "hookwidgets",
    "hookwidgets.ipython",
    "hookwidgets.core",
    "hookwidgets.core.compare",
    "hookwidgets.core.attribution",
    "hookwidgets.core.optim",
    "hookwidgets.core.packaging",
    "hookwidgets.plots",
    "hookwidgets.plots.distributed",
    "hookwidgets.distributed",
    "hookwidgets.widget",
    "hookwidgets.examples",
    "hookwidgets.examples.vit",
    "hookwidgets.examples.ddp_demo",
]
SKIPPED_MEMBERS = {"forward"}  # nn.Module.forward: called through model(x), documented by torch
HEADING = re.compile(r"^### `(?:class )?([\w.]+)(\((.*)\))?(?: -> (.+))?`\s*$")
SECTION = re.compile(r"^## `([\w.]+)`\s*$")


@dataclasses.dataclass
class Entry:
    module: str
    name: str
    params: str | None
    returns: str | None
    body: str
    obj: Any = None


def _parse() -> tuple[dict[str, str], list[Entry]]:
    """Module sections' text, and every ``###`` entry with the text under it."""
    sections: dict[str, list[str]] = {}
    entries: list[Entry] = []
    module = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            match = SECTION.match(line)
            module = match.group(1) if match else None
            if module:
                sections[module] = []
            continue
        if module is None:
            continue
        sections[module].append(line)
        if line.startswith("### "):
            match = HEADING.match(line)
            assert match, f"docs/api.md: entry heading not of the form ### `name(params) -> return`: {line!r}"
            entries.append(Entry(module, match.group(1), match.group(3), match.group(4), ""))
        elif entries and entries[-1].module == module:
            entries[-1].body += line + "\n"
    return {m: "\n".join(lines) for m, lines in sections.items()}, entries


SECTIONS, ENTRIES = _parse()


def _resolve(entry: Entry) -> Any:
    obj: Any = importlib.import_module(entry.module)
    for part in entry.name.split("."):
        holder = obj
        obj = None
        for owner in getattr(holder, "__mro__", (holder,)):
            if part in vars(owner):
                obj = vars(owner)[part]  # a property stays a property; a staticmethod is unwrapped below
                break
        if obj is None:
            obj = getattr(holder, part)  # raises AttributeError naming what the doc got wrong
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
    return obj


for _entry in ENTRIES:
    try:
        _entry.obj = _resolve(_entry)
    except (AttributeError, ImportError):
        _entry.obj = None


def _public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == module_name
    ]


def _split_params(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


MISSING = object()


def _doc_params(text: str, module: Any) -> list[tuple[str, str, Any]]:
    """(name, kind, default) from the doc's parameter text; defaults are literals or names in ``module``."""
    out: list[tuple[str, str, Any]] = []
    keyword_only = False
    for part in _split_params(text):
        if part == "*":
            keyword_only = True
            continue
        if part.startswith("**"):
            out.append((part[2:], "VAR_KEYWORD", MISSING))
            continue
        if part.startswith("*"):
            out.append((part[1:], "VAR_POSITIONAL", MISSING))
            keyword_only = True
            continue
        name, _, default = part.partition("=")
        value = MISSING
        if default:
            try:
                value = ast.literal_eval(default)
            except (ValueError, SyntaxError):
                value = module
                for attr in default.split("."):
                    value = getattr(value, attr)
        out.append((name, "KEYWORD_ONLY" if keyword_only else "POSITIONAL_OR_KEYWORD", value))
    return out


def _real_params(obj: Any) -> list[tuple[str, str, Any]]:
    signature = inspect.signature(obj)
    fields = {f.name: f for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else {}
    out = []
    for param in signature.parameters.values():
        if param.name == "self" or param.name.startswith("_"):
            continue
        kind = "POSITIONAL_OR_KEYWORD" if param.kind == param.POSITIONAL_ONLY else param.kind.name
        default = MISSING if param.default is param.empty else param.default
        if param.name in fields and fields[param.name].default_factory is not dataclasses.MISSING:
            default = fields[param.name].default_factory()
        out.append((param.name, kind, default))
    return out


def _annotation(obj: Any) -> str | None:
    target = obj.fget if isinstance(obj, property) else obj
    if inspect.isclass(target):
        return None
    annotation = inspect.signature(target).return_annotation
    if annotation is inspect.Signature.empty:
        return None
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _class_section(entry: Entry) -> str:
    """The class entry's text and every ``Class.member`` entry's heading and text."""
    texts = [entry.body]
    texts += [
        f"`{e.name}` {e.body}" for e in ENTRIES if e.module == entry.module and e.name.startswith(entry.name + ".")
    ]
    return "\n".join(texts)


def _init_attributes(cls: type) -> set[str]:
    """Public attributes assigned as ``self.x = ...`` in ``cls.__init__`` (and its hookwidgets bases)."""
    names: set[str] = set()
    for owner in cls.__mro__:
        init = vars(owner).get("__init__")
        if init is None or not getattr(owner, "__module__", "").startswith("hookwidgets"):
            continue
        try:
            source = inspect.getsource(init)
        except OSError:  # a generated __init__ (dataclass): its fields are checked instead
            continue
        tree = ast.parse(textwrap.dedent(source))
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                for leaf in target.elts if isinstance(target, ast.Tuple) else [target]:
                    is_self = isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name)
                    if is_self and leaf.value.id == "self" and not leaf.attr.startswith("_"):
                        names.add(leaf.attr)
    return names


def _members(cls: type) -> tuple[set[str], set[str]]:
    """(methods, other members: properties, fields, init attributes) a class defines in hookwidgets."""
    methods, others = set(), set()
    for owner in cls.__mro__:
        if not getattr(owner, "__module__", "").startswith("hookwidgets"):
            continue
        for name, value in vars(owner).items():
            if name.startswith("_") or name in SKIPPED_MEMBERS:
                continue
            if isinstance(value, property):
                others.add(name)
            elif inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
                methods.add(name)
    if dataclasses.is_dataclass(cls):
        others |= {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    others |= set(getattr(cls, "_fields", ()))
    others |= _init_attributes(cls)
    return methods, others - methods


def test_every_module_has_a_section():
    assert sorted(SECTIONS) == sorted(MODULES), "add (or remove) a ## `module` section in docs/api.md"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: f"{e.module}:{e.name}")
def test_entry_names_something_real_with_its_real_signature(entry: Entry):
    assert entry.obj is not None, f"docs/api.md documents {entry.module}.{entry.name}, which does not exist"
    obj = entry.obj
    if isinstance(obj, property) or not callable(obj):
        assert entry.params is None, f"{entry.name} is not callable: write it without parentheses"
        if isinstance(obj, property):
            assert entry.returns == _annotation(obj), f"{entry.name}: write its type as in the code, `-> type`"
        return
    assert entry.params is not None, f"{entry.name} is callable: write its parameters, e.g. `{entry.name}(...)`"
    module = sys.modules[getattr(obj, "__module__", entry.module)]
    assert _doc_params(entry.params, module) == _real_params(obj), f"{entry.name}: parameters differ from the code"
    assert entry.returns == _annotation(obj), f"{entry.name}: the return annotation differs from the code"
    assert entry.body.strip(), f"{entry.name}: say what it is for and what it returns"


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_name_of_the_module_is_documented(module_name: str):
    module = importlib.import_module(module_name)
    documented = {e.name for e in ENTRIES if e.module == module_name}
    section = SECTIONS.get(module_name, "")
    missing = []
    for name in _public_names(module_name):
        obj = getattr(module, name)
        if callable(obj):
            if name not in documented:
                missing.append(name)
        elif f"`{name}`" not in section:
            missing.append(name)
    assert not missing, f"docs/api.md, section {module_name}: document {missing}"


@pytest.mark.parametrize("entry", [e for e in ENTRIES if inspect.isclass(e.obj)], ids=lambda e: f"{e.module}:{e.name}")
def test_every_member_of_a_documented_class_is_named(entry: Entry):
    methods, others = _members(entry.obj)
    headed = {(e.obj_owner, e.name.split(".")[-1]) for e in _member_entries()}
    missing_methods = [
        m
        for m in sorted(methods)
        if not any(
            m == member and (owner in entry.obj.__mro__ or entry.obj in owner.__mro__) for owner, member in headed
        )
    ]
    assert not missing_methods, f"docs/api.md: add ### `{entry.name}.<method>(...)` entries for {missing_methods}"
    related = [
        e for e in ENTRIES if inspect.isclass(e.obj) and (e.obj in entry.obj.__mro__ or entry.obj in e.obj.__mro__)
    ]
    section = "".join(_class_section(e) for e in related)
    missing = [name for name in sorted(others) if f"`{name}`" not in section and f".{name}`" not in section]
    assert not missing, f"docs/api.md, {entry.name}: name {missing} in its section"


@dataclasses.dataclass
class _Member:
    obj_owner: type
    name: str


def _member_entries() -> list[_Member]:
    found = []
    for e in ENTRIES:
        if "." not in e.name:
            continue
        owner = _resolve(Entry(e.module, e.name.rsplit(".", 1)[0], None, None, ""))
        if inspect.isclass(owner):
            found.append(_Member(owner, e.name))
    return found


def test_every_hook_kind_action_edit_and_method_is_named():
    text = DOC.read_text(encoding="utf-8")
    user_kinds = [k for k in KINDS if k != "param_grad"]  # users attach "grad" to a parameter
    names = [*user_kinds, *BUILTIN_ACTIONS, *EDIT_NAMES, *METHODS]
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"docs/api.md does not name {missing}"
    assert USAGE.split(",")[0] in text  # the magic's usage line


def test_the_parser_catches_a_wrong_signature():
    """The checks above can fail: a doc parameter list that differs from the code is seen as different."""
    from hookwidgets.core import explorer

    real = _real_params(explorer.Explorer.attach)
    assert (
        _doc_params('target, kind="forward", action="capture", *, edit=None, copy=False, with_kwargs=False', explorer)
        == real
    )
    assert (
        _doc_params('target, kind="forward", *, action="capture", edit=None, copy=False, with_kwargs=False', explorer)
        != real
    )
    assert (
        _doc_params('target, kind="backward", action="capture", *, edit=None, copy=False, with_kwargs=False', explorer)
        != real
    )
