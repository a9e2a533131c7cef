"""DDPInspector in one process (a world of 1): refusals with their fix, close(), logs, compression round trips."""

from __future__ import annotations

import gc
import json
import re

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from hookwidgets.distributed import DDPInspector, load_records
from hookwidgets.distributed.compression import CHUNK, relative_error, round_trip_for


@pytest.fixture
def group(tmp_path):
    """A gloo process group of one rank (FileStore in tmp_path), destroyed after the test."""
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    gc.collect()  # the test's DDP models let go of the group before it is destroyed
    if dist.is_initialized():
        dist.destroy_process_group()


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _step(ddp: DDP) -> None:
    ddp.zero_grad(set_to_none=True)
    ddp(torch.randn(3, 4, generator=torch.Generator().manual_seed(0))).sum().backward()


def _post_hooks(model: nn.Module) -> dict:
    return {n: list((p._post_accumulate_grad_hooks or {}).items()) for n, p in model.named_parameters()}


def test_not_ddp_names_the_model_and_how_to_wrap_it():
    with pytest.raises(TypeError, match=r"got Sequential: call torch.distributed.init_process_group") as info:
        DDPInspector(_model())
    assert "DistributedDataParallel(model)" in str(info.value)


def test_destroyed_process_group_says_to_initialise_it(group):
    ddp = DDP(_model())
    dist.destroy_process_group()
    with pytest.raises(RuntimeError, match=r"no torch.distributed process group .*init_process_group"):
        DDPInspector(ddp)


def test_second_inspector_explains_one_comm_hook(group):
    ddp = DDP(_model())
    first = DDPInspector(ddp)
    with pytest.raises(RuntimeError, match="an earlier DDPInspector.*allows one communication hook"):
        DDPInspector(ddp)
    first.close()
    with pytest.raises(RuntimeError, match="allows one communication hook"):
        DDPInspector(ddp)  # close() cannot give the hook slot back


def test_someone_elses_comm_hook_is_named(group):
    ddp = DDP(_model())
    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    with pytest.raises(RuntimeError, match=r"the comm hook 'fp16_compress_hook'.*DDPInspector\(ddp, hook=your_hook\)"):
        DDPInspector(ddp)
    builtin = DDP(_model())
    builtin._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS)
    with pytest.raises(RuntimeError, match="built-in comm hook BuiltinCommHookType.FP16_COMPRESS"):
        DDPInspector(builtin)


def test_bad_hook_and_compression_arguments(group):
    with pytest.raises(TypeError, match="hook must be a DDP comm hook.*got str"):
        DDPInspector(DDP(_model()), hook="fp16")
    with pytest.raises(TypeError, match="compression must be a callable.*got float"):
        DDPInspector(DDP(_model()), compression=0.5)
    with pytest.raises(ValueError, match="max_records must be a positive int"):
        DDPInspector(DDP(_model()), max_records=0)


def test_records_steps_and_close_keeps_training_unchanged(group, tmp_path):
    model = _model()
    ddp = DDP(model)
    before = _post_hooks(model)
    insp = DDPInspector(ddp, log_dir=tmp_path / "logs")
    assert _post_hooks(model) != before
    for _ in range(2):
        _step(ddp)
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    assert insp.step == 2 and [r["step"] for r in insp.records] == [0, 1]
    assert {r["param"] for r in insp.ready_order} == {n for n, _ in model.named_parameters()}
    insp.close()
    insp.close()  # idempotent
    assert _post_hooks(model) == before
    _step(ddp)  # the comm hook now only forwards to allreduce
    assert insp.step == 2 and len(insp.records) == 2
    assert all(torch.equal(p.grad, expected[n]) for n, p in model.named_parameters())
    assert "closed" in repr(insp)


def test_dropped_inspector_removes_its_ready_hooks(group):
    model = _model()
    before = _post_hooks(model)
    DDPInspector(DDP(model))
    assert _post_hooks(model) == before


def test_max_records_keeps_the_newest(group):
    ddp = DDP(_model())
    insp = DDPInspector(ddp, max_records=2, ready_order=False)
    for _ in range(5):
        _step(ddp)
    assert [r["step"] for r in insp.records] == [3, 4] and insp.ready_order == []


def test_load_keeps_the_last_run_of_a_reused_log_dir(group, tmp_path):
    logs = tmp_path / "logs"
    for runs in (3, 2):
        ddp = DDP(_model())
        with DDPInspector(ddp, log_dir=logs):
            for _ in range(runs):
                _step(ddp)
    assert [r["step"] for r in DDPInspector.load(logs)] == [0, 1]
    assert [r["step"] for r in DDPInspector.load(logs, last_run=False)] == [0, 0, 1, 1, 2]  # both runs
    starts = [json.loads(line) for line in (logs / "rank0.jsonl").read_text().splitlines()]
    assert [s["hook"] for s in starts if s["kind"] == "start"] == ["allreduce_hook"] * 2


def test_records_selects_bucket_or_ready_records(group, tmp_path):
    ddp = DDP(_model())
    with DDPInspector(ddp, log_dir=tmp_path) as insp:
        _step(ddp)
        buckets, ready = insp.gather(), insp.gather(records="ready")
        assert {r["kind"] for r in buckets} == {"bucket"} and {r["kind"] for r in ready} == {"ready"}
    both = DDPInspector.load(tmp_path, records=None)
    assert DDPInspector.load(tmp_path) == buckets and DDPInspector.load(tmp_path, records="ready") == ready
    assert sorted(both, key=lambda r: r["kind"]) == sorted(buckets + ready, key=lambda r: r["kind"])
    assert load_records(tmp_path, records=None) == both


def test_load_errors_name_the_log_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="no log dir"):
        DDPInspector.load(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"holds no rank<N>.jsonl files"):
        DDPInspector.load(tmp_path)
    (tmp_path / "rank0.jsonl").write_text(json.dumps(BUCKET) + '\n{"kind": "buck')  # killed mid-write
    assert DDPInspector.load(tmp_path) == [BUCKET]
    with pytest.raises(ValueError, match="records must be one of"):
        DDPInspector.load(tmp_path, records="buckets")
    (tmp_path / "rank1.jsonl").write_text("not json\n")
    with pytest.raises(ValueError, match=r"rank1.jsonl:1 is not a JSON line"):
        DDPInspector.load(tmp_path)


BUCKET = {
    "kind": "bucket",
    "rank": 0,
    "step": 0,
    "bucket": 0,
    "numel": 4,
    "bytes": 16,
    "params": ["fc.weight"],
    "seconds": 0.001,
    "grad_norm": 1.5,
    "reduced_norm": 1.5,
    "compression_error": None,
}
READY = {"kind": "ready", "rank": 1, "step": 0, "order": 0, "param": "fc.weight", "seconds": 0.0}


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("[1, 2]", "a JSON list, not an object"),
        ('"bucket"', "a JSON str, not an object"),
        (json.dumps({**BUCKET, "kind": "buckets"}), "its kind is 'buckets', not one of 'start', 'bucket', 'ready'"),
        (json.dumps({k: v for k, v in BUCKET.items() if k != "step"}), "a 'bucket' line without 'step'"),
        (json.dumps({k: v for k, v in READY.items() if k != "param"}), "a 'ready' line without 'param'"),
        (json.dumps({**BUCKET, "step": "3"}), "'step' is \"3\", not an integer"),
        (json.dumps({**BUCKET, "rank": True}), "'rank' is true, not an integer"),
        (json.dumps({**BUCKET, "seconds": None}), "'seconds' is null, not a number"),
        (json.dumps({**BUCKET, "params": [1]}), "'params' holds something other than parameter names"),
        (json.dumps({**BUCKET, "compression_error": "high"}), "'compression_error' is \"high\", not a number or null"),
        ('{"kind": "start"}', "a 'start' line without 'rank'"),
        ("[" * 100_000 + "]" * 100_000, "nests JSON too deeply to read"),
        ('{"kind": "bucket", "step": 0', "is not a JSON line"),
    ],
)
def test_a_malformed_log_line_is_a_value_error_naming_the_file_and_line(tmp_path, line, what):
    good = "\n".join(json.dumps(r) for r in (BUCKET, READY)) + "\n"
    (tmp_path / "rank0.jsonl").write_text(good)
    (tmp_path / "rank1.jsonl").write_text(good + line + "\n" + good)  # the bad file among good ones, line 3
    with pytest.raises(ValueError, match=re.escape(what)) as caught:
        DDPInspector.load(tmp_path, records=None)
    assert str(caught.value).startswith(f"{tmp_path / 'rank1.jsonl'}:3 ")


def test_a_log_file_that_is_not_utf8_text_is_named(tmp_path):
    (tmp_path / "rank0.jsonl").write_bytes(json.dumps(BUCKET).encode() + b"\n\xff\xfe\x00garbage\n")
    with pytest.raises(ValueError, match=r"rank0\.jsonl:2 is not UTF-8 text"):
        DDPInspector.load(tmp_path)


def test_well_formed_logs_with_nan_norms_and_extra_fields_load(tmp_path):
    lines = [
        {"kind": "start", "rank": 0, "time": 1.0, "host": "h"},
        {**BUCKET, "grad_norm": float("nan"), "extra": [1]},
    ]
    (tmp_path / "rank0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (loaded,) = DDPInspector.load(tmp_path)
    assert loaded["extra"] == [1] and loaded["grad_norm"] != loaded["grad_norm"]  # NaN, as written


def test_compression_round_trips_of_torch_hooks():
    grad = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    fp16 = round_trip_for(default_hooks.fp16_compress_hook)
    assert torch.equal(fp16(grad), grad.half().float())
    assert torch.equal(round_trip_for(default_hooks.bf16_compress_hook)(grad), grad.bfloat16().float())
    wrapped = default_hooks.fp16_compress_wrapper(default_hooks.allreduce_hook)
    assert torch.equal(round_trip_for(wrapped)(grad), grad.half().float())
    assert round_trip_for(default_hooks.allreduce_hook) is None


def test_relative_error_leaves_the_gradient_alone():
    grad = torch.randn(100, generator=torch.Generator().manual_seed(0))
    kept = grad.clone()
    assert relative_error(grad, lambda g: g).item() == 0.0  # an identity round trip returns its input
    assert torch.equal(grad, kept)
    expected = (grad.half().float() - grad).norm() / grad.norm()
    assert relative_error(grad, round_trip_for(default_hooks.fp16_compress_hook)).item() == pytest.approx(
        expected.item()
    )
    assert relative_error(torch.zeros(4), round_trip_for(default_hooks.fp16_compress_hook)).item() == 0.0
    big = torch.randn(2 * CHUNK + 5, generator=torch.Generator().manual_seed(1))  # three slices
    expected = (big.bfloat16().float() - big).norm() / big.norm()
    got = relative_error(big, round_trip_for(default_hooks.bf16_compress_hook)).item()
    assert got == pytest.approx(expected.item(), rel=1e-5)  # float32 sums in another order


def test_custom_compression_round_trip_is_recorded(group):
    ddp = DDP(_model())
    insp = DDPInspector(ddp, compression=lambda g: g.bfloat16().float())
    _step(ddp)
    assert 0 < insp.records[0]["compression_error"] < 1e-2


def test_explorer_watch_ddp_and_close_removes_its_hooks(group):
    from hookwidgets.core import Explorer

    model = _model()
    ddp = DDP(model)
    before = _post_hooks(model)
    ex = Explorer(ddp)
    insp = ex.watch_ddp()
    _step(ddp)
    assert insp.step == 1 and insp.records[0]["params"]
    assert _post_hooks(model) != before
    ex.close()
    assert _post_hooks(model) == before and "closed" in repr(insp)


def test_explorer_watch_ddp_on_a_plain_model_says_how_to_wrap():
    from hookwidgets.core import Explorer

    with Explorer(_model()) as ex, pytest.raises(TypeError, match=r"got Sequential.*HookExplorer\(ddp\)"):
        ex.watch_ddp()


def test_distributed_layer_imports_no_display_code():
    import subprocess
    import sys

    code = (
        "import sys, hookwidgets.distributed, hookwidgets.core.monitors.optim, hookwidgets.core.monitors.packaging\n"
        "print(','.join(m for m in ('matplotlib', 'ipywidgets', 'anywidget', 'IPython') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


class _Bucket:
    """The parts of a dist.GradBucket the recorder reads."""

    def buffer(self) -> torch.Tensor:
        return torch.ones(4)

    def is_last(self) -> bool:
        return True

    def index(self) -> int:
        return 0

    def parameters(self) -> list[torch.Tensor]:
        return []


def test_pending_bucket_callback_holds_no_process_group():
    # The backend frees a finished bucket's callback on its own thread: if the callback kept the
    # hook's state (the process group) alive, the group could be destroyed on its worker thread,
    # which aborts the process. So a pending callback must not keep the state alive.
    import weakref

    from hookwidgets.distributed.recorder import Recorder

    class State:
        pass

    state, pending = State(), torch.futures.Future()
    recorder = Recorder(lambda s, b: pending, state, {}, 0, None, 10, None)
    chained = recorder.bucket_ready(_Bucket())
    state_ref = weakref.ref(state)
    del state, recorder
    gc.collect()
    assert state_ref() is None
    pending.set_result(torch.full((4,), 2.0))
    assert chained.wait().tolist() == [2.0] * 4
