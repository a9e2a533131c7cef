import json
import math

import pytest
import torch
from safetensors import safe_open
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.capture.export import export_captures, load_captures, sidecar_path
from hookwidgets.core.capture.store import CaptureStore, Record, make_record


def _store(*records):
    store = CaptureStore()
    for r in records:
        store.add(r)
    return store


def _assert_same_tensors(loaded, record):
    assert [t["name"] for t in loaded["tensors"]] == list(record.tensors)
    for entry, (name, expected) in zip(loaded["tensors"], record.tensors.items(), strict=True):
        got = entry["tensor"]
        assert got.dtype == expected.dtype, name
        assert torch.equal(got, expected), name
        assert entry["shape"] == list(expected.shape)
        assert entry["dtype"] == str(expected.dtype).removeprefix("torch.")


def test_round_trip_keeps_every_tensor_field_and_the_store_order(tmp_path):
    g = torch.Generator().manual_seed(0)
    records = [
        make_record("layer1.0.conv1", "forward", 1, 0, {"output": torch.randn(2, 3, 4, 4, generator=g)}, copy=True),
        make_record(
            "layer1.0.conv1",
            "forward_pre",
            1,
            1,
            {"args.0": torch.randn(2, 3, generator=g), "args.1": torch.arange(6).reshape(2, 3)},
            copy=True,
        ),
        make_record("", "global_backward", 1, 0, {"grad_output.0": torch.randn(5, generator=g).half()}, copy=True),
        Record("fc", "forward", 2, 0, {}, stats={"mean": 0.5, "std": math.nan, "numel": 12}),
        make_record("fc.weight", "grad", 2, 0, {"grad": torch.randn(3, 3, generator=g).bfloat16()}, copy=True),
        make_record("mask", "forward", 2, 0, {"output": torch.tensor([True, False])}, copy=True),
        make_record("empty", "forward", 2, 0, {"output": torch.zeros(0, 7), "output.1": torch.tensor(3.0)}, copy=True),
    ]
    store = _store(*records)

    written = export_captures(store, tmp_path / "caps.safetensors")
    loaded = load_captures(written)

    assert written == tmp_path / "caps.safetensors"
    assert sidecar_path(written) == tmp_path / "caps.safetensors.json"
    assert [(r["path"], r["kind"], r["step"], r["call"]) for r in loaded] == [
        (r.path, r.kind, r.step, r.call) for r in records
    ]
    for got, record in zip(loaded, records, strict=True):
        assert got["stale"] is False
        assert got["nbytes"] == record.nbytes
        _assert_same_tensors(got, record)
    assert loaded[1]["tensors"][1]["key"] == "000001/args.1"
    stats = loaded[3]["stats"]
    assert stats["mean"] == 0.5 and math.isnan(stats["std"]) and stats["numel"] == 12
    assert loaded[3]["tensors"] == []
    assert loaded[0]["stats"] is None


def test_sidecar_and_file_metadata_describe_the_export(tmp_path):
    store = CaptureStore(memory_budget=2 * 64)  # room for two records of 64 bytes: the first is evicted
    for step in range(3):
        store.add(make_record("a", "forward", step, 0, {"output": torch.zeros(16)}, copy=True))
    path = export_captures(store, tmp_path / "caps.safetensors")

    document = json.loads(sidecar_path(path).read_text())
    assert document["format"] == "hookwidgets-captures"
    assert document["version"] == "1"
    assert document["file"] == "caps.safetensors"
    assert document["summary"] == {"records": 2, "nbytes": 128, "evicted": 1}
    assert [r["step"] for r in document["records"]] == [1, 2]
    assert document["records"][0]["tensors"] == [
        {"name": "output", "key": "000000/output", "shape": [16], "dtype": "float32"}
    ]
    with safe_open(path, framework="pt") as f:
        assert sorted(f.keys()) == ["000000/output", "000001/output"]
        meta = json.loads(f.metadata()["hookwidgets"])
    assert meta == {"format": "hookwidgets-captures", "version": "1", "sidecar": "caps.safetensors.json"}


def test_tensors_that_share_memory_are_saved_separately(tmp_path):
    base = torch.arange(12.0)
    records = [
        make_record("a", "forward", 1, 0, {"output": base}, copy=False),
        make_record("b", "forward_pre", 1, 0, {"args.0": base}, copy=False),  # the same tensor again
        make_record("b", "forward", 1, 0, {"output": base[2:5], "output.1": base.view(3, 4).t()}, copy=False),
        make_record("c", "forward", 1, 0, {"output": base[:0]}, copy=False),  # empty view of a full storage
    ]
    loaded = load_captures(export_captures(_store(*records), tmp_path / "caps.safetensors"))

    for got, record in zip(loaded, records, strict=True):
        _assert_same_tensors(got, record)
    first, again = loaded[0]["tensors"][0]["tensor"], loaded[1]["tensors"][0]["tensor"]
    first.add_(1)
    assert not torch.equal(first, again)  # loaded tensors do not alias each other


def test_a_stale_record_stays_stale_and_saves_the_current_values(tmp_path):
    x = torch.ones(4)
    record = make_record("relu", "forward", 1, 0, {"output": x}, copy=False)
    x.mul_(3)  # a later in-place op overwrote the capture
    assert record.stale

    (loaded,) = load_captures(export_captures(_store(record), tmp_path / "caps.safetensors"))

    assert loaded["stale"] is True
    assert torch.equal(loaded["tensors"][0]["tensor"], torch.full((4,), 3.0))


def test_complex_conjugate_and_non_contiguous_tensors_are_saved_as_they_read(tmp_path):
    z = torch.tensor([1 + 2j, 3 - 1j]).conj()
    t = torch.arange(6, dtype=torch.int16).reshape(2, 3).t()
    record = make_record("z", "forward", 1, 0, {"output": z, "output.1": t}, copy=False)
    (loaded,) = load_captures(export_captures(_store(record), tmp_path / "caps.safetensors"))
    assert torch.equal(loaded["tensors"][0]["tensor"], torch.tensor([1 - 2j, 3 + 1j]))
    assert torch.equal(loaded["tensors"][1]["tensor"], t)


def test_an_empty_store_exports_an_empty_file(tmp_path):
    path = export_captures(CaptureStore(), tmp_path / "caps.safetensors")
    assert load_captures(path) == []


def test_exporting_again_replaces_both_files(tmp_path):
    path = tmp_path / "caps.safetensors"
    export_captures(_store(make_record("a", "forward", 1, 0, {"output": torch.ones(2)}, copy=True)), path)
    export_captures(_store(make_record("b", "forward", 5, 0, {"output": torch.zeros(3)}, copy=True)), path)
    (loaded,) = load_captures(path)
    assert loaded["path"] == "b"
    assert torch.equal(loaded["tensors"][0]["tensor"], torch.zeros(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["caps.safetensors", "caps.safetensors.json"]


@pytest.mark.parametrize("name", ["caps.pt", "caps", "caps.json"])
def test_a_path_without_the_safetensors_suffix_is_refused_with_the_fixed_name(tmp_path, name):
    store = _store(make_record("a", "forward", 1, 0, {"output": torch.ones(2)}, copy=True))
    fixed = str(tmp_path / (name.split(".")[0] + ".safetensors"))
    with pytest.raises(ValueError, match="must end in '.safetensors'") as excinfo:
        export_captures(store, tmp_path / name)
    assert fixed in str(excinfo.value)
    with pytest.raises(ValueError, match="must end in '.safetensors'"):
        load_captures(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_sidecar_names_the_expected_path(tmp_path):
    path = export_captures(_store(), tmp_path / "caps.safetensors")
    sidecar_path(path).unlink()
    with pytest.raises(FileNotFoundError, match="caps.safetensors.json"):
        load_captures(path)


def test_a_folder_that_cannot_be_written_raises_an_os_error(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with pytest.raises(NotADirectoryError):
        export_captures(_store(), not_a_folder / "caps.safetensors")
    with pytest.raises(FileNotFoundError):
        export_captures(_store(), tmp_path / "missing" / "caps.safetensors")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_are_saved_from_the_cpu(tmp_path):
    x = torch.arange(8.0, device="cuda")
    store = _store(make_record("a", "forward", 1, 0, {"output": x}, copy=False))
    (loaded,) = load_captures(export_captures(store, tmp_path / "c.safetensors"))
    assert loaded["tensors"][0]["tensor"].device.type == "cpu"
    assert torch.equal(loaded["tensors"][0]["tensor"], x.cpu())


def test_explorer_export_round_trips_its_captures(tmp_path, cnn, image):
    from hookwidgets.core import Explorer

    with Explorer(cnn) as ex:
        ex.attach("features.conv", ["forward", "grad"])
        ex.run(image, target=1)
        path = ex.export(tmp_path / "caps.safetensors")
        forward = ex.captures["features.conv"]["forward"][0].tensor
    loaded = load_captures(path)
    assert [(r["path"], r["kind"], r["step"]) for r in loaded] == [
        ("features.conv", "forward", 1),
        ("features.conv", "grad", 1),
    ]
    assert torch.equal(loaded[0]["tensors"][0]["tensor"], forward)


def test_the_sidecar_is_strict_json_when_statistics_hold_nan_and_inf(tmp_path):
    model = nn.Sequential(nn.Identity())
    ex = Explorer(model)
    ex.attach("0", "forward", action="stats")
    model(torch.full((1, 3), float("nan")))  # no finite value: mean, std, min and max are NaN

    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    path = ex.export(tmp_path / "caps.safetensors")
    text = (tmp_path / "caps.safetensors.json").read_text()
    stats = json.loads(text, parse_constant=refuse)["records"][0]["stats"]
    assert stats["mean"] == "nan" and stats["max"] == "nan" and stats["nan"] == 3
    loaded = load_captures(path)[0]["stats"]
    assert math.isnan(loaded["mean"]) and math.isnan(loaded["max"]) and loaded["nan"] == 3  # floats again
    ex.close()


def test_the_sidecar_holds_the_token_labels_when_known(tmp_path):
    ids = torch.tensor([[4, 5, 6]])
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))
    with Explorer(model, ids, tokens=["the", "cat", "sat"]) as ex:
        ex.attach("1", "forward")
        ex.run()
        document = json.loads(sidecar_path(ex.export(tmp_path / "caps.safetensors")).read_text())
        assert document["tokens"] == [["the", "cat", "sat"]] and "decoder_tokens" not in document
    with Explorer(model, ids) as ex:
        document = json.loads(sidecar_path(ex.export(tmp_path / "none.safetensors")).read_text())
        assert "tokens" not in document
