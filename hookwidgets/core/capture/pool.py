"""Memory of the capture store's own, so that captures kept past their step stop pinning the model's heap.

A capture is a reference to the model's own output (as cheap as a hand-written hook). Kept past the step,
those tensors sit in the middle of the heap the training loop reuses every step, and malloc has to hand the
loop fresh pages around them: on Linux each is a page fault (~1–2.5 µs for 4 KiB), and a ResNet-18 loop
keeping five outputs a step faulted about twice as often as without them. Once only the store still holds a
captured tensor (its step's graph is gone), ``CapturePool.move`` copies it into blocks mapped apart from the
heap, which come back when the store evicts it, so the model's memory is freed with the rest of its step.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading
import weakref

import torch

from .._torch import use_counts

try:
    import resource
except ImportError:  # Windows
    resource = None

MIN_BYTES = 64 * 2**10
"""Smaller tensors stay references: malloc keeps them in bins of their own, away from activation-sized blocks."""
MAX_BYTES = 32 * 2**20
"""Larger tensors stay references: glibc's malloc maps anything above its largest threshold (32 MiB on 64-bit)
apart from the heap already, so a move would only copy it, and for a moment hold it twice."""
PAGE = mmap.PAGESIZE
MAX_BLOCKS = 8192
"""Mappings a pool holds at most: Linux allows a process ~65,000 (vm.max_map_count), and malloc needs its own."""
KEEP_FREE = 128 * 2**20
"""Free blocks the shared pool keeps mapped: a new explorer (a cell run again) reuses them, as malloc would
reuse the heap it kept, instead of page-faulting fresh memory; beyond this, freed blocks are unmapped."""


def minor_faults() -> int | None:
    """Minor page faults of this process so far (every thread), or None where the OS does not count them."""
    if resource is None:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to one of 8 steps per power of two (whole pages), so shapes that differ a little
    (a last short batch, a varying sequence length) share blocks, wasting at most 1/8."""
    step = max(PAGE, 1 << max(nbytes.bit_length() - 4, 0))
    return -(-nbytes // step) * step


def movable(t: torch.Tensor) -> bool:
    """Whether ``t`` is worth a move and a copy in a pool block would be the same tensor: a plain, contiguous
    CPU tensor of ``MIN_BYTES`` to ``MAX_BYTES``, not a lazy conjugate or negation."""
    if type(t) is not torch.Tensor or t.device.type != "cpu" or t.layout is not torch.strided:
        return False
    return MIN_BYTES <= t.nbytes <= MAX_BYTES and t.is_contiguous() and not t.is_conj() and not t.is_neg()


def shared(t: torch.Tensor) -> bool:
    """Whether something besides the caller's Python object holds ``t`` or its memory (a move would be seen)."""
    # The tensor's C++ object is held once (by that Python object; autograd's saved inputs share it), and its
    # storage by that object alone (views and saved outputs each hold it); the temporary storage object read
    # here is one more.
    # Where torch cannot count them, every tensor counts as held: nothing is moved.
    return use_counts(t) != (1, 2)


class CapturePool:
    """Blocks of mapped memory for moved captures, by size class; a block comes back when the last tensor
    viewing it is freed, and free blocks are kept up to ``keep_bytes``. One pool serves every store
    (``SHARED``)."""

    def __init__(self, keep_bytes: int) -> None:
        self.keep_bytes = keep_bytes
        self.free_bytes = 0
        self.blocks = 0
        """Blocks mapped now, in use or free."""
        self.mapped_bytes = 0
        """Bytes of every block mapped so far: the page faults of first writing them are the pool's own."""
        self._free: dict[int, list[mmap.mmap]] = {}
        # Blocks come back on whichever thread frees the last view, and also from inside this pool's own
        # locked code: an allocation there may set off a garbage collection that frees a tensor. Reentrant.
        self._lock = threading.RLock()

    def move(self, t: torch.Tensor) -> torch.Tensor | None:
        """A copy of the contiguous CPU tensor ``t`` in a block of this pool (same shape, dtype and values);
        None when no block can be had (``MAX_BLOCKS`` reached, or the process is out of memory or mappings)."""
        nbytes = t.nbytes
        size = size_class(nbytes)
        with self._lock:  # a free block of the size class, or room for a new one
            blocks = self._free.get(size)
            block = blocks.pop() if blocks else None
            if block is not None:
                self.free_bytes -= size
            elif self.blocks >= MAX_BLOCKS:
                return None  # the capture stays a reference
            else:
                self.blocks += 1
                self.mapped_bytes += size
        if block is None:
            try:
                block = mmap.mmap(-1, size)
            except OSError:  # out of memory or mappings: the capture stays a reference
                with self._lock:
                    self.blocks -= 1
                    self.mapped_bytes -= size
                return None
        # A ctypes view of the block is what the tensor holds on to: when it dies, so has every view of the
        # tensor, and the block can be handed out again (the mapping itself is never freed under a tensor).
        exported = (ctypes.c_char * nbytes).from_buffer(block)
        weakref.finalize(exported, self._give_back, weakref.ref(self), block, size).atexit = False
        with torch.inference_mode(False):  # a step run in inference mode would make an inference tensor
            copy = torch.frombuffer(exported, dtype=torch.uint8).view(t.dtype).view(t.shape)
            return copy.copy_(t)

    @staticmethod
    def _give_back(pool_ref: weakref.ref, block: mmap.mmap, size: int) -> None:
        pool = pool_ref()
        if pool is None or sys.is_finalizing():
            return
        with pool._lock:
            if pool.free_bytes + size <= pool.keep_bytes:
                pool._free.setdefault(size, []).append(block)
                pool.free_bytes += size
                return
            pool.blocks -= 1  # over what the store may keep: unmapped once the exported view is gone

    def clear(self) -> None:
        """Unmap every free block (blocks still in use come back to nobody and are unmapped when freed)."""
        with self._lock:
            self.blocks -= sum(len(blocks) for blocks in self._free.values())
            self._free.clear()
            self.free_bytes = 0


SHARED = CapturePool(KEEP_FREE)
"""The pool of every CaptureStore: ``SHARED.clear()`` unmaps its free blocks."""
