"""Statistics of several records taken as one tensor, vectorized: a layer's calls, or one layer across ranks.

A record's statistics become additive moments (counts, finite count, mean, sum of squared deviations, squared
norm, zeros, min, max); groups of them combine exactly (the mean-shift form, so one record gives back its own std)
and give back the fields of ``tensor_stats``: what ``combine_stats`` computes for two, for any number at once.
"""

from __future__ import annotations

import numpy as np

from .run_format import LOCAL as LOCAL_SHARD

NUMEL, NAN, INF, FINITE, MEAN, M2, NORM2, ZEROS, MIN, MAX, RECORDS, LOCAL = range(12)
WIDTH = 12
COLUMNS = ("numel", "nan", "inf", "mean", "std", "min", "max", "norm", "zero_fraction", "flags")
"""The frame columns ``of_rows`` reads."""
FIELDS = ("mean", "std", "min", "max", "norm", "zero_fraction", "numel", "nan", "inf", "nonfinite", "local")
"""The fields a run view reads: ``tensor_stats``' statistics and counts, ``nonfinite`` (NaN and Inf), and ``local``:
the share of the records whose statistics were of this rank's local shard only (a sharded tensor not reduced)."""


def of_rows(columns: dict[str, np.ndarray], groups: np.ndarray, count: int) -> np.ndarray:
    """The moments ``(count, WIDTH)`` of each group of rows (``groups``: a group number per row)."""
    numel = columns["numel"].astype(np.float64)
    nan, inf = columns["nan"].astype(np.float64), columns["inf"].astype(np.float64)
    mean = columns["mean"].astype(np.float64)
    finite = numel - nan - inf
    has = np.isfinite(mean) & (finite > 0)
    rows = np.empty((len(numel), WIDTH), order="F")  # filled column by column
    rows[:, NUMEL], rows[:, NAN], rows[:, INF] = numel, nan, inf
    np.multiply(finite, has, out=rows[:, FINITE])
    rows[:, MEAN] = np.where(has, mean, 0.0)
    std = np.where(has, columns["std"], 0.0)
    np.multiply(std * std, rows[:, FINITE], out=rows[:, M2])
    norm = columns["norm"].astype(np.float64)
    rows[:, NORM2] = np.where(np.isfinite(norm), norm * norm, 0.0)
    np.multiply(np.nan_to_num(columns["zero_fraction"].astype(np.float64)), numel, out=rows[:, ZEROS])
    rows[:, MIN] = np.where(has, columns["min"], np.nan)
    rows[:, MAX] = np.where(has, columns["max"], np.nan)
    rows[:, RECORDS] = 1.0
    rows[:, LOCAL] = (columns["flags"] & LOCAL_SHARD) > 0
    return combine(rows, groups, count)


def combine(parts: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
    """Moments ``(N, WIDTH)`` combined by group into ``(count, WIDTH)``."""
    out = np.zeros((count, WIDTH))
    if not len(parts):
        out[:, MIN] = out[:, MAX] = np.nan
        return out
    if np.bincount(groups, minlength=count).max() == 1:  # the usual case: one record a group, nothing to combine
        out[:, MIN] = out[:, MAX] = np.nan
        out[groups] = parts
        return out
    for column in (NUMEL, NAN, INF, FINITE, NORM2, ZEROS, RECORDS, LOCAL):
        out[:, column] = np.bincount(groups, parts[:, column], count)
    finite = parts[:, FINITE]
    total = out[:, FINITE]
    safe = np.where(total > 0, total, 1.0)
    out[:, MEAN] = np.bincount(groups, finite * parts[:, MEAN], count) / safe
    shift = parts[:, MEAN] - out[groups, MEAN]
    out[:, M2] = np.bincount(groups, parts[:, M2] + finite * shift * shift, count)
    low = np.full(count, np.inf)
    high = np.full(count, -np.inf)
    np.fmin.at(low, groups, parts[:, MIN])
    np.fmax.at(high, groups, parts[:, MAX])
    none = total <= 0
    out[:, MIN] = np.where(none, np.nan, low)
    out[:, MAX] = np.where(none, np.nan, high)
    return out


def stack(parts: np.ndarray, axis: int = 0) -> np.ndarray:
    """Moments ``(..., WIDTH)`` combined over ``axis`` (ranks), by plain reductions along it."""
    finite = parts[..., FINITE]
    out = parts.sum(axis=axis)
    total = out[..., FINITE]
    safe = np.where(total > 0, total, 1.0)
    mean = (finite * parts[..., MEAN]).sum(axis=axis) / safe
    shift = parts[..., MEAN] - np.expand_dims(mean, axis)
    out[..., MEAN] = mean
    out[..., M2] = (parts[..., M2] + finite * shift * shift).sum(axis=axis)
    none = total <= 0
    with np.errstate(invalid="ignore"):
        out[..., MIN] = np.where(none, np.nan, np.fmin.reduce(parts[..., MIN], axis=axis))
        out[..., MAX] = np.where(none, np.nan, np.fmax.reduce(parts[..., MAX], axis=axis))
    return out


def field(moments: np.ndarray, name: str) -> np.ndarray:
    """One field of ``FIELDS`` from moments ``(..., WIDTH)``; NaN where no record is."""
    if name not in FIELDS:
        raise ValueError(f"unknown field {name!r}: choose one of {', '.join(FIELDS)}")
    finite, numel = moments[..., FINITE], moments[..., NUMEL]
    with np.errstate(divide="ignore", invalid="ignore"):
        value = {
            "mean": lambda: np.where(finite > 0, moments[..., MEAN], np.nan),
            "std": lambda: np.where(finite > 0, np.sqrt(np.maximum(moments[..., M2], 0) / finite), np.nan),
            "min": lambda: moments[..., MIN],
            "max": lambda: moments[..., MAX],
            "norm": lambda: np.sqrt(moments[..., NORM2]),
            "zero_fraction": lambda: np.where(numel > 0, moments[..., ZEROS] / np.where(numel > 0, numel, 1), 0.0),
            "numel": lambda: numel,
            "nan": lambda: moments[..., NAN],
            "inf": lambda: moments[..., INF],
            "nonfinite": lambda: moments[..., NAN] + moments[..., INF],
            "local": lambda: moments[..., LOCAL] / np.maximum(moments[..., RECORDS], 1),
        }[name]()
    return np.where(moments[..., RECORDS] > 0, value, np.nan)
