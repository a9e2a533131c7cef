"""The statistics a ``stats`` hook of the generated code records: those of the explorer's stats records."""

import torch

# --- generated code ---


def _stats(t: torch.Tensor) -> dict[str, float]:
    """mean, population std, min, max and L2 norm of the finite values; zero fraction; NaN/Inf counts."""
    x = t.detach()
    x = x.abs() if x.is_complex() else x
    x = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32).flatten()
    finite = x[torch.isfinite(x)]
    n, nan = x.numel(), int(torch.isnan(x).sum())
    stats = dict.fromkeys(("mean", "std", "min", "max"), float("nan")) | {"norm": 0.0}
    if finite.numel():
        norm, y, scale = torch.linalg.vector_norm(finite), finite, 1.0
        if not torch.isfinite(norm):  # squares of finite values above ~1e19 overflow float32: rescale in float64
            scale = finite.abs().max().item()
            y = finite.to(torch.float64) / scale
            norm = torch.linalg.vector_norm(y)
        stats = {
            "mean": y.mean().item() * scale,
            "std": y.std(correction=0).item() * scale,
            "min": finite.min().item(),
            "max": finite.max().item(),
            "norm": norm.item() * scale,
        }
    zero_fraction = int((x == 0).sum()) / n if n else 0.0
    return stats | {"zero_fraction": zero_fraction, "nan": nan, "inf": n - nan - finite.numel(), "numel": n}
