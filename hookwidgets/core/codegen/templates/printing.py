"""What a ``print`` hook of the generated code prints: one line per firing."""

from collections.abc import Mapping

import torch

from .stats import _stats

# --- generated code ---


def _print(where: str, tensors: Mapping[str, torch.Tensor | None]) -> None:
    """One line: where the hook fired and each tensor's shape, dtype and range (or None)."""
    parts = []
    for name, t in tensors.items():
        if t is None:
            parts.append(f"{name} is None")
            continue
        s = _stats(t)
        parts.append(
            f"{name} {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} "
            f"mean={s['mean']:.4g} std={s['std']:.4g} min={s['min']:.4g} max={s['max']:.4g}"
            + (f" nan={s['nan']}" if s["nan"] else "")
            + (f" inf={s['inf']}" if s["inf"] else "")
        )
    print(f"{where}: " + ("; ".join(parts) if parts else "no tensors"))
