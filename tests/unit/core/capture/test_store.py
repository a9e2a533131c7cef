import threading

import pytest
import torch

from hookwidgets.core.capture.store import CaptureStore, Record, make_record


def _record(target="a", kind="forward", step=1, numel=256):
    return make_record(target, kind, step, 0, {"output": torch.zeros(numel)}, copy=False)


def test_oldest_records_are_evicted_to_stay_under_the_budget():
    store = CaptureStore(memory_budget=3 * 1024)  # three records of 1 KiB
    for step in range(1, 6):
        store.add(_record(step=step))
    assert [r.step for r in store["a"]["forward"]] == [3, 4, 5]
    assert store.evicted == 2
    assert store.nbytes == 3 * 1024
    assert store.summary() == {
        "records": 3,
        "nbytes": 3072,
        "budget": 3072,
        "evicted": 2,
        "evicting": True,
        "short_steps": [],
    }


def test_a_full_store_says_it_is_evicting_until_it_is_cleared():
    store = CaptureStore(memory_budget=2 * 1024)
    store.add(_record(step=1))
    store.add(_record(step=2))
    assert (store.evicting, store.evicted) == (False, 0)  # full to the byte, nothing lost yet
    store.add(_record(step=3))
    assert (store.evicting, store.evicted) == (True, 1)
    store.clear("a")
    store.add(_record(step=4))
    assert (store.evicting, store.evicted) == (False, 1)  # room again: the count stays, the store is not full
    store.add(_record("b", step=4))
    store.add(_record("b", step=5))
    assert store.evicting and store.summary()["evicting"]
    store.clear()
    assert not store.evicting and not store.summary()["evicting"]


def test_eviction_crosses_targets_and_kinds_in_arrival_order():
    store = CaptureStore(memory_budget=2 * 1024)
    store.add(_record("a", "forward"))
    store.add(_record("b", "grad"))
    store.add(_record("a", "grad"))
    assert sorted(store) == ["a", "b"]
    assert list(store["a"]) == ["grad"]
    assert store.latest("a", "forward") is None
    assert store.latest("b", "grad").path == "b"


def test_a_record_larger_than_the_budget_is_kept_alone():
    store = CaptureStore(memory_budget=100)
    store.add(_record(numel=1000))
    store.add(_record(numel=1000, step=2))
    assert [r.step for r in store["a"]["forward"]] == [2]


def test_unknown_path_lists_the_paths_with_captures():
    store = CaptureStore()
    store.add(_record("layer1"))
    with pytest.raises(KeyError, match="no captures for path 'layer2'; paths with captures: 'layer1'"):
        store["layer2"]


def test_clear_one_target_or_all():
    store = CaptureStore()
    store.add(_record("a"))
    store.add(_record("b"))
    store.clear("a")
    assert list(store) == ["b"] and store.nbytes == 1024
    store.clear()
    assert len(store) == 0 and store.nbytes == 0


def test_budget_must_be_positive():
    with pytest.raises(ValueError, match="memory_budget must be a positive number of bytes"):
        CaptureStore(memory_budget=0)


def test_concurrent_adds_keep_the_byte_count_exact():
    store = CaptureStore(memory_budget=50 * 1024)

    def add_many(name):
        for step in range(200):
            store.add(_record(name, step=step))

    threads = [threading.Thread(target=add_many, args=(n,)) for n in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = sum(len(records) for target in store for records in store[target].values())
    assert kept == 50 and store.evicted == 750 and store.nbytes == 50 * 1024


def test_offload_must_be_none_or_cpu():
    with pytest.raises(ValueError, match="offload must be None or 'cpu'"):
        CaptureStore(offload="disk")


def test_cpu_offload_keeps_cpu_tensors_as_references():
    store = CaptureStore(offload="cpu")
    t = torch.ones(3)
    store.add(make_record("a", "forward", 1, 0, {"output": t}, copy=False, offload="cpu"))
    kept = store.latest("a", "forward").tensor
    assert kept.data_ptr() == t.data_ptr()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the offload copy needs a CUDA device")
def test_cuda_captures_land_in_pinned_host_memory():
    from torch import nn

    from hookwidgets.core import Explorer

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).cuda()
    with Explorer(model, offload="cpu") as ex:
        ex.attach("0", ["forward", "grad"])
        x = torch.randn(4, 8, device="cuda")
        out = ex.run(x, target=lambda o: o.sum())
        record = ex.captures["0"]["forward"][0]
        grad = ex.captures["0"]["grad"][0]
    assert record.tensor.device.type == "cpu" and record.tensor.is_pinned()
    torch.testing.assert_close(record.tensor, model[0](x).detach().cpu())
    assert grad.tensor.device.type == "cpu" and out.device.type == "cuda"


def test_records_without_tensor_bytes_are_bounded_by_count():
    from hookwidgets.core import Explorer

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    ex = Explorer(model, example_inputs=torch.randn(2, 4))
    ex.captures.max_records = 40
    ex.attach("", ["global_forward", "global_grad"], action="stats")  # 8 stats records per step, 0 tensor bytes
    for _ in range(30):
        model(torch.randn(2, 4)).sum().backward()
    summary = ex.captures.summary()
    assert summary == {
        "records": 40,
        "nbytes": 0,
        "budget": ex.captures.memory_budget,
        "evicted": 200,
        "evicting": True,  # the count cap is full too
        "short_steps": [],
    }
    assert min(r.step for r in ex.captures.snapshot()[0]) == 26  # the newest five steps, whole
    ex.close()


def test_max_records_must_be_positive():
    with pytest.raises(ValueError, match="max_records must be a positive number of records, got 0"):
        CaptureStore(max_records=0)


def test_none_entries_are_left_out_of_a_record():
    grad = torch.ones(2, 3)
    rec = make_record("gru", "grad", 1, 0, {"grad_output.0": None, "grad_output.1": grad}, copy=True)
    assert list(rec.tensors) == ["grad_output.1"] and torch.equal(rec.tensor, grad)
    assert rec.nbytes == 2 * 3 * 4 and not rec.stale
    empty = make_record("gru", "grad", 1, 0, {"grad_output.0": None}, copy=False)
    assert (empty.tensors, empty.tensor, empty.nbytes, empty.stale) == ({}, None, 0, False)


def test_inference_tensors_have_no_version_counter_and_are_checked_by_their_fingerprint():
    plain = torch.zeros(3)
    with torch.inference_mode():
        frozen = torch.zeros(2)
    # torch raises on an inference tensor's _version: neither making the record nor reading stale may ask for it
    rec = make_record("m", "forward", 1, 0, {"output.0": frozen, "output.1": plain}, copy=False)
    assert torch.equal(rec.tensors["output.0"], frozen) and not rec.stale and rec.verified
    with torch.inference_mode():
        frozen.add_(1)  # no version counter: only the fingerprint sees this change
    assert rec.stale and torch.equal(rec.tensors["output.0"], torch.ones(2))
    other = make_record("m", "forward", 1, 0, {"output": plain}, copy=False)
    plain.add_(1)
    assert other.stale
    with torch.inference_mode():
        copied = make_record("m", "forward", 1, 0, {"output": torch.ones(2)}, copy=True)
    assert copied.tensor.is_inference() and not copied.stale and torch.equal(copied.tensor, torch.ones(2))


class Repeat(torch.nn.Module):
    """Its output is its input repeated ``times`` along the last dim: as many bytes as a test needs, no weights."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.repeat(1, self.times)


MIB = 2**20


def test_stats_records_are_never_evicted_by_the_byte_budget():
    from hookwidgets.core import Explorer

    # one 1 MiB capture per step beside stats on every step, a budget just over 1 MiB
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Repeat(MIB // 16))
    ex = Explorer(model, memory_budget=MIB + 4096)
    ex.attach("0", "forward", "stats")
    ex.attach("1", "forward")
    for _ in range(50):
        model(torch.randn(1, 4))
    assert [r.step for r in ex.captures["0"]["forward"]] == list(range(1, 51))
    assert [r.step for r in ex.captures["1"]["forward"]] == [50]
    assert ex.captures.nbytes == MIB and ex.captures.evicted == 49
    records, counts = ex.captures.snapshot()
    assert [(r.path, r.step) for r in records[-3:]] == [("0", 49), ("0", 50), ("1", 50)]  # arrival order
    assert counts["records"] == 51
    ex.close()


def _stats_record(target="a", kind="forward", step=1):
    return Record(target, kind, step, 0, {}, stats={"mean": 0.0})


def test_a_record_with_bytes_leaves_from_the_middle_of_its_history_and_is_released():
    import gc
    import weakref

    store = CaptureStore(memory_budget=2 * 1024)
    store.add(_record(step=1))
    store.add(_stats_record(step=2))  # the same (target, kind), action switched to stats and back
    store.add(_record(step=3))
    watched = weakref.ref(store.latest("a", "forward").tensor)
    store.add(_stats_record(step=4))
    store.add(_record(step=5))  # over the budget: step 1 goes
    store.add(_record(step=6))  # step 3 goes, from between the two stats records
    assert [(r.step, r.nbytes) for r in store["a"]["forward"]] == [(2, 0), (4, 0), (5, 1024), (6, 1024)]
    assert [r.step for r in store.snapshot()[0]] == [2, 4, 5, 6]
    gc.collect()
    assert watched() is None  # the store let go of the evicted record's tensor at once
    assert store.latest("a", "forward").step == 6


def test_the_record_count_cap_evicts_the_oldest_records_with_or_without_bytes():
    store = CaptureStore(max_records=3)
    store.add(_stats_record(step=1))
    store.add(_record(step=2))
    store.add(_stats_record(step=3))
    store.add(_record(step=4))
    assert [r.step for r in store.snapshot()[0]] == [2, 3, 4]
    store.add(_stats_record(step=5))
    assert [r.step for r in store.snapshot()[0]] == [3, 4, 5]
    assert store.evicted == 2 and store.nbytes == 1024


def test_clear_of_one_target_keeps_the_others_in_arrival_order():
    store = CaptureStore(memory_budget=2 * 1024)
    store.add(_stats_record("a", step=1))
    store.add(_record("b", step=1))
    store.add(_record("a", step=2))
    store.add(_stats_record("b", step=2))
    store.clear("a")
    assert [(r.path, r.step) for r in store.snapshot()[0]] == [("b", 1), ("b", 2)]
    store.add(_record("c", step=3))
    store.add(_record("c", step=4))  # the budget still counts b's bytes: b's capture goes first
    assert [(r.path, r.step) for r in store.snapshot()[0]] == [("b", 2), ("c", 3), ("c", 4)]


def test_a_budget_smaller_than_one_step_is_said_on_the_hook_in_the_summary_and_by_the_key_error():
    from hookwidgets.core import Explorer

    model = torch.nn.Sequential(Repeat(MIB // 16), torch.nn.Tanh())  # two 1 MiB outputs a step
    ex = Explorer(model, memory_budget=MIB + 4096)
    ex.attach("0", "forward")
    ex.attach("1", "forward")
    model(torch.randn(1, 4))
    first, second = ex.hooks
    expected = (
        "the budget (1.0 MiB) holds less than one step: step 1 lost 1 'forward' record (call 0) before it "
        "ended; raise memory_budget"
    )
    assert first.fired == 1 and first.note == expected
    assert second.note is None
    short = [{"path": "0", "kind": "forward", "note": expected}]
    assert ex.captures.summary()["short_steps"] == short
    with pytest.raises(KeyError) as caught:
        ex.captures["0"]
    assert caught.value.args[0] == (
        f"no captures for path '0': its records were all evicted: {expected}; paths with captures: '1'"
    )
    ex.close()


def test_the_short_step_note_stays_beside_another_note_and_goes_once_a_later_step_is_kept_whole():
    from hookwidgets.core import Explorer

    model = torch.nn.Sequential(Repeat(MIB // 16), torch.nn.Tanh())
    ex = Explorer(model, memory_budget=MIB + 4096)
    info = ex.attach("0", "forward")
    ex.attach("1", "forward")
    info.note = "another note"
    model(torch.randn(1, 4))
    model(torch.randn(1, 4))
    (hook, _) = ex.hooks
    assert hook.note.startswith("another note; the budget (1.0 MiB) holds less than one step: step 2 lost")
    ex.captures.memory_budget = 4 * MIB
    model(torch.randn(1, 4))
    assert ex.hooks[0].note == "another note"
    assert ex.captures.summary()["short_steps"] == []
    assert [r.step for r in ex.captures["0"]["forward"]] == [3]
    ex.close()


def test_a_global_hook_is_told_which_modules_lost_records_of_their_step():
    from hookwidgets.core import Explorer

    model = torch.nn.Sequential(Repeat(MIB // 16), torch.nn.Tanh(), torch.nn.Identity())
    ex = Explorer(model, memory_budget=MIB + 4096)
    ex.attach("", "global_forward")
    model(torch.randn(1, 4))
    (hook,) = ex.hooks
    assert hook.note == (
        "the budget (1.0 MiB) holds less than one step: step 1 lost 1 'global_forward' record (call 0) before it "
        "ended; raise memory_budget (on '0' and 2 more modules)"
    )
    ex.close()


def test_evictions_across_steps_are_not_a_short_step():
    from hookwidgets.core import Explorer

    model = torch.nn.Sequential(Repeat(MIB // 16))
    ex = Explorer(model, memory_budget=MIB + 4096)
    ex.attach("0", "forward")
    for _ in range(3):
        model(torch.randn(1, 4))
    assert ex.hooks[0].note is None and ex.captures.summary()["short_steps"] == []
    ex.captures.clear()
    with pytest.raises(KeyError, match=r"^\"no captures for path '0'; paths with captures: none yet"):
        ex.captures["0"]
    ex.close()


def test_a_global_hook_names_the_model_itself_among_the_modules_that_lost_records():
    from hookwidgets.core import Explorer

    model = torch.nn.Sequential(torch.nn.Identity())
    ex = Explorer(model, memory_budget=MIB + 4096)
    ex.attach("", "global_forward")
    ex.captures.add(make_record("", "global_forward", 7, 0, {"output": torch.zeros(MIB // 4)}, copy=False))
    ex.captures.add(make_record("0", "global_forward", 7, 0, {"output": torch.zeros(MIB // 4)}, copy=False))
    (hook,) = ex.hooks
    assert hook.note.endswith("raise memory_budget (on '(model)')")
    ex.close()
