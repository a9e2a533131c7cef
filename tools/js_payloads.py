"""``python -m tools.js_payloads`` (``make payloads``): write js/src/payloads.js, the page's JSDoc typedefs of every
shape in ``hookwidgets/widget/protocol.py``, so the one home of a payload's fields is the Python TypedDict.

tests/repo/test_js_payloads.py fails while the file differs from what this writes; ``npm --prefix js run typecheck``
(tsc) then checks each use of a payload in js/src against these types.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from hookwidgets.widget import protocol
from hookwidgets.widget.run_widget import RunWidget
from hookwidgets.widget.view import ExplorerView

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "js" / "src" / "payloads.js"

HEAD = """\
// Written by `make payloads` (python -m tools.js_payloads) from hookwidgets/widget/protocol.py: do not edit.
/**
 * The shapes the kernel and the page exchange, as JSDoc typedefs for tsc (`npm --prefix js run typecheck`); what
 * each field means is in docs/widget-protocol.md. A `bytes` field arrives as a DataView; `Any` reads as `unknown`.
 * Import a shape in a JSDoc type: `import("./payloads.js").Status`.
 */
"""


def ts_type(annotation: Any) -> str:
    """The TypeScript type of a protocol annotation: ``list[int | None]`` -> ``(number | null)[]``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "unknown"
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(ts_type(a) for a in args)
    if origin is list:
        item = ts_type(args[0])
        return f"({item})[]" if "|" in item else f"{item}[]"
    if origin is dict:
        return f"Record<{ts_type(args[0])}, {ts_type(args[1])}>"
    if is_typeddict(annotation):
        return annotation.__name__
    simple = {str: "string", int: "number", float: "number", bool: "boolean", bytes: "DataView"}
    if annotation in simple:
        return simple[annotation]
    raise TypeError(f"no TypeScript type for the protocol annotation {annotation!r}: add it to tools/js_payloads.py")


def typedef(shape: Any) -> str:
    """One TypedDict as a JSDoc ``@typedef`` with a ``@property`` per field (``[name]`` when it may be left out)."""
    lines = ["/**", f" * @typedef {{object}} {shape.__name__}"]
    for name, hint in get_type_hints(shape).items():
        field = f"[{name}]" if name in shape.__optional_keys__ else name
        lines.append(f" * @property {{{ts_type(hint)}}} {field}")
    return "\n".join([*lines, " */"])


def _initial(traitlet: str, shape: Any, view: Any = ExplorerView) -> str:
    """The traitlet's type on the page: ``Partial<Shape>`` where the view's default leaves out some of its fields,
    since the page renders that default before Python's first payload."""
    text = ts_type(shape)
    if not is_typeddict(shape):
        return text
    default = view.class_traits()[traitlet].default()
    return text if set(get_type_hints(shape)) <= set(default) else f"Partial<{text}>"


def _union(names: list[str], width: int = 100) -> str:
    """``A | B | …``, continued on JSDoc lines (`` *   | C``) past ``width`` characters."""
    lines = [names[0]]
    for name in names[1:]:
        if len(lines[-1]) + len(name) + 3 > width:
            lines.append(f" *   | {name}")
        else:
            lines[-1] += f" | {name}"
    return "\n".join(lines)


def render() -> str:
    """The text of js/src/payloads.js."""
    shapes = [obj for obj in vars(protocol).values() if is_typeddict(obj) and obj.__module__.startswith("hookwidgets.")]
    traitlets = [f" * @property {{{_initial(name, shape)}}} {name}" for name, shape in protocol.TRAITLETS.items()]
    run = [
        f" * @property {{{_initial(name, shape, RunWidget)}}} {name}" for name, shape in protocol.RUN_TRAITLETS.items()
    ]
    sent = _union([shape.__name__ for shape in protocol.MESSAGES.values()])
    blocks = [
        HEAD.rstrip("\n"),
        *(typedef(shape) for shape in shapes),
        "/**\n * Each synced traitlet's value as the page reads it (`model.get`): protocol.TRAITLETS.\n"
        " * @typedef {object} Traitlets\n" + "\n".join(traitlets) + "\n */",
        "/**\n * Each synced traitlet of the run view as the page reads it: protocol.RUN_TRAITLETS.\n"
        " * @typedef {object} RunTraitlets\n" + "\n".join(run) + "\n */",
        f"/**\n * A message the page sends (protocol.MESSAGES), by its `type`.\n"
        f" * @typedef {{{sent}}} PageMessage\n */",
        "export {};",  # a module, so that `import("./payloads.js").Status` finds its typedefs
    ]
    return "\n\n".join(blocks) + "\n"


if __name__ == "__main__":
    OUTPUT.write_text(render(), encoding="utf-8")
