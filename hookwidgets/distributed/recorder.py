"""The communication hook that times and measures each DDP bucket, and the gradient-ready hooks."""

# No ``from __future__ import annotations`` here: DDP checks comm_hook's annotations as live objects.

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from .compression import RoundTrip, relative_error
from .logs import RankLog


class Recorder:
    """The comm hook's state: counters, records and the wrapped hook; holds no model or parameter.

    DDP keeps it for the model's lifetime (a comm hook cannot be removed), so ``active = False`` is
    how an inspector stops recording: the wrapped hook still runs, nothing is measured.
    """

    def __init__(
        self,
        hook: Callable,
        hook_state: Any,
        names: dict[int, str],
        rank: int,
        round_trip: RoundTrip | None,
        max_records: int,
        log: RankLog | None,
    ) -> None:
        self.hook, self.hook_state, self.names, self.rank = hook, hook_state, names, rank
        self.round_trip, self.log = round_trip, log
        self.records: deque[dict[str, Any]] = deque(maxlen=max_records)
        self.ready: deque[dict[str, Any]] = deque(maxlen=max_records)
        self.active = True
        self.step = 0
        self._ready_count = 0
        self._ready_start = 0.0
        self._lock = threading.Lock()

    def snapshot(self, kind: str) -> list[dict[str, Any]]:
        """A copy of the ``bucket`` or ``ready`` records, safe while a backward is appending to them."""
        with self._lock:
            return list(self.records if kind == "bucket" else self.ready)

    def bucket_ready(self, bucket: dist.GradBucket) -> torch.futures.Future:
        """Measure the local bucket, call the wrapped hook, and finish the record when its future is done."""
        if not self.active:
            return self.hook(self.hook_state, bucket)
        buffer = bucket.buffer()
        with self._lock:
            step = self.step
            if bucket.is_last():
                self.step += 1
                self._ready_count = 0
        record = {
            "kind": "bucket",
            "rank": self.rank,
            "step": step,
            "bucket": bucket.index(),
            "numel": buffer.numel(),
            "bytes": buffer.numel() * buffer.element_size(),
            "params": [self.names.get(id(p), "?") for p in bucket.parameters()],
        }
        # Taken before the wrapped hook runs (it may divide or overwrite the buffer in place); read
        # back only once the communication is done, so a GPU is not synchronised in the middle of backward.
        grad_norm = torch.linalg.vector_norm(buffer.detach())
        error = relative_error(buffer, self.round_trip) if self.round_trip else None
        start = time.perf_counter()
        future = self.hook(self.hook_state, bucket)
        return future.then(_finish_record(record, grad_norm, error, start, self.records, self._lock, self.log))

    def grad_ready(self, name: str) -> None:
        """Note that ``name``'s gradient was accumulated: the order gradients become ready in (Horovod)."""
        if not self.active:
            return
        now = time.perf_counter()
        with self._lock:
            if self._ready_count == 0:
                self._ready_start = now
            order = self._ready_count
            self._ready_count += 1
        record = {
            "kind": "ready",
            "rank": self.rank,
            "step": self.step,
            "order": order,
            "param": name,
            "seconds": now - self._ready_start,
        }
        with self._lock:
            self.ready.append(record)
        if self.log is not None:
            self.log.write(record)


def _finish_record(
    record: dict[str, Any],
    grad_norm: torch.Tensor,
    error: torch.Tensor | None,
    start: float,
    records: deque,
    lock: threading.Lock,
    log: RankLog | None,
) -> Callable[[torch.futures.Future], torch.Tensor]:
    """The callback that completes ``record`` once the bucket's communication is done.

    It holds the records, never the Recorder: the backend frees it on its own thread, and a last
    reference to the process group dropped there would destroy the group on its worker thread, which
    aborts the process ("Resource deadlock avoided").
    """

    def finish(done: torch.futures.Future) -> torch.Tensor:
        value = done.value()  # re-raises a failed communication, as the unwrapped hook would
        record["seconds"] = time.perf_counter() - start
        reduced = value if isinstance(value, torch.Tensor) else value[0]
        norms = torch.stack([grad_norm, torch.linalg.vector_norm(reduced.detach()).to(grad_norm)]).tolist()
        record["grad_norm"], record["reduced_norm"] = norms
        record["compression_error"] = error.item() if error is not None else None
        with lock:  # this runs on the backend's thread while the user may be reading records
            records.append(record)
        if log is not None:
            log.write(record)
        return value

    return finish


def comm_hook(state: Recorder, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """The function DDP calls per bucket (DDP requires exactly these annotations, if any)."""
    return state.bucket_ready(bucket)
