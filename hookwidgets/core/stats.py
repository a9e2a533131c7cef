"""Summary statistics of tensors, cheap enough to compute in a hook on every forward of every layer."""

from __future__ import annotations

import math

import torch

STAT_KEYS = ("mean", "std", "min", "max", "norm", "zero_fraction", "nan", "inf", "numel")

_BLOCK = 4096  # elements per row of the two-level norm; one flat float32 norm over millions drifts ~1e-4
_CANCELLATION = 32.0  # above this mean**2 / var, E[x**2] - mean**2 loses digits: recompute the variance


def tensor_stats(t: torch.Tensor) -> dict[str, float]:
    """Statistics of ``t``: mean, population std, min, max, L2 norm, zero_fraction, nan, inf, numel.

    mean/std/min/max/norm cover the finite values only (NaN where there are none); ``nan`` and ``inf``
    count the non-finite ones; ``zero_fraction`` is the share of all elements equal to zero. std is the
    population std (``unbiased=False``). Computed in float32 (float64 for float64 input); complex
    tensors are summarised by their magnitudes. Counts are ints.
    """
    x = t.detach()
    numel = x.numel()
    if numel == 0:
        return _result(math.nan, math.nan, math.nan, math.nan, 0.0, 0.0, 0, 0, 0)
    if x.is_complex():
        x = x.abs()
    x = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32).reshape(-1)
    # min/max propagate NaN and Inf, so they double as the finiteness check: the common all-finite
    # case needs no isfinite pass, no masking copy and a single transfer to the host.
    total, norm, mn, mx, nonzero = _reduce(x)
    zero_fraction = (numel - nonzero) / numel
    if math.isfinite(mn) and math.isfinite(mx):
        mean, std = _mean_std(x, total, norm)
        return _result(mean, std, mn, mx, norm, zero_fraction, 0, 0, numel)
    return _nonfinite_stats(x, zero_fraction)


def stats_of(tensors: dict[str, torch.Tensor]) -> dict[str, dict[str, float]]:
    """``tensor_stats`` of each tensor, by name."""
    return {name: tensor_stats(t) for name, t in tensors.items()}


def _reduce(x: torch.Tensor) -> list[float]:
    """Sum, L2 norm, min, max and nonzero count of a non-empty 1-D tensor, as Python numbers."""
    mn, mx = torch.aminmax(x)
    return _to_host(x.sum(), _norm(x), mn, mx, torch.count_nonzero(x))


def _norm(x: torch.Tensor) -> torch.Tensor:
    """L2 norm of a 1-D tensor, accurate to float32 rounding at any length (norms of rows, then of those)."""
    rows = x.numel() // _BLOCK
    if rows < 2:
        return torch.linalg.vector_norm(x)
    split = rows * _BLOCK
    norm = torch.linalg.vector_norm(torch.linalg.vector_norm(x[:split].view(rows, _BLOCK), dim=1))
    if split == x.numel():
        return norm
    return torch.linalg.vector_norm(torch.stack([norm, torch.linalg.vector_norm(x[split:])]))


def _mean_std(x: torch.Tensor, total: float, norm: float) -> tuple[float, float]:
    """Mean and population std from the sum and norm; two-pass when the one-pass formula would cancel."""
    # Welford (torch.std_mean) is ~30x slower than a sum on the CPU, so the variance comes from the
    # sum and norm already taken, unless the mean dominates the spread.
    n = x.numel()
    mean = total / n
    var = norm * norm / n - mean * mean
    if mean * mean > _CANCELLATION * var:
        var = _norm(x - mean).item() ** 2 / n
    return mean, math.sqrt(max(var, 0.0))


def _nonfinite_stats(x: torch.Tensor, zero_fraction: float) -> dict[str, float]:
    """The slow path for a tensor holding NaN or Inf: statistics of its finite values plus the counts."""
    finite = torch.isfinite(x)
    nan, n_finite = _to_host(torch.isnan(x).sum(), finite.sum())
    inf = x.numel() - nan - n_finite
    if n_finite == 0:
        return _result(math.nan, math.nan, math.nan, math.nan, 0.0, zero_fraction, nan, inf, x.numel())
    values = x[finite]
    total, norm, mn, mx, _ = _reduce(values)
    mean, std = _mean_std(values, total, norm)
    return _result(mean, std, mn, mx, norm, zero_fraction, nan, inf, x.numel())


def _to_host(*scalars: torch.Tensor) -> list[float]:
    """0-d tensors as Python numbers, in one device-to-host transfer off the CPU."""
    if scalars[0].device.type == "cpu":
        return [v.item() for v in scalars]  # nothing to transfer on the CPU, and stacking costs more
    # float64 so that element counts above 2**24 stay exact.
    return torch.stack([v.to(torch.float64) for v in scalars]).tolist()


def _result(
    mean: float, std: float, mn: float, mx: float, norm: float, zero_fraction: float, nan: int, inf: int, numel: int
) -> dict[str, float]:
    return {
        "mean": mean,
        "std": std,
        "min": mn,
        "max": mx,
        "norm": norm,
        "zero_fraction": zero_fraction,
        "nan": int(nan),
        "inf": int(inf),
        "numel": int(numel),
    }
