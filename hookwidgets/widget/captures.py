"""Turn the latest captures of a module into the PNG items the view shows."""

from __future__ import annotations

from typing import Any

from ..core.capture import CaptureStore, Record
from ..plots import feature_map_figure, figure_png, gradient_map_figure

# Kinds whose captures the inspector draws, in display order; backward kinds on a diverging scale.
PLOTTED_KINDS = ("forward_pre", "forward", "backward_pre", "backward", "grad")
GRADIENT_KINDS = ("backward_pre", "backward", "grad")


def plot_item(record: Record) -> dict[str, Any] | None:
    """One view item for a record: title, shape, step and PNG bytes; None when it holds no tensor."""
    tensor = record.tensor
    if tensor is None:
        return None
    name = next(iter(record.tensors))  # output, output.0, args.0, grad_output…: says what is drawn
    title = f"{record.target or '(model)'} · {name}"
    if record.stale:
        title += " · STALE: changed in place after capture"
    draw = gradient_map_figure if record.kind in GRADIENT_KINDS else feature_map_figure
    return {
        "kind": record.kind,
        "title": title,
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "step": record.step,
        "call": record.call,
        "png": figure_png(draw(tensor, title=title)),
    }


def plot_items(store: CaptureStore, target: str) -> list[dict[str, Any]]:
    """Items for the newest record of each plotted kind on ``target``."""
    items = []
    for kind in PLOTTED_KINDS:
        record = store.latest(target, kind)
        item = plot_item(record) if record is not None else None
        if item is not None:
            items.append(item)
    return items
