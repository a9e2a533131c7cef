"""record_to on 2 gloo ranks (spawned), read back by open_run: the first NaN, summary rows, reading mid-run."""

from __future__ import annotations

import math

import pytest

import hookwidgets
from tests.unit.distributed._ddp_ranks import run_ranks
from tests.unit.distributed._run_log_workers import NAN_RANK, NAN_STEP, STEPS, logged_training

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runlog")
    results = run_ranks(logged_training, tmp, log_dir=str(tmp / "run"))
    return results, tmp / "run"


def test_first_nonfinite_is_rank_1s_first_layer_forward_at_the_nan_step(job):
    _, log_dir = job
    run = hookwidgets.open_run(log_dir)
    found = run.first_nonfinite()
    assert found is not None
    assert (found["step"], found["rank"], found["path"], found["phase"]) == (NAN_STEP, NAN_RANK, "module.0", "forward")
    assert found["kind"] == "global_forward" and found["call"] == 0 and found["nan"] > 0


def test_the_ddp_inspectors_records_share_the_run_logs_directory(job):
    _, log_dir = job
    run = hookwidgets.open_run(log_dir)
    assert sorted(p.name for p in run.ddp_logs) == ["rank0.jsonl", "rank1.jsonl"]
    records = run.ddp_records()
    assert {r["rank"] for r in records} == {0, 1} and {r["step"] for r in records} == set(range(STEPS))
    assert run.ranks == [0, 1]  # the inspector's logs are not taken for ranks of the run log


def test_ranks_steps_and_nodes(job):
    results, log_dir = job
    run = hookwidgets.open_run(log_dir)
    assert run.ranks == [0, 1] and run.world == 2
    assert run.steps == list(range(1, STEPS + 1))
    assert [(r["rank"], r["world"], r["closed"]) for r in results] == [(0, 2, True), (1, 2, True)]
    assert set(run.nodes) == {0, 1} and all(isinstance(n["host"], str) for n in run.nodes.values())
    assert run.tree is not None and run.tree["cls"] == "DistributedDataParallel"
    assert run.live == {0: False, 1: False} and run.all_notes() == []


def test_summary_rows_per_rank_equal_each_explorers_summary(job):
    results, log_dir = job
    rows = hookwidgets.open_run(log_dir).summary()
    for rank, result in enumerate(results):
        logged = {(r["step"], r["path"]): r for r in rows if r["rank"] == rank}
        expected = {(r["step"], r["path"]): r for r in result["summary"]}
        assert logged.keys() == expected.keys()
        for key, row in expected.items():
            for column, value in row.items():
                if column in ("step", "path") or column.endswith(("_order", "_calls")):
                    continue
                got = logged[key][column]
                assert (math.isnan(value) and math.isnan(got)) or got == pytest.approx(value, rel=1e-6, abs=1e-30), (
                    key,
                    column,
                )


def test_reduced_rows_take_both_ranks_tensors_as_one(job):
    results, log_dir = job
    rows = hookwidgets.open_run(log_dir).summary(steps=[1])
    reduced = {r["path"]: r for r in rows if r["rank"] is None}
    ranks = [{r["path"]: r for r in result["summary"] if r["step"] == 1} for result in results]
    assert reduced.keys() == ranks[0].keys()
    for path, row in reduced.items():
        a, b = ranks[0][path], ranks[1][path]
        assert row["act_norm"] == pytest.approx(math.hypot(a["act_norm"], b["act_norm"]), rel=1e-6)
        assert row["grad_nan"] == a["grad_nan"] + b["grad_nan"]
        assert row["act_mean"] == pytest.approx((a["act_mean"] + b["act_mean"]) / 2, rel=1e-5, abs=1e-7)


def test_a_reader_between_steps_sees_the_steps_written_so_far(job):
    results, _ = job
    # rank 0 read after each step's backward: the steps before it are written (as the step began)
    assert results[0]["seen"] == [[], [1], [1, 2], [1, 2, 3]]


def test_per_rank_and_matrices_agree_with_the_summary(job):
    results, log_dir = job
    run = hookwidgets.open_run(log_dir)
    norms = run.per_rank("module.2", "act_norm")
    assert norms.shape == (2, STEPS)
    for rank, result in enumerate(results):
        expected = [r["act_norm"] for r in result["summary"] if r["path"] == "module.2"]
        assert norms[rank].tolist() == pytest.approx(expected, rel=1e-6)
    wanted = {"path": "module.2", "kind": "global_forward", "phase": "forward"}
    layer = next(i for i, found in enumerate(run.layers) if found == wanted)
    assert run.layer_steps("norm", rank=1)[layer].tolist() == pytest.approx(norms[1].tolist())
    assert run.rank_layers(1, "norm")[:, layer].tolist() == pytest.approx(norms[:, 0].tolist())
    nonfinite = run.rank_layers(NAN_STEP, "nonfinite")
    assert nonfinite[0].sum() == 0 and nonfinite[1, layer] > 0
