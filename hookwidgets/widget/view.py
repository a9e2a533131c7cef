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
    hook_kinds = traitlets.List(traitlets.Dict()).tag(sync=True)
    """Every hook kind in display order (badges follow it): the kind table's rows, with each one's tooltip and badge."""
    hooks = traitlets.List(traitlets.Dict()).tag(sync=True)
    """Live hooks: path, kind, action, edit, fired, error, note, foreign (others' hooks, left alone)."""
    selection = traitlets.Dict({}).tag(sync=True)
    """The selected path: family (module, param, node), valid kinds, details, params, code, problem."""
    plots = traitlets.Dict({"path": None, "items": []}).tag(sync=True)
    """Images of the selection's captures: path and items (kind, title, shape, step, steps, png bytes)."""
    status = traitlets.Dict({"state": "idle", "message": ""}).tag(sync=True)
    """Run state: idle, busy, live (the user's own loop is running) or error, a message, and top classes."""
    diagnostics = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """What the engine understood and did on its own, e.g. which hook an in-place op made it detach, and why."""
    memory = traitlets.Dict({}).tag(sync=True)
    """The capture store: bytes held, budget, records, evicted."""
    summary = traitlets.Dict({}).tag(sync=True)
    """Per-layer statistics: one step's rows, fields, steps, NaN/Inf layers, first non-finite, heatmap PNG."""
    training = traitlets.Dict({"visible": False, "ratios": None, "ddp": None}).tag(sync=True)
    """Training panel: watched optimizers' update ratios (chart PNG, last-step rows) and DDP figures and ready order."""
    attribution = traitlets.Dict({}).tag(sync=True)
    """The last "attribution here": layer, method, target (the score), caption, overlay PNG or token scores, or the
    error text."""
    lens = traitlets.Dict({"available": False}).tag(sync=True)
    """The logit-lens panel: whether the model has one, then the last lens's layers × positions of top tokens."""
    patching = traitlets.Dict({"png": None, "caption": "", "progress": None, "error": ""}).tag(sync=True)
    """The patching panel: the last ``patch_sweep()``'s figure, its progress while it runs, or its error."""
    error = traitlets.Unicode("").tag(sync=True)
    """Last error text, with its traceback; empty when there is none."""
    graph = traitlets.Dict({"autograd": None, "dataflow": None, "error": ""}).tag(sync=True)
    """Graph panel: compact autograd graph and module dataflow (or None each), and why recording failed."""
    theme = traitlets.Dict({"name": "light", "background": "", "foreground": ""}).tag(sync=True)
    """The page's theme, written by the browser: name (light or dark), background and foreground (``#rrggbb``,
    ``""`` until the page reports them); every figure the view shows is drawn in it."""
