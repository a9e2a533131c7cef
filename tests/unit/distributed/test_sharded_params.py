"""Gradient hooks on parameters FSDP shards, on 2 gloo ranks: FSDP2's grad fires with this rank's unsharded gradient
before the reduce-scatter and post_accumulate with the reduced shard after it, each saying so; FSDP1's original
parameters refuse both with the kind that works; every hook leaves as found."""

from __future__ import annotations

import pytest

from tests.unit.distributed import _dtensor_workers as workers
from tests.unit.distributed._ddp_ranks import run_ranks


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each rank's results of the sharded-parameter scenarios (``_dtensor_workers.param_runs``), by rank."""
    return run_ranks(workers.param_runs, tmp_path_factory.mktemp("params"), timeout=150)


def test_grad_on_an_fsdp2_parameter_fires_with_this_ranks_unsharded_gradient(runs):
    for run in runs:
        got = run["fsdp2"]
        # attached before any forward, it fired every backward with the full-shape gradient of this rank's batch
        assert got["grads_match"] == [True] * workers.STEPS
        assert got["grad_types"] == ["Tensor"]
        assert got["counts"]["grad"] == workers.STEPS + 1  # the backward without gradient sync too
        assert got["notes"]["0.weight"].startswith("FSDP2 shards this parameter")
        assert "this rank's gradient before the reduce-scatter" in got["notes"]["0.weight"]
        # attached after FSDP2 made its unsharded Parameter: placed on it at once
        assert got["armed"] == ["2.bias"]
        assert got["bias_match"] == [True]


def test_post_accumulate_on_an_fsdp2_parameter_fires_with_the_reduced_shard(runs):
    for run in runs:
        got = run["fsdp2"]
        assert got["post_types"] == ["DTensor"]
        assert got["posts_match"] == [True] * workers.STEPS
        assert got["counts"]["post"] == workers.STEPS  # FSDP2 reduces nothing without gradient sync: no firing
        note = got["notes"]["2.weight"]
        assert "after the reduce-scatter" in note and "set_requires_gradient_sync(False)" in note


def test_fsdp2_parameter_hooks_leave_as_found(runs):
    for run in runs:
        got = run["fsdp2"]
        assert got["first_left"] == [] and got["ours_left"] == []
        assert got["hooks_as_found"]
        assert got["tensor_hooks_left"] == []


def test_fsdp1_original_parameters_refuse_gradient_hooks_with_the_kind_that_works(runs):
    for run in runs:
        for kind in ("grad", "post_accumulate"):
            message = run["fsdp1"][kind]
            assert message.startswith("parameter '_fsdp_wrapped_module.0.weight' is an original parameter of FSDP1")
            assert "kind 'backward' on '_fsdp_wrapped_module.0'" in message and "fully_shard" in message
