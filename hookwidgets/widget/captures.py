"""Turn the captures at one path into the PNG items the view shows, one per hook kind."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypedDict

import torch

from ..core.capture.store import CaptureStore, Record
from ..core.display import display_name
from ..core.kind_table import user_names
from ..core.model.tokens import Sequences
from .protocol import Hover, PlotItem
from .tensor_views import Context, draw, scales_of, sequence_labels, views_of

Image = tuple[bytes, Hover]
"""A figure as the page gets it: PNG bytes and what it tells under the mouse (``plots.hover.figure_image``)."""

PNG_CACHE_SIZE = 64
"""Images kept for records still held: selecting a module again, or going back to it, redraws nothing."""
_png_cache: OrderedDict[tuple, tuple[weakref.ref, Image]] = OrderedDict()
_png_lock = threading.Lock()


def _cached_png(record: Record, key: tuple, draw: Callable[[], Any]) -> Image:
    """``figure_image(draw())``, remembered for ``record`` (by identity, while it lives) and ``key``."""
    from ..plots.frame import current_frame  # matplotlib only when drawing
    from ..plots.hover import figure_image
    from ..plots.theme import current_theme

    full_key = (id(record), current_theme(), current_frame(), *key)  # drawn again in another theme or pane
    with _png_lock:
        hit = _png_cache.get(full_key)
        if hit is not None and hit[0]() is record:  # the same record, not a new one at a reused address
            _png_cache.move_to_end(full_key)
            return hit[1]
    png = figure_image(draw())
    with _png_lock:
        # Images of records the store has let go of can never be shown again: they go first (a training loop's
        # live redraws would otherwise fill the cache with them, 64 images held for nothing).
        for dead in [k for k, (ref, _) in _png_cache.items() if ref() is None]:
            del _png_cache[dead]
        _png_cache[full_key] = (weakref.ref(record), png)
        while len(_png_cache) > PNG_CACHE_SIZE:
            _png_cache.popitem(last=False)
    return png


def _title(record: Record, name: str) -> str:
    # name: output, output.0, output.logits, args.0, grad_output…: says what is drawn
    title = f"{display_name(record.path or '(model)')} · {display_name(name)}"
    if record.recompute:
        title += " · recomputed by a checkpoint"
    generation = record.generation
    if generation is not None:
        where = "prompt step" if not generation.index else f"decode step {generation.index}"
        title += f" · generation {generation.call}, {where}"
    if record.stale:
        title += " · STALE: changed after capture"
    elif not record.verified:
        title += " · unchecked: a change after capture could not be seen"
    return title


Position = tuple[int, int]
"""Where a record sits in a hook's history: (step, call), the call counting the path's calls within the step."""


Choice = dict[str, Any]
"""What the page chose for one kind's item: ``view``, ``element`` (a name of ``Record.tensors``), ``head`` and
``scale`` (the heads view's colour scale)."""


def plot_item(
    record: Record,
    positions: list[Position] | None = None,
    view: str | None = None,
    *,
    element: str | None = None,
    head: int | None = None,
    scale: str | None = None,
    context: Context | None = None,
) -> PlotItem | None:
    """One view item for a record: title, shape, step and call, the positions to choose from, and PNG bytes.

    ``element`` picks one of a tuple, dict or ModelOutput output's tensors (default: the first); ``view`` one of
    the views that fit it (default: the first); ``head`` one head of the ``heads`` view (None: all) and ``scale``
    its colour scale (one of ``tensor_views.scales_of``; None: the default).
    """
    if not record.tensors:
        return None
    name = element if element in record.tensors else next(iter(record.tensors))
    fields = tensor_fields(
        record.tensors[name],
        view,
        name=name,
        title=_title(record, name),
        gradient=record.kind in user_names(gradient=True),  # on a diverging scale
        context=context or Context(),
        head=head,
        scale=scale,
        record=record,
    )
    return {
        "kind": record.kind,
        "shape": list(record.tensors[name].shape),
        "dtype": str(record.tensors[name].dtype).removeprefix("torch."),
        "step": record.step,
        "call": record.call,
        "positions": [list(p) for p in positions] if positions is not None else [[record.step, record.call]],
        "stale": record.stale,
        "verified": record.verified,
        "edits": "",  # a hook's capture: the user's own run, edits and all
        "element": name,
        "elements": list(record.tensors),
        **fields,
    }


class TensorFields(TypedDict):
    """The drawn part of a ``PlotItem`` (``tensor_fields``)."""

    title: str
    view: str
    views: list[str]
    tokens: list[str] | None
    heads: int
    head: int | None
    scale: str | None
    scales: list[str]
    png: bytes
    hover: Hover


def tensor_fields(
    tensor: torch.Tensor,
    view: str | None,
    *,
    name: str,
    title: str,
    gradient: bool,
    context: Context,
    head: int | None = None,
    scale: str | None = None,
    record: Record | None = None,
) -> TensorFields:
    """The drawn part of an item: ``title``, ``view`` (the chosen one if it fits, else the default), ``views``,
    ``tokens`` (the sequence axis' labels), ``heads`` and ``head`` (the heads view), ``scale`` (the chosen one if
    the view offers it, else its default; None when it offers none) and ``scales``, ``png`` and ``hover``
    (remembered for ``record`` while it lives)."""
    from ..plots.hover import figure_image  # matplotlib only when drawing

    views = views_of(tensor, context)
    view = view if view in views else views[0]
    heads = int(tensor.shape[1]) if view == "heads" else 0
    head = head if view == "heads" and isinstance(head, int) and 0 <= head < heads else None
    scales = scales_of(view)
    chosen = (scale if scale in scales else scales[0]) if scales else None
    shown = title if head is None else f"{title} · head {head}"

    drawn_scale = chosen if scales and chosen != scales[0] else None  # the default: the figure's own (None)

    def figure() -> Any:
        return draw(
            tensor, view, name=name, title=shown, gradient=gradient, context=context, head=head, scale=drawn_scale
        )

    # The explorer's sequences last as long as it does: their identity stands for the labels drawn.
    key = (view, shown, name, chosen, context.attention, context.decoder, id(context.sequences))
    png, hover = figure_image(figure()) if record is None else _cached_png(record, key, figure)
    return {
        "title": shown,
        "view": view,
        "views": views,
        "tokens": sequence_labels(tensor, view, context)[0],
        "heads": heads,
        "head": head,
        "scale": chosen,
        "scales": scales,
        "png": png,
        "hover": hover,
    }


def heads_item(
    tensor: torch.Tensor,
    path: str,
    tokens: list[str] | None = None,
    *,
    head: int | None = None,
    step: int = 0,
    key_tokens: list[str] | None = None,
    scale: str | None = None,
    edits: str = "",
) -> PlotItem:
    """The ``heads`` item of attention probabilities ``(N, H, T_q, T_k)`` computed for the module at ``path``
    (not captured by a hook): labelled with ``tokens`` (queries) and ``key_tokens`` (keys; default ``tokens``), on
    the colour ``scale`` (one of ``tensor_views.ATTENTION_SCALES``; None: the default); ``edits``: whether the run
    had the user's edits (``ex.attention()``'s ``.edits``)."""
    if tensor.dim() != 4:
        raise ValueError(f"attention probabilities are (N, heads, T_q, T_k), got shape {tuple(tensor.shape)}")
    labels = [tokens] if tokens is not None else None
    keys = [key_tokens] if key_tokens is not None else None
    lengths = tuple(dict.fromkeys(tensor.shape[-2:]))
    context = Context(Sequences(labels, keys, lengths), attention=True)  # keys of cross-attention: the second list
    title = f"{display_name(path or '(model)')} · attention probabilities"
    fields = tensor_fields(
        tensor, "heads", name="attention", title=title, gradient=False, context=context, head=head, scale=scale
    )
    return {
        "kind": "attention",
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "step": step,
        "call": 0,
        "positions": [],
        "stale": False,
        "verified": True,
        "element": "attention",
        "elements": ["attention"],
        **fields,
        "edits": edits,
    }


def stats_item(kind: str, path: str, records: list[Record]) -> PlotItem:
    """The item of a ``stats`` hook: its statistics over every step it has recorded, as lines."""
    from ..plots import stats_figure  # matplotlib only when drawing

    title = f"{display_name(path or '(model)')} · {kind} statistics"
    last = records[-1]
    # the last record stands for the history: a new step brings a new last record, hence a new image
    png, hover = _cached_png(last, ("stats", title, len(records)), lambda: stats_figure(records, title=title))
    return {
        "kind": kind,
        "title": title,
        "shape": None,
        "dtype": None,
        "step": last.step,
        "call": last.call,
        "positions": [],
        "stale": False,
        "verified": True,
        "element": "stats",
        "elements": [],
        "view": "stats",
        "views": ["stats"],
        "tokens": None,
        "heads": 0,
        "head": None,
        "scale": None,
        "scales": [],
        "png": png,
        "hover": hover,
        "edits": "",
    }


def _pick(history: list[Record], chosen: tuple[int, int | None] | None) -> Record:
    """The record at ``chosen`` = (step, call), the newest of the step when call is None; the newest overall
    when nothing is chosen or the choice is no longer held. A checkpoint's recompute (same step and call, the
    same values, fired later) stands for its call only when the original is no longer held."""
    matching = history
    if chosen is not None:
        step, call = chosen
        matching = [r for r in history if r.step == step and (call is None or r.call == call)] or history
    return next((r for r in reversed(matching) if not r.recompute), matching[-1])


def plot_items(
    store: CaptureStore,
    path: str,
    chosen: dict[str, tuple[int, int | None]] | None = None,
    views: dict[str, Choice] | None = None,
    *,
    context: Context | None = None,
) -> list[PlotItem]:
    """Items for each plotted kind on ``path``: the chosen (step, call), element, view, head and scale, else the
    newest capture's first tensor in its default view (``context``: see ``tensor_views.context_for``)."""
    try:
        by_kind = store[path]
    except KeyError:
        return []
    chosen, views = chosen or {}, views or {}
    items = []
    for kind in user_names(plotted=True):  # in display order
        history = by_kind.get(kind, [])
        tensors = [r for r in history if r.tensor is not None]
        if tensors:
            record = _pick(tensors, chosen.get(kind))
            positions = sorted({(r.step, r.call) for r in tensors})  # every call of every step kept
            choice = views.get(kind, {})
            item = plot_item(
                record,
                positions,
                choice.get("view"),
                element=choice.get("element"),
                head=choice.get("head"),
                scale=choice.get("scale"),
                context=context,
            )
            if item is not None:
                items.append(item)
            continue
        stats = [r for r in history if r.stats]
        if stats:
            items.append(stats_item(kind, path, stats))
    return items
