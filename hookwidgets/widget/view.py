"""The anywidget view: view state as traitlets mirrored 1:1 in js/ (see docs/widget-protocol.md)."""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

STATIC = Path(__file__).resolve().parent.parent / "static"


def _bundle(name: str) -> Path:
    path = STATIC / name
    if not path.exists():
        raise FileNotFoundError(
            f"the widget's frontend bundle {path} is missing: install the package with "
            "`pip install -e .` (which builds js/), or build it with `npm --prefix js ci && npm --prefix js run build`"
        )
    return path


class ExplorerView(anywidget.AnyWidget):
    """What the browser shows of a HookExplorer. Holds no torch objects, only plain data and PNG bytes."""

    _esm = _bundle("widget.js")
    _css = _bundle("widget.css")

    tree = traitlets.Dict().tag(sync=True)
    """Module tree: nested nodes with path, name, cls, trainable, frozen, shape, dtype, children."""
    selected = traitlets.Unicode("").tag(sync=True)
    """Path of the selected module; written by the browser on a click."""
    hook_kinds = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """Hook kinds the inspector offers, in display order."""
    hooks = traitlets.List(traitlets.Dict()).tag(sync=True)
    """Live hooks: target, kind, action, fired, error, note."""
    plots = traitlets.Dict({"target": None, "items": []}).tag(sync=True)
    """Images of the selection's latest captures: target and items (kind, title, shape, step, png bytes)."""
    status = traitlets.Dict({"state": "idle", "message": ""}).tag(sync=True)
    """Run state: idle, busy or error, with a one-line message."""
    error = traitlets.Unicode("").tag(sync=True)
    """Last error text, with its traceback; empty when there is none."""
