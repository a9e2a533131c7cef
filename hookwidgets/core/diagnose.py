"""Answers to the usual debugging questions: where did the NaN start, which layer's gradient vanishes."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .actions import named_tensors
from .capture import CaptureStore
from .inputs import Inputs, call_model
from .modelstate import preserved_state

SUMMARY_FIELDS = ("norm", "mean", "std", "zero_fraction", "nan", "inf")
SUMMARY_KINDS = {
    "forward": "act",
    "global_forward": "act",
    "backward": "grad",
    "global_backward": "grad",
    "grad": "grad",
    "global_grad": "grad",
}
"""Kinds whose ``stats`` records fill the summary: activation or gradient columns."""


def first_nonfinite(model: nn.Module, inputs: Inputs) -> str | None:
    """Path of the first module, in the order forwards finish, whose output held NaN or Inf; else None.

    One forward without grad and without anomaly mode; the model is left as found.
    """
    found: list[str] = []

    def check(path: str):
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if found:
                return
            for tensor in named_tensors("output", output).values():
                floating = tensor.is_floating_point() or tensor.is_complex()
                if floating and not bool(torch.isfinite(tensor).all()):
                    found.append(path)
                    return

        return hook

    handles = [m.register_forward_hook(check(p), always_call=True) for p, m in model.named_modules()]
    try:
        with preserved_state(model), torch.no_grad():
            call_model(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    return found[0] if found else None


def summary_rows(store: CaptureStore) -> list[dict[str, Any]]:
    """One row per (step, module) from ``stats`` records: activation and gradient statistics.

    Forward kinds fill ``act_*`` columns, backward kinds ``grad_*`` (from grad_output), so
    ``ex.attach("", ["global_forward", "global_grad"], action="stats")`` gives the full table.
    ``act_order`` and ``grad_order`` say when, within its step, the module's forward finished and its
    gradient arrived (0 first): where a NaN appeared first.
    """
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    arrivals: dict[tuple[int, str], int] = {}
    records, _ = store.snapshot()  # arrival order: the order the hooks fired
    for record in records:
        prefix = SUMMARY_KINDS.get(record.kind)
        if prefix is None or record.stats is None:
            continue
        row = rows.setdefault((record.step, record.target), {"step": record.step, "target": record.target})
        for field in SUMMARY_FIELDS:
            row[f"{prefix}_{field}"] = record.stats[field]
        if f"{prefix}_order" not in row:
            seen = arrivals.get((record.step, prefix), 0)
            row[f"{prefix}_order"] = seen
            arrivals[(record.step, prefix)] = seen + 1
    return [rows[key] for key in sorted(rows)]


def first_nonfinite_row(rows: list[dict[str, Any]]) -> str | None:
    """The module of ``rows`` (one step) where NaN/Inf appeared first: the earliest forward to output one,
    else the first module whose gradient held one; None when every value is finite."""
    for prefix in ("act", "grad"):
        bad = [r for r in rows if r.get(f"{prefix}_nan", 0) or r.get(f"{prefix}_inf", 0)]
        if bad:
            return min(bad, key=lambda r: r.get(f"{prefix}_order", 0))["target"]
    return None
