"""An explorer on one rank of a 2-rank FSDP2 job (gloo, spawned processes): it never runs the model alone, says so,
and the job's losses and hooks are as without it; with collective=True every rank runs in step."""

from __future__ import annotations

import pytest

from tests.unit.distributed._ddp_ranks import run_ranks
from tests.unit.distributed._sharded_workers import fsdp_runs

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return run_ranks(fsdp_runs, tmp_path_factory.mktemp("fsdp"), timeout=90)


@pytest.fixture
def alone(runs):
    return [result["alone"] for result in runs]


@pytest.fixture
def collective(runs):
    return [result["collective"] for result in runs]


def test_the_job_completes_with_the_losses_of_a_run_without_the_explorer(alone):
    for result in alone:
        assert result["losses"] == result["expected"]
        assert result["hooks_as_found"]


def test_the_probe_is_skipped_and_said(alone):
    first = alone[0]
    assert first["widget_tree"]  # a HookExplorer and its view ran no forward either
    assert first["probe_shape"] is None
    (said,) = [d for d in first["diagnostics"] if d.startswith("the shape probe was skipped")]
    assert "FSDP2 (fully_shard) at the model itself spans 2 ranks" in said
    assert "collective=True on every rank" in said


def test_hooks_whose_attach_checks_were_skipped_say_so_until_they_fire(alone):
    first = alone[0]
    for note in first["notes"]:
        assert note.startswith("not checked by a forward at attach")
        assert "spans 2 ranks" in note
    assert [n.split(": ")[1].split(" was skipped")[0] for n in first["notes"]] == [
        "attach()'s check of full backward hooks",
        "attach()'s check of full backward hooks",
        "attach()'s check of full backward hooks",
        "attach()'s graph recording, which checks a node id",
    ]
    # they fired in training: what is left is another note (the first layer's inputs need no grad)
    assert first["after_training"][:2] == [None, None]
    assert first["after_training"][2].startswith("grad_input of '0.0' is all None")
    assert first["after_training"][3] is None
    assert {"", "0", "1", "2"} <= set(first["summary_paths"])


def test_runs_the_user_asks_for_are_refused_with_the_wrapper_path_ranks_and_fix(alone):
    refusals = alone[0]["refusals"]
    assert set(refusals) == {
        "run", "graph", "first_nonfinite", "attribute", "gradcam", "compare_backward", "logit_lens", "patch_sweep"
    }  # fmt: skip
    for name, message in refusals.items():
        attribution = name in {"attribute", "gradcam"}
        assert message.startswith("the attribution run" if attribution else f"{name}()"), message
        assert "FSDP2 (fully_shard) at the model itself spans 2 ranks on this rank alone" in message
        assert "create the explorer with collective=True on every rank" in message


def test_collective_runs_on_every_rank_in_step_with_the_same_results(collective):
    first, second = collective
    assert first["probe"] == second["probe"] == [2, 4]
    assert first["output"] == second["output"]
    assert first["losses"] != second["losses"]  # each rank trained on its own data
    for result in collective:
        assert result["losses"] == result["expected"]  # the runs left the model as found
    assert not [d for d in first["diagnostics"] + second["diagnostics"] if "skipped" in d]


def test_global_backward_on_fsdp2_modules_draws_no_view_warning(collective):
    for result in collective:
        assert not [w for w in result["warnings"] if "view" in w], result["warnings"]
