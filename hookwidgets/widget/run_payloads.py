"""The run view's payloads: pure functions of a ``RunView``'s public state (no widget, no drawing).

The page draws the grids itself, at the screen's pixel ratio, and reads a cell's value under the mouse from the
values sent with them: float32 values and a flag per cell (``FLAG_*``), row-major, little-endian.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .protocol import FirstNonfinite, Grid, RunState, TreeNode

if TYPE_CHECKING:
    from ..distributed import RunView

HEATMAP_STEPS = 200
"""The layers × steps heatmap shows at most this many of the newest steps."""
ALL_RANKS_FRAMES = 4000
"""The heatmap takes every rank's records as one by default while that reads at most this many frames (ranks ×
steps shown, ~0.4 ms each); past it, it shows one rank (the first NaN/Inf's, else the first), and "all" is a choice."""
ALL = "all"
"""The heatmap's rank choice that takes every rank's records as one."""
FIELDS = ["norm", "mean", "std", "min", "max", "zero_fraction", "nonfinite"]
"""The statistics the view offers (``RunView.layer_steps`` reads them); ``norm`` first, the default."""
FLAG_MISSING, FLAG_VALUE, FLAG_NONFINITE = 0, 1, 2
"""A cell's flag: no record; a value; a tensor that held NaN/Inf."""


def run_state(
    run: RunView, kind: str | None = None, field: str | None = None, step: int | None = None, rank: str | None = None
) -> RunState:
    """The ``run`` traitlet: what the log holds, the kind, field, step and heatmap rank shown (defaults filled in: the
    first NaN/Inf's kind and step, else the first kind logged and the newest step; every rank as one while that is
    cheap), the first NaN/Inf."""
    first = first_nonfinite(run)
    ranks = list(run.ranks)
    if rank != ALL and not (rank is not None and rank.isdigit() and int(rank) in ranks):
        cheap = len(ranks) * min(len(run.steps), HEATMAP_STEPS) <= ALL_RANKS_FRAMES
        rank = ALL if cheap or not ranks else str(first["rank"] if first is not None else ranks[0])
    kinds = list(dict.fromkeys(layer["kind"] for layer in run.layers))
    if kind not in kinds:
        kind = first["kind"] if first is not None and first["kind"] in kinds else (kinds[0] if kinds else "")
    steps = run.steps
    if step not in steps:
        step = first["step"] if first is not None and first["step"] in steps else (steps[-1] if steps else None)
    return {
        "source": str(run.log_dir),
        "ranks": ranks,
        "rank": rank,
        "steps": steps,
        "kinds": kinds,
        "kind": kind,
        "fields": FIELDS,
        "field": field if field in FIELDS else FIELDS[0],
        "step": step,
        "first_nonfinite": first,
        "notes": run.all_notes(),
        "live": True,
        "stopped": "",
        "message": "" if steps else "No step logged yet: the view shows each step as the ranks write it.",
    }


def first_nonfinite(run: RunView) -> FirstNonfinite | None:
    """The earliest NaN/Inf across all ranks, as the view states it."""
    found = run.first_nonfinite()
    if found is None:
        return None
    return {
        "step": int(found["step"]),
        "rank": int(found["rank"]),
        "path": str(found["path"]),
        "kind": str(found["kind"]),
        "phase": str(found["phase"]),
    }


def run_tree(run: RunView) -> TreeNode:
    """The log's module tree; without its structure file, one built from the logged paths (what the log knows)."""
    if run.tree is not None:
        tree: Any = run.tree
        return tree  # checked by the reader: plain data, each node with a path, a class and children
    root: TreeNode = _node("", "(model)")
    nodes = {"": root}
    for path in sorted({layer["path"] for layer in run.layers}):
        parts = path.split(".") if path else []
        for depth in range(1, len(parts) + 1):
            here = ".".join(parts[:depth])
            if here not in nodes:
                nodes[here] = _node(here, "")
                nodes[".".join(parts[: depth - 1])]["children"].append(nodes[here])
    return root


def grid_of_steps(run: RunView, kind: str, field: str, rank: str = ALL, first: FirstNonfinite | None = None) -> Grid:
    """Layers (of ``kind``) × the newest ``HEATMAP_STEPS`` steps of ``field``, of one ``rank`` or of every rank's
    records taken as one (``ALL``); ``first`` (the first NaN/Inf) is marked when it is in it."""
    steps = run.steps[-HEATMAP_STEPS:]
    rows = [k for k, layer in enumerate(run.layers) if layer["kind"] == kind]
    paths = [run.layers[k]["path"] for k in rows]
    which = None if rank == ALL else int(rank)
    values, flags = _cells(
        lambda name: run.layer_steps(name, rank=which, steps=steps)[rows] if steps else np.zeros((0, 0)), field
    )
    mark = None
    shown = first is not None and (which is None or first["rank"] == which) and first["kind"] == kind
    if first is not None and shown and first["path"] in paths and first["step"] in steps:
        mark = [paths.index(first["path"]), steps.index(first["step"])]
    older = f", the newest {len(steps)} of {len(run.steps)} steps" if len(steps) < len(run.steps) else ""
    over = "over all ranks" if which is None else f"on rank {which}"
    return {
        "title": f"{field} of {kind} per layer and step, {over}{older}",
        "row_name": "layer",
        "column_name": "step",
        "rows": paths,
        "columns": [str(step) for step in steps],
        "values": _float32(values),
        "flags": flags.tobytes(),
        "mark": mark,
    }


def grid_of_ranks(run: RunView, kind: str, field: str, step: int | None, first: FirstNonfinite | None = None) -> Grid:
    """Ranks × layers (of ``kind``) of ``field`` at ``step`` (empty before the first step)."""
    rows = [k for k, layer in enumerate(run.layers) if layer["kind"] == kind]
    paths = [run.layers[k]["path"] for k in rows]
    ranks = list(run.ranks)
    if step is None:
        values, flags = np.zeros((0, 0)), np.zeros((0, 0), np.uint8)
        ranks, paths = [], []
    else:
        values, flags = _cells(lambda name: run.rank_layers(step, name)[:, rows], field)
    mark = None
    if first is not None and first["kind"] == kind and first["step"] == step and first["path"] in paths:
        mark = [ranks.index(first["rank"]), paths.index(first["path"])] if first["rank"] in ranks else None
    return {
        "title": f"{field} of {kind} per rank and layer at step {step}" if step is not None else "",
        "row_name": "rank",
        "column_name": "layer",
        "rows": [str(rank) for rank in ranks],
        "columns": paths,
        "values": _float32(values),
        "flags": flags.tobytes(),
        "mark": mark,
    }


def _cells(matrix: Any, field: str) -> tuple[np.ndarray, np.ndarray]:
    """``field``'s values and each cell's flag, from ``matrix(name)`` (a statistic's matrix; NaN: no record)."""
    values = np.asarray(matrix(field), dtype=np.float64)
    recorded = ~np.isnan(np.asarray(matrix("numel"), dtype=np.float64))
    held = np.nan_to_num(np.asarray(matrix("nonfinite"), dtype=np.float64)) > 0
    flags = np.where(recorded, np.where(held, FLAG_NONFINITE, FLAG_VALUE), FLAG_MISSING).astype(np.uint8)
    return values, flags


def _node(path: str, cls: str) -> TreeNode:
    name = path.rpartition(".")[2] if path else cls
    return {
        "path": path,
        "name": name,
        "cls": cls,
        "trainable": 0,
        "frozen": 0,
        "packed": 0,
        "shape": None,
        "dtype": None,
        "children": [],
    }


def _float32(values: np.ndarray) -> bytes:
    with np.errstate(over="ignore"):  # beyond float32's range is sent as inf, which the page shows as such
        return np.ascontiguousarray(values, dtype="<f4").tobytes()
