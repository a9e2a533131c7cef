"""The run view's payloads: pure functions of a ``RunView``'s public state (no widget, no drawing).

The page draws the grids itself, at the screen's pixel ratio, and reads a cell's value under the mouse from the
values sent with them: float32 values and a flag per cell (``FLAG_*``), row-major, little-endian.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .protocol import FirstNonfinite, Grid, RunState

if TYPE_CHECKING:
    from ..distributed import RunView

MAX_COLUMNS = 240
"""The layers × steps heatmap has at most this many columns: more steps are binned, each column a run of steps."""
FLAG_MISSING, FLAG_VALUE, FLAG_NONFINITE = 0, 1, 2
"""A cell's flag: no record; a value; a tensor that held NaN/Inf (or a non-finite statistic)."""
DEFAULT_FIELDS = ("act_norm", "grad_norm")
"""The heatmap's field when the page chose none: the first of these the log holds."""
Mark = tuple[str, int, int]
"""The first non-finite as ``(path, step, rank)``: the cell the grids outline."""


def run_state(run: RunView, field: str | None = None, step: int | None = None) -> RunState:
    """The ``run`` traitlet: what the log holds, the field and step shown (defaults filled in), the first NaN/Inf."""
    fields = list(run.fields)
    steps = list(run.steps)
    first = _first_nonfinite(run)
    chosen = field if field in fields else next((f for f in DEFAULT_FIELDS if f in fields), fields[0] if fields else "")
    if step not in steps:
        step = first["step"] if first is not None and first["step"] in steps else (steps[-1] if steps else None)
    message = "" if steps else "No step recorded yet: the view shows each step as the ranks write it."
    return {
        "source": str(run.log_dir),
        "ranks": [int(r) for r in run.ranks],
        "steps": [int(s) for s in steps],
        "fields": fields,
        "field": chosen,
        "step": step,
        "first_nonfinite": first,
        "notes": [str(note) for note in getattr(run, "notes", [])],
        "live": True,
        "message": message,
    }


def grid_of_steps(run: RunView, field: str, *, mark: Mark | None = None) -> Grid:
    """Layers × steps of ``field`` reduced over ranks; more than ``MAX_COLUMNS`` steps are binned (each column the
    value of largest magnitude of its steps, flagged if any of them held NaN/Inf)."""
    layers, steps, values, flags = _steps_matrix(run, field)
    bins = _bins(len(steps), MAX_COLUMNS)
    values, flags = _binned(values, flags, bins)
    columns = [str(steps[a]) if b - a == 1 else f"{steps[a]}–{steps[b - 1]}" for a, b in bins]
    where = None
    if mark is not None and mark[0] in layers and mark[1] in steps:
        at = steps.index(mark[1])
        where = [layers.index(mark[0]), next(k for k, (a, b) in enumerate(bins) if a <= at < b)]
    binned = f", each column the largest |value| of up to {bins[0][1] - bins[0][0]} steps" if len(bins) < len(steps) else ""
    return {
        "title": f"{field} per layer and step (over ranks){binned}",
        "row_name": "layer",
        "column_name": "step",
        "rows": layers,
        "columns": columns,
        "column_steps": [int(steps[b - 1]) for _, b in bins],
        "values": _float32(values),
        "flags": flags.astype(np.uint8).tobytes(),
        "mark": where,
    }


def grid_of_ranks(run: RunView, field: str, step: int | None, *, mark: Mark | None = None) -> Grid:
    """Ranks × layers of ``field`` at ``step`` (empty before the first step)."""
    ranks, layers, values, flags = _ranks_matrix(run, field, step)
    where = None
    if mark is not None and step == mark[1] and mark[2] in ranks and mark[0] in layers:
        where = [ranks.index(mark[2]), layers.index(mark[0])]
    return {
        "title": f"{field} per rank and layer at step {step}" if step is not None else "",
        "row_name": "rank",
        "column_name": "layer",
        "rows": [str(r) for r in ranks],
        "columns": layers,
        "column_steps": [],
        "values": _float32(values),
        "flags": flags.astype(np.uint8).tobytes(),
        "mark": where,
    }


def _first_nonfinite(run: RunView) -> FirstNonfinite | None:
    found: Any = run.first_nonfinite()
    if found is None:
        return None
    get = found.get if isinstance(found, dict) else lambda name: getattr(found, name)
    return {"step": int(get("step")), "rank": int(get("rank")), "path": str(get("path")), "phase": str(get("phase"))}


def _steps_matrix(run: RunView, field: str) -> tuple[list[str], list[int], np.ndarray, np.ndarray]:
    """``(layers, steps, values, flags)`` of the layers × steps matrix of ``field`` over ranks."""
    raise NotImplementedError  # wired to the RunView's matrix once its API lands


def _ranks_matrix(run: RunView, field: str, step: int | None) -> tuple[list[int], list[str], np.ndarray, np.ndarray]:
    """``(ranks, layers, values, flags)`` of the ranks × layers matrix of ``field`` at ``step``."""
    raise NotImplementedError


def _bins(count: int, most: int) -> list[tuple[int, int]]:
    """``count`` items in at most ``most`` runs of equal length (the last may be shorter): ``[(start, end)]``."""
    if count == 0:
        return []
    size = math.ceil(count / most)
    return [(a, min(a + size, count)) for a in range(0, count, size)]


def _binned(values: np.ndarray, flags: np.ndarray, bins: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Columns merged per bin: the value of largest magnitude among those recorded, the highest flag."""
    if all(b - a == 1 for a, b in bins):
        return values, flags
    out = np.full((values.shape[0], len(bins)), np.nan, dtype=np.float64)
    out_flags = np.zeros((values.shape[0], len(bins)), dtype=np.uint8)
    for k, (a, b) in enumerate(bins):
        block, seen = values[:, a:b], flags[:, a:b]
        magnitude = np.where(seen > 0, np.nan_to_num(np.abs(block), nan=np.inf), -1.0)
        pick = magnitude.argmax(axis=1)
        out[:, k] = block[np.arange(block.shape[0]), pick]
        out_flags[:, k] = seen.max(axis=1)
    return out, out_flags


def _float32(values: np.ndarray) -> bytes:
    with np.errstate(over="ignore"):  # a float64 beyond float32's range is sent as inf, which it is to the eye
        return np.ascontiguousarray(values, dtype="<f4").tobytes()
