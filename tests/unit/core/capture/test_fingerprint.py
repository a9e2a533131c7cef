"""A capture changed by a write that bumps no version (``.data``) is stale: its fingerprint differs (fingerprint.py)."""

import json

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.capture import fingerprint
from hookwidgets.core.capture.export import export_captures, sidecar_path
from hookwidgets.core.capture.store import make_record


def _record(t: torch.Tensor, copy: bool = False):
    return make_record("a", "forward", 1, 0, {"output": t}, copy=copy)


def test_a_capture_changed_through_data_is_stale_at_display_and_at_export(tmp_path):
    model = nn.Sequential(nn.Linear(4, 4))
    with Explorer(model) as ex:
        ex.attach("0", "forward")
        out = model(torch.randn(2, 4))
        record = ex.captures["0"]["forward"][-1]
        assert not record.stale and record.verified
        version = out._version
        out.data.mul_(2)  # .data shares the memory but not the version counter
        assert out._version == version
        assert record.stale
        path = export_captures(ex.captures, tmp_path / "caps.safetensors")
    (entry,) = json.loads(sidecar_path(path).read_text())["records"]
    assert entry["stale"] is True


@pytest.mark.parametrize("where", [(0, 0), (1, 3), (4, 0), (5, 3)])
def test_the_four_positions_are_logical_whatever_the_strides(where):
    t = torch.arange(24.0).reshape(4, 6).t()  # 6 x 4, not contiguous
    record = _record(t)
    assert not record.stale
    # flat indices 0, 7, 16 and 23 of the transposed view: its first, last and two between
    t.data[where] += 100
    assert record.stale


def test_a_change_the_four_positions_miss_goes_unseen_but_the_version_counter_still_tells():
    t = torch.zeros(10)
    record = _record(t)
    t.data[1] = 5.0  # flat indices 0, 3, 6 and 9 are read
    assert not record.stale
    t[1] = 6.0
    assert record.stale


def test_a_copy_keeps_its_values_whatever_happens_to_the_original_through_data():
    t = torch.randn(8, dtype=torch.cfloat).conj()  # a lazy conjugate: the clone is resolved
    record = _record(t, copy=True)
    assert not record.stale
    t.data.zero_()
    assert not record.stale
    record.tensor.data.zero_()
    assert record.stale


def test_nan_values_match_themselves_and_a_zero_size_capture_has_nothing_to_change():
    record = _record(torch.full((3,), float("nan")))
    assert not record.stale and record.verified
    assert fingerprint.take(torch.zeros(0, 3)) == b""  # no value to keep
    empty = _record(torch.zeros(0, 3))
    assert not empty.stale and empty.verified


def test_a_capture_whose_memory_was_freed_is_stale_and_is_not_read():
    t = torch.randn(100)
    record = _record(t)
    t.untyped_storage().resize_(0)
    stale = record.stale  # (a failing assert must not print the record: torch would read the freed memory)
    assert stale


def test_verified_is_false_only_where_no_check_is_possible():
    with torch.inference_mode():
        sparse = torch.eye(3).to_sparse()  # no version counter, and no strided memory to read
        dense = torch.eye(3)
    record = make_record("a", "forward", 1, 0, {"output.0": dense, "output.1": sparse}, copy=False)
    assert not record.verified
    assert _record(torch.eye(3).to_sparse()).verified  # a version counter, at least
    assert make_record("a", "forward", 1, 0, {"output": dense}, copy=False).verified  # a fingerprint, at least


def test_a_device_fingerprint_reads_the_same_four_values_as_the_cpu_one():
    t = torch.arange(30, dtype=torch.float64).reshape(5, 6)[:, 1:]  # not contiguous
    n = t.numel()
    third = (n - 1) // 3
    offsets = fingerprint._strided_offsets(t, third, n)
    gathered = fingerprint._device_print(t, *offsets)  # what another device keeps: a 4-element tensor
    assert gathered.tolist() == [1.0, 10.0, 20.0, 29.0]  # flat indices 0, 8, 16 and 24 of the 5 x 5 view
    assert fingerprint.as_bytes(gathered) == fingerprint.take(t)
    assert fingerprint.matches(t, gathered)
    t.data[-1, -1] = 0
    assert not fingerprint.matches(t, gathered)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_captures_are_fingerprinted_on_the_device():
    t = torch.randn(4, 5, device="cuda")
    kept = fingerprint.take(t)  # gathered on the device: no sync at capture
    assert isinstance(kept, torch.Tensor) and kept.device.type == "cuda"
    record = _record(t)
    assert not record.stale
    t.data[-1, -1] += 1
    assert record.stale
    offloaded = make_record("a", "forward", 1, 0, {"output": t}, copy=False, offload="cpu").wait()
    assert offloaded.tensor.device.type == "cpu" and not offloaded.stale and offloaded.verified
