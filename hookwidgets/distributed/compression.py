"""Local round trips of torch's compression hooks, so the compression error costs no communication."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

RoundTrip = Callable[[torch.Tensor], torch.Tensor]
# Elementwise round trips run in slices of this many elements: small temporaries stay in cache and in
# the allocator's pool, where gradient-sized ones cost fresh pages (about 3x slower on a CPU).
CHUNK = 1 << 18


class CastRoundTrip:
    """decompress(compress(g)) of a cast hook: to ``dtype`` and back; elementwise, so it may run in slices."""

    elementwise = True

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        return grad.to(self.dtype).to(grad.dtype)

    def __repr__(self) -> str:
        return f"CastRoundTrip({self.dtype})"


def round_trip_for(hook: Callable) -> RoundTrip | None:
    """decompress(compress(·)) of torch's fp16/bf16 compression hooks and wrappers; None for other hooks."""
    if hook is default_hooks.fp16_compress_hook:
        return CastRoundTrip(torch.float16)
    if hook is default_hooks.bf16_compress_hook:
        return CastRoundTrip(torch.bfloat16)
    # fp16_compress_wrapper(h) returns a closure; its qualified name is the only trace of the wrapper
    qualname = getattr(hook, "__qualname__", "")
    if qualname.startswith("fp16_compress_wrapper."):
        return CastRoundTrip(torch.float16)
    if qualname.startswith("bf16_compress_wrapper."):
        return CastRoundTrip(torch.bfloat16)
    return None


def relative_error(grad: torch.Tensor, round_trip: RoundTrip) -> torch.Tensor:
    """‖round_trip(g) − g‖ / ‖g‖ of the local gradient as a 0-d tensor (0 for an all-zero gradient).

    A tensor, not a float: reading it back would synchronise a GPU inside backward.
    """
    with torch.no_grad():
        flat = grad.reshape(-1)
        elementwise = getattr(round_trip, "elementwise", False)
        step = CHUNK if elementwise else max(flat.numel(), 1)
        squares = torch.zeros((), dtype=torch.float32, device=grad.device)
        for start in range(0, flat.numel(), step):
            part = flat[start : start + step]
            difference = round_trip(part)
            if difference.untyped_storage().data_ptr() == part.untyped_storage().data_ptr():
                difference = difference.clone()  # a round trip that returns its input must not be overwritten
            squares += torch.linalg.vector_norm(difference.sub_(part).float()).square()
        norm = torch.linalg.vector_norm(flat.float())
        return torch.where(norm > 0, squares.sqrt() / norm, torch.zeros_like(norm))
