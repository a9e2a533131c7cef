"""Statistics of DTensors on 2 gloo ranks: FSDP2-sharded gradients and tensor-parallel activations are the full
tensor's, reduced in one collective per step, when every rank takes part (collective=True); else the local shard's,
said in their scope; a hook never issues a collective."""

from __future__ import annotations

import math

import pytest
from torch import nn

from hookwidgets.core import Explorer
from tests.unit.distributed import _dtensor_workers as workers
from tests.unit.distributed._ddp_ranks import run_ranks

INTS = ("nan", "inf", "numel")


def _close(got: dict, want: dict) -> bool:
    """The same statistics, counts exactly, values to float32 rounding."""
    if set(got) != set(want):
        return False
    for key, value in want.items():
        if key in INTS:
            if got[key] != value:
                return False
        elif not math.isclose(got[key], value, rel_tol=1e-5, abs_tol=1e-7):
            return False
    return True


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each rank's results of every scenario (``_dtensor_workers.all_runs``), by rank."""
    return run_ranks(workers.all_runs, tmp_path_factory.mktemp("sharded"), timeout=150)


@pytest.fixture
def fsdp_runs(runs):
    return [run["fsdp"] for run in runs]


def test_fsdp_gradient_stats_are_the_full_gradients_reduced_once_per_step(fsdp_runs):
    for rank, run in enumerate(fsdp_runs):
        got = run[True]
        for name in workers.PARAMS:
            records = got["records"][name]
            assert [step for step, _, _ in records] == list(range(1, workers.STEPS + 1))
            for (_, stats, scope), full in zip(records, got["full"][name], strict=True):
                assert scope == "full tensor (reduced over 2 ranks)", (rank, name)
                assert _close(stats, full), (rank, name, stats, full)
            assert "local shard" not in got["notes"][name]  # the FSDP2 note, no local-shard one
        assert got["synced"] == len(workers.PARAMS)  # sync_stats() reduced the last step's
        # one all_gather per step (two at the next steps' beginnings, one in sync_stats), for three hooks
        assert got["explored"]["all_gather"] == workers.STEPS
        assert {k: v for k, v in got["explored"].items() if k != "all_gather"} == {
            k: v for k, v in got["plain"].items() if k != "all_gather"
        }
        assert got["plain"]["all_gather"] == 0


def test_fsdp_gradient_stats_without_collective_are_the_local_shard_and_say_so(fsdp_runs):
    for rank, run in enumerate(fsdp_runs):
        got = run[False]
        for name in workers.PARAMS:
            for (_, stats, scope), local in zip(got["records"][name], got["local"][name], strict=True):
                assert scope == f"local shard {rank} of 2"
                assert _close(stats, local), (rank, name, stats, local)
            assert "local shard" in got["notes"][name] and "collective=True" in got["notes"][name]
        assert got["explored"] == got["plain"]  # no collective of the explorer's


def test_stats_hooks_on_one_rank_never_issue_a_collective(runs):
    ranks = [run["one_rank"] for run in runs]
    for run in ranks:
        assert run["losses"] == run["plain"]
    assert ranks[0]["scopes"] == ["local shard 0 of 2"]


def test_tensor_parallel_activation_and_gradient_stats_are_the_full_tensors(runs):
    ranks = [run["tensor_parallel"] for run in runs]
    for rank, run in enumerate(ranks):
        assert [step for step, _, _ in run["records"]] == list(range(1, workers.STEPS + 1))
        for (_, stats, scope), full in zip(run["records"], run["full"], strict=True):
            assert scope == "full tensor (reduced over 2 ranks)"
            assert _close(stats, full), (rank, stats, full)
        # a DTensor parameter that autograd sees itself (tensor parallel): its grad hook's stats are the full gradient's
        assert [step for step, _, _ in run["grad_records"]] == list(range(1, workers.STEPS + 1))
        for (_, stats, scope), full in zip(run["grad_records"], run["grads"], strict=True):
            assert scope == "full tensor (reduced over 2 ranks)"
            assert _close(stats, full), (rank, stats, full)
        assert run["synced"] == 2  # the last step's two records
        assert run["explored"]["all_gather"] == workers.STEPS  # one per step for both hooks
        # a Partial DTensor holds pending sums: its statistics stay local and say why
        [partial] = run["partial"]
        assert partial.startswith(f"local partial value {rank} of 2 (a Partial DTensor")


def test_sync_stats_refuses_without_collective():
    ex = Explorer(nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match=r"collective=False: make it with collective=True on every rank"):
        ex.sync_stats()
    ex.close()
    assert Explorer(nn.Linear(2, 2), collective=True).sync_stats() == 0  # nothing queued: no collective
