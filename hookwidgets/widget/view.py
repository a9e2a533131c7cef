"""The anywidget view: view state as traitlets mirrored 1:1 in js/ (see docs/widget-protocol.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import anywidget
import traitlets

from .patching_panel import EMPTY as EMPTY_PATCHING
from .protocol import (
    Attribution,
    Frame,
    Graph,
    HookItem,
    HookKind,
    Lens,
    Memory,
    Patching,
    Plots,
    Selection,
    Status,
    Summary,
    Theme,
    Training,
    TreeNode,
)

CLOSED = "closed: hooks removed, model as found"
"""What a closed explorer's widget and snapshot say in place of their panels."""

STATIC = Path(__file__).resolve().parent.parent / "static"


def _bundle(name: str) -> Path:
    path = STATIC / name
    if not path.exists():
        raise FileNotFoundError(
            f"the widget's frontend bundle {path} is missing: install the package with "
            "`pip install -e .` (which builds js/), or build it with `npm --prefix js ci && npm --prefix js run build`"
        )
    return path


P = TypeVar("P")
Synced = traitlets.TraitType[P, P]
"""A synced traitlet whose value is the payload ``P`` of ``protocol.py`` (what mypy reads and writes)."""


def _synced(trait: traitlets.TraitType[Any, Any]) -> Any:
    """``trait``, synced with the page; typed by the ``Synced[...]`` annotation it is assigned to."""
    return trait.tag(sync=True)


class ExplorerView(anywidget.AnyWidget):
    """What the browser shows of a HookExplorer. Holds no torch objects, only plain data and PNG bytes."""

    _esm = _bundle("widget.js")
    _css = _bundle("widget.css")

    tree: Synced[TreeNode] = _synced(traitlets.Dict())
    """Module tree: nested nodes with path, name, cls, trainable, frozen, shape, dtype, children."""
    selected = traitlets.Unicode("").tag(sync=True)
    """Path of the selected module; written by the browser on a click."""
    hook_kinds: Synced[list[HookKind]] = _synced(traitlets.List(traitlets.Dict()))
    """Every hook kind in display order (badges follow it): the kind table's rows, with each one's tooltip and badge."""
    hooks: Synced[list[HookItem]] = _synced(traitlets.List(traitlets.Dict()))
    """Live hooks: path, kind, action, edit, fired, error, note, foreign (others' hooks, left alone)."""
    selection: Synced[Selection] = _synced(traitlets.Dict({}))
    """The selected path: family (module, param, node), valid kinds, details, params, code, problem."""
    plots: Synced[Plots] = _synced(traitlets.Dict({"path": None, "items": []}))
    """Images of the selection's captures: path and items (kind, title, shape, step, steps, png bytes)."""
    status: Synced[Status] = _synced(traitlets.Dict({"state": "idle", "message": ""}))
    """Run state: idle, busy, live (the user's own loop is running) or error, a message, and top classes."""
    diagnostics = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """What the engine understood and did on its own, e.g. which hook an in-place op made it detach, and why."""
    memory: Synced[Memory] = _synced(traitlets.Dict({}))
    """The capture store: bytes held, budget, records, evicted."""
    summary: Synced[Summary] = _synced(traitlets.Dict({}))
    """Per-layer statistics: one step's rows, fields, steps, NaN/Inf layers, first non-finite, heatmap PNG."""
    training: Synced[Training] = _synced(traitlets.Dict({"visible": False, "ratios": None, "ddp": None, "step": None}))
    """Training panel: watched optimizers' update ratios (chart PNG, last-step rows) and DDP figures and ready order."""
    attribution: Synced[Attribution] = _synced(traitlets.Dict({}))
    """The last "attribution here": layer, method, target (the score), caption, overlay PNG or token scores, or the
    error text."""
    lens: Synced[Lens] = _synced(traitlets.Dict({"available": False}))
    """The logit-lens panel: whether the model has one, then the last lens's layers × positions of top tokens."""
    patching: Synced[Patching] = _synced(traitlets.Dict(dict(EMPTY_PATCHING)))
    """The patching panel: whether a sweep starts from the page (its boxes, or the reason not), then the last
    ``patch_sweep()``'s figure, its progress while it runs, or its error."""
    error = traitlets.Unicode("").tag(sync=True)
    """Last error text, with its traceback; empty when there is none."""
    graph: Synced[Graph] = _synced(
        traitlets.Dict({"autograd": None, "dataflow": None, "error": "", "recordable": False})
    )
    """Graph panel: compact autograd graph and module dataflow (or None each), why recording failed, and whether the
    panel may record the example inputs' graph on its first visit."""
    theme: Synced[Theme] = _synced(traitlets.Dict({"name": "light", "background": "", "foreground": ""}))
    """The page's theme, written by the browser: name (light or dark), background and foreground (``#rrggbb``,
    ``""`` until the page reports them); every figure the view shows is drawn in it."""
    frame: Synced[Frame] = _synced(traitlets.Dict({"width": 0, "ratio": 1.0}))
    """The figure pane the page reports: width in CSS pixels (0 until reported) and devicePixelRatio; every figure the
    view shows is drawn for it (``plots.frame``)."""
    closed = traitlets.Unicode("").tag(sync=True)
    """Empty while the explorer is open; once it is closed (``ex.close()``, or the explorer dropped unclosed), what
    the page shows in place of the panels: ``CLOSED``."""
