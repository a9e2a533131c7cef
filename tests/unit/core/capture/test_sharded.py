"""DTensor statistics across ranks, in one process: which ranks' shards make the full tensor on a mesh of several
dimensions (replicas counted once), and the one all_gather that combines them, with torch.distributed's collective
stood in for by the ranks' rows."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
from torch.distributed.tensor import Partial, Replicate, Shard

from hookwidgets.core.capture.sharded import ShardedStats, full_scope, layout, local_scope
from hookwidgets.core.capture.stats import tensor_stats
from hookwidgets.core.capture.store import Record


class _Mesh:
    """What layout() reads of a DeviceMesh: its global ranks, shaped as the mesh, and this rank's coordinate."""

    def __init__(self, ranks: list, coordinate: list[int]) -> None:
        self.mesh = torch.tensor(ranks)
        self._coordinate = coordinate

    def get_coordinate(self) -> list[int]:
        return self._coordinate


class _Placed:
    """What layout() reads of a DTensor."""

    def __init__(self, mesh: _Mesh, placements: tuple) -> None:
        self.device_mesh = mesh
        self.placements = placements


MESH = [[0, 1], [2, 3]]  # dim 0: replicas (data parallel), dim 1: shards (tensor parallel)


def test_a_replicated_mesh_dimension_counts_its_shards_once():
    lay = layout(_Placed(_Mesh(MESH, [1, 0]), (Replicate(), Shard(0))))
    assert (lay.shard, lay.shards, lay.group, lay.partial) == (0, 2, (2, 3), False)
    assert local_scope(lay, False) == "local shard 0 of 2"
    lay = layout(_Placed(_Mesh(MESH, [1, 1]), (Shard(0), Shard(1))))
    assert (lay.shard, lay.shards, lay.group) == (3, 4, (0, 1, 2, 3))
    lay = layout(_Placed(_Mesh(MESH, [0, 1]), (Replicate(), Replicate())))
    assert (lay.shards, lay.group) == (1, (1,))
    assert local_scope(lay, False) is None  # the local tensor is the full one


def test_a_partial_placement_is_never_reduced_and_says_why():
    lay = layout(_Placed(_Mesh(MESH, [0, 1]), (Replicate(), Partial())))
    assert not lay.reducible
    assert local_scope(lay, True).startswith("local partial value 1 of 2 (a Partial DTensor")


def test_reduce_combines_each_shard_once_in_one_all_gather(monkeypatch):
    # four ranks: rank r holds the shard r % 2 of a (Replicate, Shard(0)) tensor; the replicas hold the same values
    shards = [torch.tensor([1.0, -2.0, 0.0]), torch.tensor([4.0, 5.0])]
    others = [torch.tensor([3.0, 0.0, 0.0, 7.0]), torch.tensor([-1.0])]
    me = 2  # this process plays rank 2: coordinate (1, 0)
    calls = []

    def rows(rank: int) -> list[list[float]]:
        found = []
        for tensors in (shards, others):
            stats = tensor_stats(tensors[rank % 2])
            found.append([0.0, *(float(stats[k]) for k in ("mean", "std", "min", "max", "norm", "zero_fraction"))])
            found[-1] += [float(stats["nan"]), float(stats["inf"]), float(stats["numel"])]
        return found

    def all_gather(outputs: list[torch.Tensor], packed: torch.Tensor) -> None:
        calls.append(packed.shape)
        for rank, out in enumerate(outputs):
            row = torch.tensor(rows(rank), dtype=torch.float64)
            row[:, 0] = packed[:, 0]  # every rank's keys agree
            out.copy_(row)

    monkeypatch.setattr(dist, "all_gather", all_gather)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 4)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "gloo")
    sharded = ShardedStats()
    sharded.collective = lambda: True
    lay = layout(_Placed(_Mesh(MESH, [1, 0]), (Replicate(), Shard(0))))
    records = []
    for path, tensors in (("a", shards), ("b", others)):
        record = Record(path, "forward", 1, 0, {}, stats=tensor_stats(tensors[me % 2]), scope=local_scope(lay, True))
        sharded.queue(record, lay, "output")
        records.append(record)
    assert sharded.reduce() == 2
    assert len(calls) == 1 and sharded.collectives == 1  # one collective for both
    for record, tensors in zip(records, (shards, others), strict=True):
        whole = tensor_stats(torch.cat(tensors))  # each shard once, not once per replica
        assert record.scope == full_scope(2) == "full tensor (reduced over 2 ranks)"
        for key, value in whole.items():
            assert math.isclose(record.stats[key], value, rel_tol=1e-9, abs_tol=1e-12), key
    assert sharded.reduce() == 0 and len(calls) == 1  # nothing queued: no collective


def test_reduce_leaves_statistics_local_when_the_ranks_queues_differ(monkeypatch):
    def all_gather(outputs: list[torch.Tensor], packed: torch.Tensor) -> None:
        for rank, out in enumerate(outputs):
            out.copy_(packed)
            if rank == 1:
                out[0, 0] += 1  # another hook's statistics in this place

    monkeypatch.setattr(dist, "all_gather", all_gather)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "gloo")
    sharded = ShardedStats()
    sharded.collective = lambda: True
    lay = layout(_Placed(_Mesh([0, 1], [0]), (Shard(0),)))
    local = tensor_stats(torch.tensor([1.0, 2.0]))
    record = Record("a", "forward", 1, 0, {}, stats=local)
    sharded.queue(record, lay, "output")
    sharded.reduce()
    assert record.stats == local
    assert record.scope.startswith("local shard 0 of 2 (not reduced: the ranks' DTensor statistics of the step did not")


def test_reduce_without_collective_issues_none(monkeypatch):
    monkeypatch.setattr(dist, "all_gather", lambda *a: pytest.fail("no collective without collective=True"))
    sharded = ShardedStats()
    lay = layout(_Placed(_Mesh([0, 1], [1]), (Shard(0),)))
    record = Record("a", "forward", 1, 0, {}, stats=tensor_stats(torch.ones(2)))
    sharded.queue(record, lay, "output")
    assert sharded.reduce() == 0
    assert record.scope == "local shard 1 of 2"


def test_abandoned_statistics_say_they_stay_local():
    sharded = ShardedStats()
    sharded.collective = lambda: True
    lay = layout(_Placed(_Mesh([0, 1], [0]), (Shard(0),)))
    record = Record("a", "forward", 1, 0, {}, stats=tensor_stats(torch.ones(2)), scope=local_scope(lay, True))
    sharded.queue(record, lay, "output")
    assert record.scope == "local shard 0 of 2, reduced to the full tensor's at the next step"
    sharded.abandon()  # the explorer closed before the next step
    assert record.scope == "local shard 0 of 2"
    assert sharded.reduce() == 0
