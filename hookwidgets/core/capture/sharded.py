"""Statistics of DTensors (sharded tensors): each rank's statistics of its local shard, and the one collective per
step that reduces every pending one to the full tensor's.

A hook never issues a collective (one rank's hook firing alone would hang the job): it records its local shard's
statistics, and, when every rank takes part (``Explorer(collective=True)``), queues them. ``ShardedStats.reduce()``
all-gathers the queue of the step in one collective, run by every rank at the next step's beginning or by
``Explorer.sync_stats()``, and replaces each queued record's statistics by the full tensor's.
"""

from __future__ import annotations

import math
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .stats import STAT_KEYS, combine_stats

if TYPE_CHECKING:
    from .store import Record

_WIDTH = 1 + len(STAT_KEYS)  # a key, then the statistics in STAT_KEYS order


@dataclass(frozen=True)
class Layout:
    """Where a DTensor's local shard sits: its index among the distinct shards (or partial values), how many there
    are, and the global ranks (ours included) whose shards make up the full tensor, one per shard."""

    shard: int
    shards: int
    group: tuple[int, ...]
    partial: bool
    """A Partial placement: the full tensor is the sum of the ranks' local tensors, not their concatenation."""

    @property
    def reducible(self) -> bool:
        """Whether partial statistics of the shards give the full tensor's exactly (several shards, no pending sum)."""
        return self.shards > 1 and not self.partial


def layout(t: torch.Tensor) -> Layout:
    """The ``Layout`` of a DTensor's local shard on this rank."""
    mesh = t.device_mesh  # type: ignore[attr-defined]  # a DTensor's
    placements = t.placements  # type: ignore[attr-defined]
    ranks = mesh.mesh  # global ranks, shaped as the mesh
    coordinate = mesh.get_coordinate()
    partial = any(p.is_partial() for p in placements)
    # The mesh dims whose ranks hold different values: those that shard (and those that hold partial sums). On the
    # others a rank's replicas hold the same values: ours stands for them.
    dims = [d for d, p in enumerate(placements) if p.is_shard() or (partial and p.is_partial())]
    shard = 0
    for d in dims:  # row-major index over those dims
        shard = shard * ranks.size(d) + coordinate[d]
    index = tuple(slice(None) if d in dims else coordinate[d] for d in range(ranks.dim()))
    group = tuple(int(r) for r in ranks[index].reshape(-1).tolist())
    return Layout(shard, len(group), group, partial)


def local_scope(lay: Layout, reduced_later: bool) -> str | None:
    """What a DTensor's statistics taken on its local shard cover; None when that is the full tensor (one shard)."""
    if lay.partial:
        return (
            f"local partial value {lay.shard} of {lay.shards} (a Partial DTensor: the full tensor is the sum "
            "over ranks, whose statistics no partial statistics give; redistribute it to Replicate or Shard first)"
        )
    if lay.shards == 1:
        return None
    later = ", reduced to the full tensor's at the next step" if reduced_later else ""
    return f"local shard {lay.shard} of {lay.shards}{later}"


def full_scope(ranks: int) -> str:
    """The scope of statistics reduced over ``ranks`` shards."""
    return f"full tensor (reduced over {ranks} ranks)"


class ShardedStats:
    """The statistics of DTensors queued in one step for the collective that reduces them (``reduce()``).

    ``collective()`` says whether every rank takes part (the explorer's ``collective``); without it nothing is
    queued and the statistics stay the local shard's, said in their scope.
    """

    def __init__(self) -> None:
        self.collective: Callable[[], bool] = _never
        self.collectives = 0
        """Collectives issued so far: one per ``reduce()`` that had statistics to reduce."""
        self._pending: list[tuple[Record, Layout, float]] = []
        self._lock = threading.Lock()

    def plan(self, t: torch.Tensor) -> tuple[Layout, bool]:
        """The ``Layout`` of DTensor ``t`` and whether its local statistics are to be queued for reduction."""
        lay = layout(t)
        return lay, lay.reducible and self.collective()

    def queue(self, record: Record, lay: Layout, name: str) -> None:
        """Queue ``record``'s local statistics of tensor ``name`` for the next ``reduce()``."""
        key = float(zlib.crc32(f"{record.path}|{record.kind}|{record.call}|{name}".encode()))
        with self._lock:
            self._pending.append((record, lay, key))

    def abandon(self) -> None:
        """Leave the queued statistics the local shard's, as their scope then says (the explorer closes: no step
        comes to reduce them)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for record, lay, _ in pending:
            record.scope = local_scope(lay, False)

    def reduce(self) -> int:
        """Reduce every queued statistic to its full tensor's with one all-gather over the default process group;
        returns how many were reduced. Every rank must call it at the same point (it is a collective)."""
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return 0
        if not self.collective():  # turned off since they were queued: they stay the local shard's
            with self._lock:
                self._pending = pending + self._pending
            self.abandon()
            return 0
        dist = torch.distributed
        packed = torch.tensor(
            [[key, *_values(record)] for record, _, key in pending],
            dtype=torch.float64,
            device=_collective_device(),
        )
        gathered = [torch.empty_like(packed) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, packed)
        self.collectives += 1
        by_rank = [g.cpu().tolist() for g in gathered]
        for i, (record, lay, key) in enumerate(pending):
            rows = [by_rank[r][i] for r in lay.group]
            if any(row[0] != key for row in rows):  # the ranks' queues do not line up: no sum of unlike things
                record.scope = (
                    f"local shard {lay.shard} of {lay.shards} (not reduced: the ranks' DTensor statistics of the step "
                    "did not line up; every rank must run the same hooks on the same DTensors)"
                )
                continue
            total = _stats(rows[0])
            for row in rows[1:]:
                total = combine_stats(total, _stats(row))
            if record.stats is not None and record.stats.get("magnitude"):
                total = {**total, "magnitude": True}
            record.stats = total
            record.scope = full_scope(len(rows))
        return len(pending)


def _values(record: Record) -> list[float]:
    stats = record.stats or {}
    return [float(stats.get(k, math.nan)) for k in STAT_KEYS]


def _stats(row: list[float]) -> dict[str, float]:
    values = dict(zip(STAT_KEYS, row[1:], strict=True))
    for k in ("nan", "inf", "numel"):
        values[k] = int(values[k])
    return values


def _collective_device() -> torch.device:
    """Where the default process group's collectives take their tensors: the current GPU for NCCL, else the CPU."""
    backend = str(torch.distributed.get_backend()).lower()
    if "nccl" in backend and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _never() -> bool:
    return False
