"""Summary statistics of tensors, cheap enough to compute in a hook on every forward of every layer."""

from __future__ import annotations

import contextlib
import math
import weakref

import torch

from .dtensor import is_dtensor, local_tensor
from .native import fused_sums

STAT_KEYS = ("mean", "std", "min", "max", "norm", "zero_fraction", "nan", "inf", "numel")

_BLOCK = 4096  # elements per row when summing squares row by row
_FLAT_DOT = 1 << 18  # up to here one float32 dot stays within ~1e-6 of the exact sum of squares
_CANCELLATION = 32.0  # above this mean**2 / var, E[x**2] - mean**2 loses digits: take a second pass


def tensor_stats(t: torch.Tensor) -> dict[str, float]:
    """Statistics of ``t``: mean, population std, min, max, L2 norm, zero_fraction, nan, inf, numel.

    mean/std/min/max/norm cover the finite values only (NaN where there are none); ``nan`` and ``inf``
    count the non-finite ones; ``zero_fraction`` is the share of all elements equal to zero. std is the
    population std (``unbiased=False``). Computed in float32 (float64 for float64 input); complex
    tensors are summarised by their magnitudes. Counts are ints. On the CPU one pass of a C kernel
    (``native.py``) takes the place of the torch reductions, with the same results. A DTensor's are its local
    shard's, taken with no collective (``sharded.py`` reduces them across ranks).
    """
    numel = t.numel()
    if numel == 0:
        return _result(math.nan, math.nan, math.nan, math.nan, 0.0, 0.0, 0, 0, 0)
    nonzero: float  # an int from the kernel, a float from the torch reductions
    x = t
    fused = fused_sums(x)  # the common case: a CPU float tensor, read in place with no new tensor objects
    if fused is None and is_dtensor(t):  # its own reductions would issue collectives, from inside a hook
        return tensor_stats(local_tensor(t))
    if fused is None:
        x = t.detach()
        if x.is_complex():
            x = x.abs()
        if x.dtype is not torch.float32 and x.dtype is not torch.float64:
            x = x.to(torch.float32)
        fused = fused_sums(x)  # a converted copy is contiguous: the kernel reads it unless off the CPU
    if fused is not None:
        total, squares, mn, mx, nonzero, maybe_nonfinite = fused
        if not maybe_nonfinite:
            mean, std, norm = _moments(x, total, squares, mn, mx)
            return _result(mean, std, mn, mx, norm, (numel - nonzero) / numel, 0, 0, numel)
        return _nonfinite_stats(x.detach().reshape(-1), (numel - nonzero) / numel)
    x = x.reshape(-1)
    # min/max propagate NaN and Inf, so they double as the finiteness check: the common all-finite
    # case needs no isfinite pass, no masking copy and a single transfer to the host.
    total, squares, mn, mx, nonzero = _reduce(x)
    if math.isfinite(mn) and math.isfinite(mx):
        mean, std, norm = _moments(x, total, squares, mn, mx)
        return _result(mean, std, mn, mx, norm, (numel - nonzero) / numel, 0, 0, numel)
    zeros = _to_host((x == 0).sum())[0]  # the fast nonzero count is NaN once a NaN is in it
    return _nonfinite_stats(x, zeros / numel)


class StatsMemo:
    """``tensor_stats`` remembered per tensor object and version, so one tensor seen by several hooks
    (a container's output is its last child's) is reduced once. Holds the tensors only weakly."""

    def __init__(self) -> None:
        # No lock: single dict operations are atomic, and two threads racing on one tensor reduce it twice.
        self._memo: dict[int, tuple[weakref.ref[torch.Tensor], int, dict[str, float]]] = {}

    def stats(self, t: torch.Tensor) -> dict[str, float]:
        """``tensor_stats(t)``, computed once per tensor object until it is changed in place."""
        if t.is_inference():  # no version counter to tell an in-place change: not remembered
            return tensor_stats(t)
        key = id(t)
        hit = self._memo.get(key)
        version = t._version
        if hit is not None and hit[0]() is t and hit[1] == version:
            return hit[2]
        result = tensor_stats(t)
        with contextlib.suppress(TypeError):  # tensor subclasses without weakref support are not remembered
            self._memo[key] = (weakref.ref(t), version, result)
        return result

    def clear(self) -> None:
        """Forget everything (at each new step: the memo never grows past one step's tensors)."""
        self._memo.clear()


def stats_of(tensors: dict[str, torch.Tensor]) -> dict[str, dict[str, float]]:
    """``tensor_stats`` of each tensor, by name."""
    return {name: tensor_stats(t) for name, t in tensors.items()}


def _reduce(x: torch.Tensor) -> list[float]:
    """Sum, sum of squares, min, max and nonzero count of a non-empty 1-D tensor, as Python numbers.

    The count is exact for finite tensors (NaN when ``x`` holds one).
    """
    mn, mx = torch.aminmax(x)
    return _to_host(x.sum(), _sum_of_squares(x), mn, mx, _nonzero(x))


def _nonzero(x: torch.Tensor) -> torch.Tensor:
    """How many elements are not zero, as a 0-d tensor; NaN in, NaN out."""
    # count_nonzero branches on every element and takes ~6 ms for 1M post-ReLU floats (half zeros),
    # 25x a sum; sign(x)·sign(x) is branch-free and one pass fewer than |sign(x)| summed. Its products
    # are 0 or 1, and float32 sums of ones are exact below 2**24.
    if x.numel() < 2**24:
        signs = torch.sign(x)
        return torch.dot(signs, signs)
    return x.bool().sum()


def _sum_of_squares(x: torch.Tensor) -> torch.Tensor:
    """Sum of squares of a 1-D tensor, accurate to float32 rounding at any length, with no temporary copy."""
    # One flat float32 dot or norm over millions of elements drifts by ~1e-4; norms of rows of _BLOCK
    # elements, summed, stay within ~1e-7 at the speed of a plain sum. Below _FLAT_DOT a single dot is
    # as accurate and saves the four extra calls, which cost more than the pass on most layers' outputs.
    if x.numel() <= _FLAT_DOT:
        return torch.dot(x, x)
    rows = x.numel() // _BLOCK
    split = rows * _BLOCK
    total: torch.Tensor = torch.linalg.vector_norm(x[:split].view(rows, _BLOCK), dim=1).square().sum()
    return total + torch.dot(x[split:], x[split:]) if split < x.numel() else total


def _moments(x: torch.Tensor, total: float, squares: float, mn: float, mx: float) -> tuple[float, float, float]:
    """Mean, population std and L2 norm of finite values from their sums; rescaled when the sums overflowed.

    Large finite float32 values (1e20) overflow a float32 sum of squares: the norm and std would read
    inf beside an inf count of 0. Those rare tensors are summed again in float64, divided by their
    largest magnitude, so that even float64 values near its limit stay finite.
    """
    if math.isfinite(total) and math.isfinite(squares):
        mean, std = _mean_std(x, total, squares, mn, mx)
        return mean, std, math.sqrt(squares)
    scale = max(abs(mn), abs(mx))
    y = x.detach().reshape(-1).to(torch.float64) / scale
    std_t, mean_t = torch.std_mean(y, correction=0)
    norm_t = torch.linalg.vector_norm(y)
    mean, std, norm = _to_host(mean_t, std_t, norm_t)
    return mean * scale, std * scale, norm * scale


def _mean_std(x: torch.Tensor, total: float, squares: float, mn: float, mx: float) -> tuple[float, float]:
    """Mean and population std from the sum and sum of squares; a second pass when that would cancel."""
    # Welford (torch.std_mean) is ~30x slower than a sum on the CPU, so the variance comes from the
    # sums already taken, unless the mean dominates the spread and E[x**2] - mean**2 would lose digits.
    n = x.numel()
    if mn == mx:
        return mn, 0.0
    mean = total / n
    var = squares / n - mean * mean
    if mean * mean > _CANCELLATION * var:
        d = (x.detach() - mean).reshape(-1)  # shifted to the mean, the same formula no longer cancels
        fused = fused_sums(d)
        d_total, d_squares = fused[:2] if fused is not None else _to_host(d.sum(), _sum_of_squares(d))
        var = (d_squares - d_total * d_total / n) / n
    return mean, math.sqrt(max(var, 0.0))


def _nonfinite_stats(x: torch.Tensor, zero_fraction: float) -> dict[str, float]:
    """The slow path for a tensor holding NaN or Inf: statistics of its finite values plus the counts."""
    finite = torch.isfinite(x)
    nan, n_finite = _to_host(torch.isnan(x).sum(), finite.sum())
    inf = x.numel() - nan - n_finite
    if n_finite == 0:
        return _result(math.nan, math.nan, math.nan, math.nan, 0.0, zero_fraction, nan, inf, x.numel())
    values = x[finite]
    fused = fused_sums(values)
    total, squares, mn, mx, _ = fused[:5] if fused is not None else _reduce(values)
    mean, std, norm = _moments(values, total, squares, mn, mx)
    return _result(mean, std, mn, mx, norm, zero_fraction, nan, inf, x.numel())


def _to_host(*scalars: torch.Tensor) -> list[float]:
    """0-d tensors as Python numbers, in one device-to-host transfer off the CPU."""
    if scalars[0].device.type == "cpu":
        return [v.item() for v in scalars]  # nothing to transfer on the CPU, and stacking costs more
    # float64 so that element counts above 2**24 stay exact.
    return torch.stack([v.to(torch.float64) for v in scalars]).tolist()


def combine_stats(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """The statistics of two tensors taken as one (``tensor_stats`` of both concatenated, within rounding)."""
    fa, fb = a["numel"] - a["nan"] - a["inf"], b["numel"] - b["nan"] - b["inf"]  # finite values of each
    numel, finite = a["numel"] + b["numel"], fa + fb
    mean = std = norm = mn = mx = math.nan
    if finite:
        parts = [(f, s) for f, s in ((fa, a), (fb, b)) if f]
        mean = sum(f * s["mean"] for f, s in parts) / finite
        # each part's spread about the common mean (Chan et al.): no E[x**2] - mean**2 to cancel
        spread = sum(f * (s["std"] ** 2 + (s["mean"] - mean) ** 2) for f, s in parts) / finite
        std = math.sqrt(spread)
        norm = math.sqrt(sum(s["norm"] ** 2 for _, s in parts))
        mn, mx = min(s["min"] for _, s in parts), max(s["max"] for _, s in parts)
    zeros = a["zero_fraction"] * a["numel"] + b["zero_fraction"] * b["numel"]
    zero_fraction = zeros / numel if numel else 0.0
    return _result(mean, std, mn, mx, norm, zero_fraction, a["nan"] + b["nan"], a["inf"] + b["inf"], numel)


def _result(
    mean: float,
    std: float,
    mn: float,
    mx: float,
    norm: float,
    zero_fraction: float,
    nan: float,
    inf: float,
    numel: float,
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
