"""Answers to the usual debugging questions: where did the NaN start, which layer's gradient vanishes."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from ..._warnings import UnwatchedModulesWarning
from ..capture.recomputes import once_each
from ..capture.stats import combine_stats
from ..capture.store import CaptureStore, Record
from ..display import quoted
from ..kind_table import summary_columns
from ..model.inputs import Inputs, call_model
from ..model.meta import no_values
from ..model.nested import named_tensors
from ..model.preserved_state import preserved_state
from ..model.tree import forward_hooks

SUMMARY_FIELDS = ("norm", "mean", "std", "zero_fraction", "nan", "inf")
NO_VALUE_WHEN_EMPTY = ("mean", "std")
"""Statistics a tensor of 0 elements does not have (its norm is 0, its counts 0)."""


def _nonfinite(tensor: torch.Tensor) -> bool:
    """Whether a floating or complex tensor holds NaN or Inf; a nested tensor is checked through its components."""
    if not (tensor.is_floating_point() or tensor.is_complex()):
        return False
    if tensor.is_meta:
        raise ValueError(no_values("first_nonfinite()", "a module's output"))
    parts = tensor.unbind() if tensor.is_nested else (tensor,)  # isfinite has no nested-tensor kernel
    return any(not bool(torch.isfinite(part).all()) for part in parts)


def _holds_nonfinite(value: Any) -> bool:
    return any(_nonfinite(tensor) for tensor in named_tensors("output", value).values())


def _warn_unwatched(unwatched: list[str], path: str) -> None:
    names = ", ".join(quoted(outer) for outer in unwatched)
    warnings.warn(
        f"first_nonfinite could not watch the ScriptModule(s) {names} (they take no hooks) and {quoted(path)} received "
        f"NaN/Inf already, so it may have started inside one of them; pass the unscripted module to check them",
        UnwatchedModulesWarning,
        stacklevel=3,
    )


def first_nonfinite(model: nn.Module, inputs: Inputs, *, train: bool = False) -> str | None:
    """Path of the first module, in the order forwards finish, whose output held NaN or Inf; else None.

    One forward without grad and without anomaly mode, in eval mode unless ``train``; the model is left as
    found. ScriptModules take no hooks and are not watched: a warning names them when the module found had
    received NaN/Inf already.
    """
    found: list[tuple[str, bool]] = []  # (path, whether its inputs held NaN/Inf already)

    def check(path: str) -> Callable[[nn.Module, Any, Any, Any], None]:
        def hook(module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            if not found and _holds_nonfinite(output):
                found.append((path, _holds_nonfinite((args, kwargs))))

        return hook

    options = {"always_call": True, "with_kwargs": True}
    with (
        forward_hooks(model, check, **options) as unwatched,
        preserved_state(model, mode="train" if train else "eval"),
        torch.no_grad(),
    ):
        output = call_model(model, inputs)
    if not found and "" in unwatched and _holds_nonfinite(output):  # a scripted root: only its output is seen
        found.append(("", True))
    if not found:
        return None
    path, inherited = found[0]
    if inherited and unwatched:
        _warn_unwatched(unwatched, path)
    return path


def summary_rows(store: CaptureStore) -> list[dict[str, Any]]:
    """One row per (step, module) from ``stats`` records: ``step``, the module's ``path``, then activation and gradient
    statistics.

    Forward kinds fill ``act_*`` columns, backward kinds ``grad_*`` (from grad_output), so
    ``ex.attach("", ["global_forward", "global_grad"], action="stats")`` gives the full table.
    ``act_order`` and ``grad_order`` say when, within its step, the module's forward finished and its
    gradient arrived (0 first): where a NaN appeared first. A module called several times in a step
    gets statistics over all its calls, as if their tensors were one (``act_calls``/``grad_calls`` say
    how many): a NaN in any call shows, not only in the last. A forward a checkpoint recomputes counts once.
    Statistics of a DTensor add ``act_scope``/``grad_scope``: what they cover (``Record.scope``).
    """
    return rows_of(store.snapshot()[0])


def rows_of(records: Iterable[Record]) -> list[dict[str, Any]]:
    """``summary_rows`` of ``records``, given in arrival order (every record of the store, or one step's)."""
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    arrivals: dict[tuple[int, str], int] = {}
    # (step, path, kind) -> calls so far and their statistics combined. By kind, not by column: two kinds
    # filling one column (forward and global_forward stats on one module) see the same tensors, once each.
    seen: dict[tuple[int, str, str], tuple[int, dict[str, float]]] = {}
    columns = summary_columns()  # the kinds whose stats records fill the summary, and their columns
    for record in once_each(records):  # arrival order: the order the hooks fired
        prefix = columns.get(record.kind)
        if prefix is None or record.stats is None:
            continue
        path = record.path
        row = rows.setdefault((record.step, path), {"step": record.step, "path": path})
        key = (record.step, path, record.kind)
        calls, stats = seen.get(key, (0, None))
        stats = record.stats if stats is None else combine_stats(stats, record.stats)
        seen[key] = (calls + 1, stats)
        for field in SUMMARY_FIELDS:
            if field in NO_VALUE_WHEN_EMPTY and not stats["numel"]:
                row.pop(f"{prefix}_{field}", None)  # a tensor of 0 elements has no mean: no value, not a NaN
                continue
            row[f"{prefix}_{field}"] = stats[field]
        row[f"{prefix}_calls"] = calls + 1
        if record.scope is not None:  # a DTensor's: the local shard's, or the full tensor's once reduced
            row[f"{prefix}_scope"] = record.scope
        if f"{prefix}_order" not in row:
            order = arrivals.get((record.step, prefix), 0)
            row[f"{prefix}_order"] = order
            arrivals[(record.step, prefix)] = order + 1
    return [rows[key] for key in sorted(rows)]


def first_nonfinite_row(rows: list[dict[str, Any]]) -> str | None:
    """The module of ``rows`` (one step) where NaN/Inf appeared first: the earliest forward to output one,
    else the first module whose gradient held one; None when every value is finite."""
    for prefix in ("act", "grad"):
        bad = [r for r in rows if r.get(f"{prefix}_nan", 0) or r.get(f"{prefix}_inf", 0)]
        if bad:
            first: str = min(bad, key=lambda r: r.get(f"{prefix}_order", 0))["path"]
            return first
    return None
