"""Models that run through ``torch.compile``: recognised, so the explorer's hooks and runs stay out of the compiler."""

from __future__ import annotations

from torch import nn


def is_compiled(model: nn.Module) -> bool:
    """Whether ``model`` is, or holds, a ``torch.compile`` wrapper (OptimizedModule) or a module compiled in
    place (``module.compile()``)."""
    return any(
        type(m).__name__ == "OptimizedModule" or getattr(m, "_compiled_call_impl", None) is not None
        for m in model.modules()
    )
