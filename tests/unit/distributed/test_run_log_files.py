"""record_to in one process (no torch.distributed) and open_run on damaged, crafted and mismatched run logs."""

from __future__ import annotations

import json
import pickle
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import hookwidgets
from hookwidgets.core import Explorer, RunLogWarning
from hookwidgets.distributed import run_format as fmt


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def train(m: nn.Module, steps: int, nan_step: int | None = None) -> None:
    for step in range(1, steps + 1):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(step))
        if step == nan_step:
            x[0, 1] = float("inf")
        m(x).sum().backward()


@pytest.fixture
def logged(tmp_path):
    """A closed 3-step log of stats on every layer; the explorer's summary."""
    m = model()
    with Explorer(m) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        ex.record_to(tmp_path / "run")
        train(m, 3)
        summary = ex.summary()
    return tmp_path / "run", summary


def test_one_process_without_torch_distributed_is_rank_0_of_1(logged):
    log_dir, summary = logged
    assert not torch.distributed.is_initialized()
    run = hookwidgets.open_run(log_dir)
    assert run.ranks == [0] and run.world == 1 and run.steps == [1, 2, 3]  # the last step written at close
    assert run.nodes[0]["node_rank"] is None and run.first_nonfinite() is None
    assert sorted(p.name for p in log_dir.iterdir())[:2] == ["rank0.hwidx", "rank0.hwlog"]
    rows = [r for r in run.summary() if r["rank"] == 0]
    assert [(r["step"], r["path"]) for r in rows] == [(r["step"], r["path"]) for r in summary]
    assert [r["act_norm"] for r in rows] == pytest.approx([r["act_norm"] for r in summary], rel=1e-6)
    assert hookwidgets.RunView is type(run) and hookwidgets.distributed.open_run is hookwidgets.open_run


def test_capture_records_are_logged_with_the_statistics_of_their_tensor(tmp_path):
    m = model()
    with Explorer(m) as ex:
        ex.attach("0", "forward")  # capture
        ex.attach("", "global_forward", action="stats")  # the same output's statistics, by the stats action
        ex.record_to(tmp_path, every=2)
        train(m, 4, nan_step=3)
        stats = [r.stats for r in ex.captures["0"]["global_forward"]]
    run = hookwidgets.open_run(tmp_path)
    assert run.steps == [2, 4]  # every=2
    assert run.first_nonfinite() is None  # the Inf of step 3 is in no written step
    assert [(layer["path"], layer["kind"]) for layer in run.layers[:2]] == [("0", "global_forward"), ("0", "forward")]
    for field in ("norm", "mean", "std", "min", "max", "zero_fraction", "numel"):
        by_stats, captured = run.layer_steps(field, rank=0)[:2]
        expected = [s[field] for s in stats[1::2]]
        assert captured.tolist() == pytest.approx(expected, rel=1e-6) == by_stats.tolist()


def test_a_nonfinite_value_is_found_with_its_layer_and_phase(tmp_path):
    m = model()
    with Explorer(m) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        ex.record_to(tmp_path)
        train(m, 3, nan_step=2)
    found = hookwidgets.open_run(tmp_path).first_nonfinite()
    assert {k: found[k] for k in ("step", "rank", "path", "kind", "phase")} == {
        "step": 2, "rank": 0, "path": "0", "kind": "global_forward", "phase": "forward"
    }  # fmt: skip
    assert found["inf"] > 0


def test_a_view_refreshes_as_the_log_grows(tmp_path):
    m = model()
    with Explorer(m) as ex:
        ex.attach("", "global_forward", action="stats")
        log = ex.record_to(tmp_path)
        train(m, 2)  # step 1 written as step 2 began
        run = hookwidgets.open_run(tmp_path)
        assert run.steps == [1] and run.live == {0: True}
        assert run.refresh() is False
        first = run.layer_steps("mean", rank=0)
        train(m, 1)
        assert run.refresh() is True and run.steps == [1, 2]
        log.flush()  # the step still open, written now
        assert run.refresh() is True and run.steps == [1, 2, 3]
    assert run.refresh() is False and run.live == {0: False}  # closed: a note frame, no step
    assert run.layer_steps("mean", rank=0)[:, 0].tolist() == first[:, 0].tolist()


def test_record_to_checks_its_arguments(tmp_path):
    with Explorer(model()) as ex:
        with pytest.raises(ValueError, match="every= is how many steps apart"):
            ex.record_to(tmp_path, every=0)
        with pytest.raises(ValueError, match="max_bytes= is this rank's log size budget"):
            ex.record_to(tmp_path, max_bytes=10)
        (tmp_path / "file").write_text("x")
        with pytest.raises(NotADirectoryError, match="file"):
            ex.record_to(tmp_path / "file")


def test_the_size_budget_stops_the_log_and_says_so(tmp_path):
    m = model()
    with Explorer(m) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        log = ex.record_to(tmp_path, max_bytes=4096)
        with pytest.warns(RunLogWarning, match="size budget of 4096 bytes"):
            train(m, 12)
        assert log.full
    run = hookwidgets.open_run(tmp_path)
    assert 1 <= len(run.steps) < 11 and run.live == {0: False}
    assert any("size budget of 4096 bytes" in note for note in run.all_notes())


# -- bad input
def test_a_missing_or_empty_directory_is_a_file_not_found_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run log directory .*nowhere"):
        hookwidgets.open_run(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=f"{tmp_path.name}' holds no run log"):
        hookwidgets.open_run(tmp_path)
    (tmp_path / "rank0.jsonl").write_text("")
    with pytest.raises(FileNotFoundError, match="DDPInspector logs .*load_records"):
        hookwidgets.open_run(tmp_path)


def test_ddp_inspector_logs_beside_a_run_log_are_listed_apart(logged):
    log_dir, _ = logged
    (log_dir / "rank0.jsonl").write_text(json.dumps({"kind": "start", "rank": 0}) + "\n")
    run = hookwidgets.open_run(log_dir)
    assert [p.name for p in run.ddp_logs] == ["rank0.jsonl"] and run.ddp_records() == []
    assert run.ranks == [0] and run.steps == [1, 2, 3]


def test_a_cut_off_last_frame_is_skipped_and_said(logged):
    log_dir, _ = logged
    index = np.frombuffer((log_dir / "rank0.hwidx").read_bytes()[8:], fmt.INDEX_ENTRY)
    last = index[index["type"] == fmt.DATA][-1]
    data = (log_dir / "rank0.hwlog").read_bytes()
    frame = data[int(last["offset"]) : int(last["offset"]) + int(last["length"])]
    (log_dir / "rank0.hwlog").write_bytes(data + frame[:200])  # part of a frame after the last whole one
    with (log_dir / "rank0.hwidx").open("ab") as index:
        index.write(b"\0" * 20)  # and part of an index entry
    run = hookwidgets.open_run(log_dir)
    assert run.steps == [1, 2, 3]
    assert any("200 bytes after its last whole frame" in note for note in run.all_notes())


def test_a_frame_cut_short_under_its_index_entry_is_skipped_and_said(logged):
    log_dir, _ = logged
    index = np.frombuffer((log_dir / "rank0.hwidx").read_bytes()[8:], fmt.INDEX_ENTRY)
    last = index[index["type"] == fmt.DATA][-1]
    data = (log_dir / "rank0.hwlog").read_bytes()
    (log_dir / "rank0.hwlog").write_bytes(data[: int(last["offset"]) + 40])  # the rank died writing step 3
    run = hookwidgets.open_run(log_dir)
    assert run.steps == [1, 2]
    assert any("40 bytes after its last whole frame" in note for note in run.all_notes())


def test_without_its_index_a_log_is_read_from_its_frames(logged):
    log_dir, _ = logged
    expected = hookwidgets.open_run(log_dir).summary()
    (log_dir / "rank0.hwidx").unlink()
    assert hookwidgets.open_run(log_dir).summary() == expected


def _crafted(log_dir, *frames: bytes) -> None:
    """A rank 0 log of these frames and no index (the reader reads the frames)."""
    log_dir.mkdir(exist_ok=True)
    (log_dir / "rank0.hwlog").write_bytes(b"".join(frames))


HEADER = {"format": "hookwidgets run log", "rank": 0, "world": 1, "tree": "0123456789abcdef"}


def test_a_header_of_wrong_types_is_a_value_error_naming_the_file(tmp_path):
    _crafted(tmp_path, fmt.json_frame(fmt.HEADER, {**HEADER, "rank": "0"}))
    with pytest.raises(ValueError, match=r"rank0\.hwlog at byte 0: the header's 'rank' is '0', not a int"):
        hookwidgets.open_run(tmp_path)


def test_oversized_lengths_and_damaged_bytes_are_value_errors_naming_the_file(logged):
    log_dir, _ = logged
    path = log_dir / "rank0.hwlog"
    data = bytearray(path.read_bytes())
    first = fmt.FRAME_HEAD.unpack_from(data)[2] + fmt.FRAME_HEAD.size  # the second frame's offset
    good = bytes(data)
    data[first + 8 : first + 12] = (2**31 - 1).to_bytes(4, "little")
    path.write_bytes(data)
    with pytest.raises(ValueError, match=r"rank0\.hwlog at byte \d+: "):
        hookwidgets.open_run(log_dir)
    (log_dir / "rank0.hwidx").unlink()
    with pytest.raises(ValueError, match="larger than any the writer makes"):
        hookwidgets.open_run(log_dir)
    data = bytearray(good)
    data[-5] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(ValueError, match="checksum does not match"):
        hookwidgets.open_run(log_dir)


class _Boom:
    def __reduce__(self):
        return (open, ("PWNED", "w"))


def test_a_pickle_or_random_bytes_are_a_value_error_and_run_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _crafted(tmp_path / "a", pickle.dumps(_Boom()))
    with pytest.raises(ValueError, match=r"rank0\.hwlog at byte 0: no frame begins here"):
        hookwidgets.open_run(tmp_path / "a")
    _crafted(tmp_path / "b", np.random.default_rng(0).bytes(5000))
    with pytest.raises(ValueError, match=r"rank0\.hwlog"):
        hookwidgets.open_run(tmp_path / "b")
    assert not (tmp_path / "PWNED").exists()


HOSTILE = ["__import__('os').system('touch PWNED')", "<img src=x onerror=alert(1)>", "a\nb\u202e"]


def _data(keys: list[int], nan: int = 0) -> bytes:
    n = len(keys)
    columns = {"key": np.array(keys), "numel": np.full(n, 4), "nan": np.full(n, nan), "inf": np.zeros(n, int)}
    columns |= {name: np.ones(n) for name in fmt.STATS}
    return fmt.frame(fmt.DATA, fmt.data_payload(1, 0.0, 0.1, columns)[0])


def test_hostile_module_names_are_read_as_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = {"first": 0, "keys": [[name, "global_forward", "forward", 0] for name in HOSTILE]}
    frames = fmt.json_frame(fmt.HEADER, HEADER), fmt.json_frame(fmt.NAMES, names), _data([0, 1, 2], 1)
    _crafted(tmp_path / "run", *frames)
    run = hookwidgets.open_run(tmp_path / "run")
    assert [layer["path"] for layer in run.layers] == HOSTILE
    assert run.first_nonfinite()["path"] == HOSTILE[0] and run.tree is None
    assert any("module tree, is missing" in note for note in run.notes)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ({"first": 0, "keys": [["a", "forward", "forward", "0"]]}, "is not \\[path, kind, phase, call\\]"),
        ({"first": 3, "keys": []}, "does not continue the keys"),
        ([1, 2], "a JSON list, not an object"),
    ],
)
def test_names_of_wrong_types_are_a_value_error_naming_the_file(tmp_path, names, message):
    _crafted(tmp_path, fmt.json_frame(fmt.HEADER, HEADER), fmt.json_frame(fmt.NAMES, names))
    with pytest.raises(ValueError, match=rf"rank0\.hwlog at byte \d+: .*{message}"):
        hookwidgets.open_run(tmp_path)


def test_a_row_naming_an_undeclared_key_is_a_value_error(tmp_path):
    names = {"first": 0, "keys": [["a", "forward", "forward", 0]]}
    _crafted(tmp_path, fmt.json_frame(fmt.HEADER, HEADER), fmt.json_frame(fmt.NAMES, names), _data([0, 7]))
    run = hookwidgets.open_run(tmp_path)
    with pytest.raises(ValueError, match=r"rank0\.hwlog at byte \d+: a row names key 7, but only 1 keys"):
        run.layer_steps("norm", rank=0)


def test_ranks_with_different_module_trees_are_a_value_error_naming_the_first_path(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    other = model()
    other[2] = nn.Linear(8, 3)  # the same paths
    other.append(nn.Softmax(-1))  # and one more
    for rank, m in enumerate([model(), other]):
        monkeypatch.setenv("RANK", str(rank))
        with Explorer(m) as ex:
            ex.attach("", "global_forward", action="stats")
            ex.record_to(tmp_path)
            train(m, 1)
    with pytest.raises(ValueError, match="first difference is at path '3': rank 0 has nothing, rank 1 has Softmax"):
        hookwidgets.open_run(tmp_path)


def test_rank_files_of_an_older_run_are_left_out_and_said(logged, monkeypatch):
    log_dir, _ = logged
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in (1, 0):  # a newer 2-rank run into the same directory (rank 0 rewrites its file)
        monkeypatch.setenv("RANK", str(rank))
        m = model()
        with warnings.catch_warnings(), Explorer(m) as ex:
            ex.attach("", "global_forward", action="stats")
            ex.record_to(log_dir)
            train(m, 1)
    run = hookwidgets.open_run(log_dir)
    assert run.ranks == [0, 1] and run.world == 2 and run.notes == []
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    m = model()
    with Explorer(m) as ex:  # then a 1-rank run again: rank 1's file is the older run's
        ex.attach("", "global_forward", action="stats")
        ex.record_to(log_dir)
        train(m, 1)
    run = hookwidgets.open_run(log_dir)
    assert run.ranks == [0] and run.world == 1
    assert run.notes == ["rank1.hwlog is from another run (world 2, run id None) than the newest rank log: left out"]


class _Checkpointed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False))


def test_a_forward_a_checkpoint_recomputes_is_logged_once(tmp_path):
    torch.manual_seed(0)
    m = _Checkpointed()
    with Explorer(m) as ex:
        ex.attach("", "global_forward", action="stats")
        ex.record_to(tmp_path)
        x = torch.randn(3, 4, requires_grad=True)
        m(x).sum().backward()
        assert any(r.recompute for r in ex.captures["block.0"]["global_forward"])
        expected = {r["path"]: r for r in ex.summary()}
    rows = {r["path"]: r for r in hookwidgets.open_run(tmp_path).summary() if r["rank"] == 0}
    assert rows.keys() == expected.keys()
    for path, row in rows.items():
        assert row["act_norm"] == pytest.approx(expected[path]["act_norm"], rel=1e-6)


def test_statistics_of_a_local_shard_are_said_per_layer(tmp_path):
    names = {"first": 0, "keys": [["a", "post_accumulate", "backward", 0], ["b", "post_accumulate", "backward", 0]]}
    columns = {"key": np.arange(2), "flags": np.array([fmt.LOCAL, 0]), "numel": np.full(2, 4)}
    columns |= {"nan": np.zeros(2, int), "inf": np.zeros(2, int)} | {name: np.ones(2) for name in fmt.STATS}
    data = fmt.frame(fmt.DATA, fmt.data_payload(1, 0.0, 0.1, columns)[0])
    _crafted(tmp_path, fmt.json_frame(fmt.HEADER, HEADER), fmt.json_frame(fmt.NAMES, names), data)
    assert hookwidgets.open_run(tmp_path).layer_steps("local", rank=0).tolist() == [[1.0], [0.0]]


def test_a_backward_finishing_after_the_next_step_began_is_logged_under_its_step(tmp_path):
    m = model()
    with Explorer(m) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        ex.record_to(tmp_path)
        first = m(torch.randn(3, 4))
        second = m(torch.randn(3, 4))  # step 2 began: step 1's forward records are written, its backward not yet
        (first.sum() + 2 * second.sum()).backward()  # both steps' gradients arrive in step 2
        m(torch.randn(3, 4)).sum().backward()
        expected = ex.summary()
    run = hookwidgets.open_run(tmp_path)
    assert run.steps == [1, 2, 3]
    rows = [r for r in run.summary() if r["rank"] == 0]
    assert [(r["step"], r["path"]) for r in rows] == [(r["step"], r["path"]) for r in expected]
    for row, want in zip(rows, expected, strict=True):
        assert row["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-6), row["path"]
    steps = run.layer_steps("norm", rank=0)  # the frames read together, and one by one
    assert steps[:, :1].tolist() == run.layer_steps("norm", rank=0, steps=[1]).tolist()
