"""Plain-data views of DDP records: one row per bucket, per-rank totals per step (no matplotlib)."""

from __future__ import annotations

import math
import statistics
from typing import Any

MAX_NAMES = 3


def bucket_rows(records: list[dict[str, Any]], step: int | None = None) -> list[dict[str, Any]]:
    """One row per bucket at ``step`` (default: the newest step): size, params, norms, seconds over ranks.

    DDP rebuilds its buckets after the first step, so a table mixes no steps.
    """
    buckets = [r for r in records if r.get("kind", "bucket") == "bucket"]
    if not buckets:
        return []
    step = max(r["step"] for r in buckets) if step is None else step
    by_index: dict[int, list[dict[str, Any]]] = {}
    for r in buckets:
        if r["step"] == step:
            by_index.setdefault(r["bucket"], []).append(r)
    rows = []
    for index, group in sorted(by_index.items()):
        first = group[0]
        errors = [r["compression_error"] for r in group if r.get("compression_error") is not None]
        rows.append(
            {
                "step": step,
                "bucket": index,
                "numel": first["numel"],
                "bytes": first["bytes"],
                "params": len(first["params"]),
                "names": _names(first["params"]),
                "ranks": len(group),
                "grad_norm_mean": statistics.fmean(r["grad_norm"] for r in group),
                "reduced_norm": first.get("reduced_norm"),
                "seconds_median": statistics.median(r["seconds"] for r in group),
                "seconds_max": max(r["seconds"] for r in group),
                "compression_error_max": max(errors) if errors else None,
            }
        )
    return rows


def rank_steps(records: list[dict[str, Any]]) -> dict[int, dict[str, list[float]]]:
    """Per rank, per step (ascending): communication seconds summed over buckets, and the local grad norm."""
    totals: dict[int, dict[int, list[float]]] = {}
    for r in records:
        if r.get("kind", "bucket") != "bucket":
            continue
        seconds, squares = totals.setdefault(r["rank"], {}).setdefault(r["step"], [0.0, 0.0])
        totals[r["rank"]][r["step"]] = [seconds + r["seconds"], squares + r["grad_norm"] ** 2]
    return {
        rank: {
            "steps": sorted(steps),
            "seconds": [steps[s][0] for s in sorted(steps)],
            "grad_norm": [math.sqrt(steps[s][1]) for s in sorted(steps)],
        }
        for rank, steps in sorted(totals.items())
    }


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown if len(names) <= MAX_NAMES else f"{shown}, … +{len(names) - MAX_NAMES}"
