"""DDPInspector on 2 gloo ranks (spawned processes): records reach rank 0 and the log dir, grads are unchanged."""

from __future__ import annotations

import itertools
import math

import pytest

from hookwidgets.distributed import DDPInspector
from tests.unit.distributed._ddp_ranks import run_ranks
from tests.unit.distributed._ddp_workers import STEPS, inspect_runs

pytestmark = pytest.mark.timeout(180)

BUCKET_KEYS = {
    "kind", "rank", "step", "bucket", "numel", "bytes", "params",
    "grad_norm", "reduced_norm", "seconds", "compression_error",
}  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both ranks' results of the allreduce and fp16 runs, and their log dirs."""
    tmp = tmp_path_factory.mktemp("ddp")
    results = run_ranks(inspect_runs, tmp, log_dir=str(tmp / "logs"))
    return {mode: ([r[mode] for r in results], tmp / "logs" / mode) for mode in ("allreduce", "fp16")}


@pytest.fixture
def allreduce_run(runs):
    return runs["allreduce"]


@pytest.fixture
def fp16_run(runs):
    return runs["fp16"]


def test_gradients_equal_the_run_without_inspector(allreduce_run, fp16_run):
    for results, _ in (allreduce_run, fp16_run):
        for rank_result in results:
            assert rank_result["differ"] == []


def test_records_of_both_ranks_reach_rank_0(allreduce_run):
    (rank0, rank1), _ = allreduce_run
    assert rank1["gathered"] is None and rank1["gathered_ready"] is None
    gathered = rank0["gathered"]
    assert {r["rank"] for r in gathered} == {0, 1}
    assert gathered == sorted(rank0["records"] + rank1["records"], key=lambda r: (r["step"], r["rank"], r["bucket"]))
    assert rank0["everywhere"] == rank1["everywhere"] == gathered
    assert all(set(r) == BUCKET_KEYS for r in gathered)
    assert rank0["step"] == rank1["step"] == STEPS


def test_log_dir_holds_what_gather_gives(allreduce_run):
    (rank0, _), logs = allreduce_run
    assert sorted(p.name for p in logs.iterdir()) == ["rank0.jsonl", "rank1.jsonl"]
    assert DDPInspector.load(logs) == rank0["gathered"]
    assert DDPInspector.load(logs, records="ready") == rank0["gathered_ready"]


def test_buckets_cover_every_parameter_once_per_step(allreduce_run):
    (rank0, _), _ = allreduce_run
    for step in range(STEPS):
        for rank in (0, 1):
            buckets = [r for r in rank0["gathered"] if r["step"] == step and r["rank"] == rank]
            names = [n for r in buckets for n in r["params"]]
            assert sorted(names) == sorted(rank0["params"])
            # DDP's first step uses one bucket of up to 1 MB; after its bucket rebuild, bucket_cap_mb splits the model
            assert len(buckets) == 1 if step == 0 else len(buckets) >= 2
            assert [r["bucket"] for r in buckets] == list(range(len(buckets)))
            for r in buckets:
                assert r["bytes"] == 4 * r["numel"] and r["seconds"] > 0 and r["grad_norm"] > 0
                assert r["compression_error"] is None


def test_reduced_norm_is_the_same_on_both_ranks(allreduce_run):
    (rank0, _), _ = allreduce_run
    by_key = {}
    for r in rank0["gathered"]:
        by_key.setdefault((r["step"], r["bucket"]), []).append(r)
    for pair in by_key.values():
        assert len(pair) == 2 and pair[0]["reduced_norm"] == pair[1]["reduced_norm"]
        assert pair[0]["grad_norm"] != pair[1]["grad_norm"]  # each rank saw its own data


def test_ready_order_lists_every_parameter_per_step(allreduce_run):
    (rank0, _), _ = allreduce_run
    for step in range(STEPS):
        ready = [r for r in rank0["gathered_ready"] if r["step"] == step and r["rank"] == 0]
        assert sorted(r["param"] for r in ready) == sorted(rank0["params"])
        assert [r["order"] for r in ready] == list(range(len(ready)))
        assert ready[0]["param"] == "4.bias"  # backward reaches the last layer first
        assert all(a["seconds"] <= b["seconds"] for a, b in itertools.pairwise(ready))


def test_fp16_compression_error_is_small_and_nonzero(fp16_run):
    (rank0, _), logs = fp16_run
    errors = [r["compression_error"] for r in rank0["gathered"]]
    assert errors and all(0 < e < 1e-2 for e in errors)
    assert not any(math.isnan(e) for e in errors)
    assert DDPInspector.load(logs) == rank0["gathered"]
