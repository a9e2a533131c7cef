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
    """
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for target in store:
        for kind, records in store[target].items():
            prefix = "act" if kind in ("forward", "global_forward") else "grad"
            if kind not in ("forward", "global_forward", "backward", "global_backward", "grad", "global_grad"):
                continue
            for record in records:
                if record.stats is None:
                    continue
                row = rows.setdefault((record.step, target), {"step": record.step, "target": target})
                for field in SUMMARY_FIELDS:
                    row[f"{prefix}_{field}"] = record.stats[field]
    return [rows[key] for key in sorted(rows)]
