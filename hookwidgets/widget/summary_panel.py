"""The summary view's data: per-layer statistics of one step as a table, every step as a heatmap."""

from __future__ import annotations

import math
from typing import Any

from ..core.capture.export import plain_number
from ..core.diagnostics.nonfinite import SUMMARY_FIELDS, first_nonfinite_row
from ..core.explorer import Explorer
from .protocol import Summary
from .summary_filter import LayerFilter, block_paths, module_classes

FIELDS = [f"{side}_{field}" for side in ("act", "grad") for field in SUMMARY_FIELDS]
COLUMNS = ["path", *FIELDS]
"""The table's columns on the wire: each row is a list in this order (``null`` where a layer has no such
statistic), not a dict repeating every name: 3,000 layers are ~0.25 MB instead of ~1.2 MB a push."""
SIGNIFICANT_DIGITS = 7
"""Digits a statistic keeps on the wire: what float32 tensors hold; the page shows 4."""
HEATMAP_STEPS = 200
"""The heatmap shows at most this many of the newest steps (a long training run stays readable)."""


def summary_payload(
    explorer: Explorer,
    field: str = "grad_norm",
    step: int | None = None,
    first_nonfinite: str | None = None,
    layers: LayerFilter | None = None,
) -> Summary:
    """The ``summary`` traitlet: layers of one step (default the newest) in execution order, a heatmap, NaN/Inf;
    ``layers`` picks the layers both show (the NaN/Inf banner names the first over all of them)."""
    from ..plots import summary_heatmap_figure  # matplotlib only when drawing
    from ..plots.hover import figure_image

    chosen = layers if layers is not None else LayerFilter()
    rows = explorer.summary()
    blocks = block_paths(explorer.model)
    classes = module_classes(explorer.model)
    if not rows:
        return {
            "columns": COLUMNS,
            "rows": [],
            "fields": FIELDS,
            "field": field,
            "steps": [],
            "step": None,
            "nonfinite": [],
            "first_nonfinite": first_nonfinite,
            "heatmap": None,
            "heatmap_hover": None,
            "message": "No statistics yet: turn on stats for every layer, then Run or run your own loop.",
            "filter": chosen.as_payload(),
            "total": 0,
            "blocks": blocks,
            "classes": [],
        }
    steps = sorted({row["step"] for row in rows})
    shown = step if step in steps else steps[-1]
    order = {path: k for k, path in enumerate(_module_order(explorer))}
    every = sorted((r for r in rows if r["step"] == shown), key=lambda r: order.get(r["path"], len(order)))
    first = first_nonfinite if first_nonfinite is not None else first_nonfinite_row(every)
    kept = set(chosen.keep((r["path"] for r in every), classes, blocks))
    table = [r for r in every if r["path"] in kept]
    nonfinite = [r["path"] for r in table if _nonfinite(r)]
    recent = set(steps[-HEATMAP_STEPS:])
    heat_rows = [r for r in rows if r["step"] in recent]
    every_layer = sorted({r["path"] for r in heat_rows}, key=lambda p: order.get(p, len(order)))
    shown_layers = chosen.keep(every_layer, classes, blocks)
    drawn = set(shown_layers)
    heat_rows = [r for r in heat_rows if r["path"] in drawn]
    present = {k for r in heat_rows for k in r}
    heat_field = field if field in present or not present else next((f for f in FIELDS if f in present), field)
    heatmap, hover = None, None
    if heat_rows:  # a filter that keeps no layer draws no heatmap; the page says why
        cut = "" if len(shown_layers) == len(every_layer) else f" ({len(shown_layers)} of {len(every_layer)} layers)"
        title = f"{heat_field} per layer and step{cut}"
        heatmap, hover = figure_image(summary_heatmap_figure(heat_rows, heat_field, layers=shown_layers, title=title))
    return {
        "columns": COLUMNS,
        "rows": [[_cell(row.get(column)) for column in COLUMNS] for row in table],
        "fields": FIELDS,
        "field": heat_field,
        "steps": steps,
        "step": shown,
        "nonfinite": nonfinite,
        "first_nonfinite": first,
        "heatmap": heatmap,
        "heatmap_hover": hover,
        "message": "",
        "filter": chosen.as_payload(),
        "total": len(every),
        "blocks": blocks,
        "classes": [c for c in dict.fromkeys(classes.get(r["path"], "") for r in every) if c],
    }


def _module_order(explorer: Explorer) -> list[str]:
    return [path for path, _ in explorer.model.named_modules()]


def _nonfinite(row: dict[str, Any]) -> bool:
    return any(row.get(f"{side}_{kind}", 0) for side in ("act", "grad") for kind in ("nan", "inf"))


def _cell(value: Any) -> Any:
    """A JSON-safe cell: floats to ``SIGNIFICANT_DIGITS``, NaN and Inf as strings the table shows as they are."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return plain_number(value)
