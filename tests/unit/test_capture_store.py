import threading

import pytest
import torch

from hookwidgets.core.capture import CaptureStore, make_record


def _record(target="a", kind="forward", step=1, numel=256):
    return make_record(target, kind, step, 0, {"output": torch.zeros(numel)}, copy=False)


def test_oldest_records_are_evicted_to_stay_under_the_budget():
    store = CaptureStore(memory_budget=3 * 1024)  # three records of 1 KiB
    for step in range(1, 6):
        store.add(_record(step=step))
    assert [r.step for r in store["a"]["forward"]] == [3, 4, 5]
    assert store.evicted == 2
    assert store.nbytes == 3 * 1024
    assert store.summary() == {"records": 3, "nbytes": 3072, "budget": 3072, "evicted": 2}


def test_eviction_crosses_targets_and_kinds_in_arrival_order():
    store = CaptureStore(memory_budget=2 * 1024)
    store.add(_record("a", "forward"))
    store.add(_record("b", "grad"))
    store.add(_record("a", "grad"))
    assert sorted(store) == ["a", "b"]
    assert list(store["a"]) == ["grad"]
    assert store.latest("a", "forward") is None
    assert store.latest("b", "grad").target == "b"


def test_a_record_larger_than_the_budget_is_kept_alone():
    store = CaptureStore(memory_budget=100)
    store.add(_record(numel=1000))
    store.add(_record(numel=1000, step=2))
    assert [r.step for r in store["a"]["forward"]] == [2]


def test_unknown_target_lists_the_targets_with_captures():
    store = CaptureStore()
    store.add(_record("layer1"))
    with pytest.raises(KeyError, match="no captures for target 'layer2'; targets with captures: 'layer1'"):
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
    assert ex.captures.summary() == {"records": 40, "nbytes": 0, "budget": ex.captures.memory_budget, "evicted": 200}
    assert min(r.step for r in ex.captures._order) == 26  # the newest five steps, whole
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


def test_inference_tensors_are_kept_and_never_stale_while_the_others_still_can_be():
    plain = torch.zeros(3)
    with torch.inference_mode():
        frozen = torch.zeros(2)
    rec = make_record("m", "forward", 1, 0, {"output.0": frozen, "output.1": plain}, copy=False)
    assert torch.equal(rec.tensors["output.0"], frozen) and not rec.stale
    with torch.inference_mode():
        frozen.add_(1)  # no version counter: this change cannot be seen
    assert not rec.stale and torch.equal(rec.tensors["output.0"], torch.ones(2))
    plain.add_(1)
    assert rec.stale
    with torch.inference_mode():
        copied = make_record("m", "forward", 1, 0, {"output": torch.ones(2)}, copy=True)
    assert copied.tensor.is_inference() and not copied.stale and torch.equal(copied.tensor, torch.ones(2))
