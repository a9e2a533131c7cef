"""docs/api.md is what ``make docs`` writes from the code, every public name has a docstring, and the hand-written
blocks in docs/api/ belong to entries that exist."""

from __future__ import annotations

import difflib
import importlib
import re

import pytest

from hookwidgets.core import BUILTIN_ACTIONS, EDIT_NAMES, KINDS, METHODS, Record
from hookwidgets.ipython import USAGE
from tools.apidoc import page, source

PAGE = page.OUTPUT.read_text(encoding="utf-8")


def test_the_page_is_what_make_docs_writes():
    expected = page.render()
    diff = difflib.unified_diff(PAGE.splitlines(), expected.splitlines(), "docs/api.md", "the code says", lineterm="")
    if expected != PAGE:
        pytest.fail("docs/api.md differs from the code: run `make docs`\n" + "\n".join(list(diff)[:60]))


def test_every_public_function_class_member_field_and_constant_has_a_docstring():
    assert page.undocumented() == [], "write their docstrings, then run `make docs`"


def test_each_module_has_its_section_and_each_public_name_its_entry():
    sections = re.split(r"^## `([\w.]+)`$", PAGE, flags=re.MULTILINE)
    by_module = dict(zip(sections[1::2], sections[2::2], strict=True))
    assert list(by_module) == page.MODULES
    for name, text in by_module.items():
        module = importlib.import_module(name)
        listed = getattr(module, "__all__", None) or [
            n
            for n, obj in vars(module).items()
            if not n.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == name
        ]
        headed = set(re.findall(r"^### `(?:class |@\w+ )?(\w+)[(` ]", text, flags=re.MULTILINE))
        tabled = set(re.findall(r"^\| `(\w+)` \|", text, flags=re.MULTILINE))
        assert [n for n in listed if n not in headed | tabled] == [], f"section {name}"


def test_every_hand_block_belongs_to_an_entry():
    files = {p.stem for p in page.HAND.glob("*.md")} - {page.INTRO.stem}
    assert files <= set(page.MODULES), "docs/api/<module>.md for a module the page does not document"
    sections = page.collect()
    for module in files:
        names = {e.name for e in sections[module] if e.same_as is None}
        assert set(page.hand_blocks(module)) - {""} <= names, f"docs/api/{module}.md: a block for no entry"


def test_every_hook_kind_action_edit_and_method_is_named():
    user_kinds = list(dict.fromkeys(spec.user_name for spec in KINDS.values()))  # "grad" on a parameter too
    names = [*user_kinds, *BUILTIN_ACTIONS, *EDIT_NAMES, *METHODS]
    assert [name for name in names if f"`{name}`" not in PAGE] == []
    assert USAGE.split(",")[0] in PAGE  # the magic's usage line


def test_the_kinds_table_gives_each_kind_its_callable_signature():
    row = r"^\| ((?:`\w+`(?:, )?)+) \| [^|]+ \| [^|]+ \| [^|]+ \| `(hook\([^`]*\))` \|$"
    written = [
        (kind, sig) for kinds, sig in re.findall(row, PAGE, re.MULTILINE) for kind in re.findall(r"`(\w+)`", kinds)
    ]
    assert [(kind, sig) for kind, sig in written if KINDS[kind].signature != sig] == []
    # a global kind whose signature is a module kind's may say "as the module kinds"
    named = {k for k, spec in KINDS.items() if spec.family != "global" and spec.user_name == k}
    assert named <= {k for k, _ in written}


def test_a_heading_writes_the_real_signature():
    """The renderer's own rules: defaults as written, the / and * markers, a named default's value, a factory's."""

    def sample(a, b="x", /, c=source.LONGEST_VALUE, *, d=None, **rest) -> int:
        """Sample."""

    title, named = page.heading(page.Entry("m", "sample", sample))
    assert title == '### `sample(a, b="x", /, c=source.LONGEST_VALUE, *, d=None, **rest) -> int`'
    assert named == [("source.LONGEST_VALUE", str(source.LONGEST_VALUE))]
    title, _ = page.heading(page.Entry("m", "Record", Record))  # private fields left out
    fields = "path, kind, step, call, tensors={}, stats=None, recompute=False, generation=None, scope=None"
    assert title == f"### `class Record({fields})`"
