"""js/src/payloads.js, the page's JSDoc types of the payloads, is what ``make payloads`` writes from
``hookwidgets/widget/protocol.py``: each typedef has its TypedDict's fields and no other, so the page's types cannot
drift from the shapes the kernel sends (tsc, ``npm --prefix js run typecheck``, then checks each use against them).
No ``from __future__ import annotations``: Python 3.11 would take the ``NotRequired`` field below for a required one."""

import difflib
import re
from typing import Any, NotRequired, TypedDict, get_type_hints, is_typeddict

import pytest

from hookwidgets.widget import protocol
from tools import js_payloads

TEXT = js_payloads.OUTPUT.read_text(encoding="utf-8")
TYPEDEF = re.compile(r"/\*\*\n((?: \*.*\n)*?) \*/", re.MULTILINE)


def _typedefs(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """Each ``@typedef`` of a JSDoc text: ``{name: (type, {"field" or "[optional]": its type})}``."""
    found = {}
    for block in TYPEDEF.findall(text):
        block = block.replace("\n *   ", " ")  # a type continued on the next line
        head = re.search(r"@typedef \{(.*)\} (\w+)$", block, re.MULTILINE)
        if head:
            fields = re.findall(r"@property \{(.*)\} (\[?\w+\]?)$", block, re.MULTILINE)
            found[head.group(2)] = (head.group(1), {name: kind for kind, name in fields})
    return found


def _fields(shape: Any) -> list[str]:
    """A TypedDict's fields as JSDoc names them: ``[name]`` for one a message may leave out."""
    return [f"[{name}]" if name in shape.__optional_keys__ else name for name in get_type_hints(shape)]


def test_the_file_is_what_make_payloads_writes():
    expected = js_payloads.render()
    if expected != TEXT:
        diff = difflib.unified_diff(TEXT.splitlines(), expected.splitlines(), "js/src/payloads.js", "protocol.py")
        pytest.fail("js/src/payloads.js differs from protocol.py: run `make payloads`\n" + "\n".join(list(diff)[:60]))


def test_each_typedef_has_its_typed_dicts_fields_and_no_other():
    typedefs = _typedefs(TEXT)
    shapes = {name: obj for name, obj in vars(protocol).items() if is_typeddict(obj)}
    assert set(shapes) <= set(typedefs), "a typedef per TypedDict of protocol.py"
    for name, shape in shapes.items():
        assert list(typedefs[name][1]) == _fields(shape), f"{name}: the typedef's fields, in order, are the TypedDict's"
    assert list(typedefs["Traitlets"][1]) == list(protocol.TRAITLETS), "Traitlets: a field per synced traitlet"
    sent = typedefs["PageMessage"][0].split(" | ")
    assert sent == [shape.__name__ for shape in protocol.MESSAGES.values()], "PageMessage: each message the page sends"


def test_a_traitlet_the_page_renders_before_python_fills_it_reads_as_partial():
    """The view's defaults (`{}` for the tree, the status's state and message only) come before any payload."""
    traitlets = _typedefs(TEXT)["Traitlets"][1]
    assert traitlets["tree"] == "Partial<TreeNode>"
    assert traitlets["status"] == "Partial<Status>"
    assert traitlets["plots"] == "Plots"  # its default has every field
    assert traitlets["hooks"] == "HookItem[]"


def test_the_check_sees_a_field_the_typedef_lacks():
    """A field added to a TypedDict and not to payloads.js fails the checks above."""

    class Shape(TypedDict):
        path: str
        heads: int | None
        png: NotRequired[bytes]

    written = js_payloads.typedef(Shape)
    assert _typedefs(written)["Shape"] == ("object", {"path": "string", "heads": "number | null", "[png]": "DataView"})
    stale = written.replace(" * @property {number | null} heads\n", "")
    assert list(_typedefs(stale)["Shape"][1]) != _fields(Shape)


def test_an_annotation_without_a_typescript_type_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"set\[int\].*tools/js_payloads.py"):
        js_payloads.ts_type(set[int])
