"""A few values of a captured tensor, read as it is captured, that show a later change its version counter missed.

A write through ``.data`` (or by code that bypasses autograd) changes a captured tensor without bumping
``_version``. Four elements at fixed logical positions (the first, the last and two spread between) are kept
as they were: on the CPU their bytes, read straight from memory (no new tensor, no kernel); on another device
a gather of the four that stays there (no sync), turned into bytes only when a record is checked. Positions
are logical (flat index in the tensor's own order), so a copy with other strides (a capture moved into the
store's memory, a ``copy=True`` clone) reads the same values.
"""

from __future__ import annotations

import ctypes

import torch

Print = bytes | torch.Tensor
"""A fingerprint: the four elements' bytes, or (off the CPU) a 4-element tensor on the capture's device."""

_CELLS = {size: (ctypes.c_char * size).from_address for size in (1, 2, 4, 8, 16)}
"""Readers of one element's bytes at an address, by element size: ``.raw`` of a ctypes view, ~4x cheaper a
call than ``ctypes.string_at``."""


def take(t: torch.Tensor) -> Print | None:
    """The fingerprint of ``t`` as it is now; None where its values cannot be read (another layout, a tensor
    subclass, a tensor without storage). For a tensor just made (a capture): its memory is its own."""
    return _take(t, bounded=False)


def _take(t: torch.Tensor, bounded: bool) -> Print | None:
    """``take``; ``bounded``: first check that ``t``'s storage still spans the four elements (one kept a while
    may have been freed or shrunk since, and is then not read)."""
    if type(t) is not torch.Tensor or t.layout is not torch.strided or t.is_meta:  # a meta tensor has no values
        return None
    n = t.numel()
    if n == 0:
        return b""  # nothing to change
    third = (n - 1) // 3
    if t.is_contiguous():
        b, c, d = third, n - 1 - third, n - 1
    else:
        b, c, d = _strided_offsets(t, third, n)
    if not t.is_cpu:
        return _device_print(t, b, c, d)
    size = t.element_size()
    try:
        pointer = t.data_ptr()
        # strides are never negative, so the last element lies furthest
        if bounded and (t.storage_offset() + d + 1) * size > t.untyped_storage().nbytes():
            return None
    except RuntimeError:  # tensors without storage (functorch wrappers)
        return None
    cell = _CELLS.get(size) or (ctypes.c_char * size).from_address
    return (
        cell(pointer).raw + cell(pointer + b * size).raw + cell(pointer + c * size).raw + cell(pointer + d * size).raw
    )


def _device_print(t: torch.Tensor, b: int, c: int, d: int) -> torch.Tensor | None:
    """The four elements gathered on ``t``'s device by one kernel, queued behind whatever writes ``t``: the
    values as of the capture, with no sync."""
    if t.device.type == "meta":
        return None  # no values at all
    try:
        base = t.storage_offset()
        return torch.stack([t.as_strided((), (), base + offset) for offset in (0, b, c, d)])
    except Exception:  # tensors without storage (functorch wrappers), a backend without as_strided: unchecked
        return None


def matches(t: torch.Tensor, kept: Print) -> bool:
    """Whether ``t`` still holds the values of its fingerprint ``kept`` (compared bit for bit: NaN matches NaN)."""
    now = _take(t, bounded=True)
    if now is None:
        return False  # its memory went (a storage freed, resized or swapped for something unreadable)
    return as_bytes(now) == as_bytes(kept)


def as_bytes(kept: Print) -> bytes:
    """A fingerprint as bytes: a device fingerprint is copied to the host (a sync: only when checked)."""
    if isinstance(kept, bytes):
        return kept
    return kept.reshape(-1).view(torch.uint8).cpu().numpy().tobytes()


def _strided_offsets(t: torch.Tensor, third: int, n: int) -> tuple[int, int, int]:
    """Storage offsets, from the first element, of flat indices n/3, 2n/3 and n - 1 of a non-contiguous ``t``
    (a contiguous one's are the indices themselves)."""
    shape, stride = t.shape[::-1], t.stride()[::-1]
    offsets = []
    for index in (third, n - 1 - third, n - 1):
        offset = 0
        for size, step in zip(shape, stride, strict=True):
            index, coordinate = divmod(index, size)
            offset += coordinate * step
        offsets.append(offset)
    b, c, d = offsets
    return b, c, d
