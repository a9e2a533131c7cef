"""Which models the explorer treats as sharded across ranks (2 gloo ranks, spawned): DDP, FSDP and DTensor
parameters over 2 ranks are; DDP over a group of one rank and FSDP2 over a mesh of one rank are not."""

from __future__ import annotations

import pytest

from tests.unit.distributed._ddp_ranks import run_ranks
from tests.unit.distributed._sharded_workers import detection

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    return run_ranks(detection, tmp_path_factory.mktemp("detection"), timeout=90)[0]


def test_ddp_over_two_ranks_is_found_at_the_model_itself(found):
    ddp = found["ddp"]
    assert ddp["shape"] is None  # the probe was skipped
    assert ddp["found"] == ("DDP (DistributedDataParallel)", "", 2)
    assert ddp["refused"].startswith("run() would run a forward of a model whose DDP (DistributedDataParallel) at ")
    assert "the model itself spans 2 ranks on this rank alone" in ddp["refused"]
    assert "collective=True on every rank" in ddp["refused"]
    assert any(d.startswith("the shape probe was skipped") for d in ddp["diagnostics"])


def test_attention_is_refused_too(found):
    assert found["attention"].startswith("attention() would run a forward of a model whose DDP")


def test_fsdp1_is_found_where_it_sits(found):
    fsdp1 = found["fsdp1"]
    assert fsdp1["found"] == ("FSDP (FullyShardedDataParallel)", "0", 2)
    assert "whose FSDP (FullyShardedDataParallel) at '0' spans 2 ranks" in fsdp1["refused"]


def test_a_dtensor_parameter_is_found_by_its_name_and_mesh(found):
    dtensor = found["dtensor"]
    assert dtensor["shape"] is None
    assert dtensor["found"] == ("DTensor", "2.weight", 2)
    assert "whose DTensor at '2.weight' spans 2 ranks" in dtensor["refused"]


def test_a_group_or_mesh_of_one_rank_is_not_refused(found):
    for name in ("solo_ddp", "solo_fsdp"):
        assert found[name]["run"] == (2, 4)
        assert not [d for d in found[name]["diagnostics"] if "skipped" in d]
