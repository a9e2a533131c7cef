"""Turn the captures of one target into the PNG items the view shows, one per hook kind."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..core.capture.store import CaptureStore, Record
from ..core.display import display_name
from ..plots import feature_map_figure, figure_png, gradient_map_figure, histogram_figure, stats_figure
from .protocol import PlotItem

# Kinds whose captures the inspector draws, in display order; gradient kinds on a diverging scale.
PLOTTED_KINDS = (
    "forward_pre",
    "forward",
    "backward_pre",
    "backward",
    "grad",
    "legacy_backward",
    "global_forward_pre",
    "global_forward",
    "global_backward_pre",
    "global_backward",
    "global_grad",
    "post_accumulate",
    "node_pre",
    "node",
)
GRADIENT_KINDS = frozenset(PLOTTED_KINDS) - {"forward_pre", "forward", "global_forward_pre", "global_forward"}
TENSOR_VIEWS = ("maps", "histogram")
"""How a captured tensor can be drawn: its maps (feature or gradient) or the histogram of its values."""


PNG_CACHE_SIZE = 64
"""Images kept for records still held: selecting a module again, or going back to it, redraws nothing."""
_png_cache: OrderedDict[tuple, tuple[weakref.ref, bytes]] = OrderedDict()
_png_lock = threading.Lock()


def _cached_png(record: Record, key: tuple, draw: Callable[[], Any]) -> bytes:
    """``figure_png(draw())``, remembered for ``record`` (by identity, while it lives) and ``key``."""
    full_key = (id(record), *key)
    with _png_lock:
        hit = _png_cache.get(full_key)
        if hit is not None and hit[0]() is record:  # the same record, not a new one at a reused address
            _png_cache.move_to_end(full_key)
            return hit[1]
    png = figure_png(draw())
    with _png_lock:
        _png_cache[full_key] = (weakref.ref(record), png)
        while len(_png_cache) > PNG_CACHE_SIZE:
            _png_cache.popitem(last=False)
    return png


def _title(record: Record) -> str:
    name = next(iter(record.tensors), "stats")  # output, output.0, args.0, grad_output…: says what is drawn
    title = f"{display_name(record.target or '(model)')} · {display_name(name)}"
    if record.recompute:
        title += " · recomputed by a checkpoint"
    if record.stale:
        title += " · STALE: changed after capture"
    elif not record.verified:
        title += " · unchecked: a change after capture could not be seen"
    return title


Position = tuple[int, int]
"""Where a record sits in a hook's history: (step, call), the call counting the target's calls within the step."""


def plot_item(record: Record, positions: list[Position] | None = None, view: str = "maps") -> PlotItem | None:
    """One view item for a record: title, shape, step and call, the positions to choose from, and PNG bytes."""
    tensor = record.tensor
    if tensor is None:
        return None
    title = _title(record)
    if view == "histogram":
        png = _cached_png(
            record, (view, title), lambda: histogram_figure({next(iter(record.tensors)): tensor}, title=title)
        )
    else:
        view = "maps"
        draw = gradient_map_figure if record.kind in GRADIENT_KINDS else feature_map_figure
        png = _cached_png(record, (view, title), lambda: draw(tensor, title=title))
    return {
        "kind": record.kind,
        "title": title,
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "step": record.step,
        "call": record.call,
        "positions": [list(p) for p in positions] if positions is not None else [[record.step, record.call]],
        "stale": record.stale,
        "verified": record.verified,
        "view": view,
        "views": list(TENSOR_VIEWS),
        "png": png,
    }


def stats_item(kind: str, target: str, records: list[Record]) -> PlotItem:
    """The item of a ``stats`` hook: its statistics over every step it has recorded, as lines."""
    title = f"{display_name(target or '(model)')} · {kind} statistics"
    last = records[-1]
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
        "view": "stats",
        "views": ["stats"],
        # the last record stands for the history: a new step brings a new last record, hence a new image
        "png": _cached_png(last, ("stats", title, len(records)), lambda: stats_figure(records, title=title)),
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
    target: str,
    chosen: dict[str, tuple[int, int | None]] | None = None,
    views: dict[str, str] | None = None,
) -> list[PlotItem]:
    """Items for each plotted kind on ``target``: the chosen (step, call) and view, else the newest maps."""
    try:
        by_kind = store[target]
    except KeyError:
        return []
    chosen, views = chosen or {}, views or {}
    items = []
    for kind in PLOTTED_KINDS:
        history = by_kind.get(kind, [])
        tensors = [r for r in history if r.tensor is not None]
        if tensors:
            record = _pick(tensors, chosen.get(kind))
            positions = sorted({(r.step, r.call) for r in tensors})  # every call of every step kept
            item = plot_item(record, positions, views.get(kind, "maps"))
            if item is not None:
                items.append(item)
            continue
        stats = [r for r in history if r.stats]
        if stats:
            items.append(stats_item(kind, target, stats))
    return items
