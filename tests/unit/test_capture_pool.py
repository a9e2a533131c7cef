"""Captures kept past their step move out of the model's heap into the store's own memory (capture_pool.py)."""

import gc
import mmap
import threading
import weakref

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.capture import pool as capture_pool
from hookwidgets.core.capture import store as capture
from hookwidgets.core.capture.pool import MAX_BYTES, MIN_BYTES, PAGE, CapturePool, movable, shared, size_class
from hookwidgets.core.capture.store import CaptureStore, make_record

BIG = MIN_BYTES // 4 * 2  # float32 elements: twice the smallest tensor that moves


class FaultCounter:
    """Stands in for the OS's count of minor page faults: each read adds ``per_read`` (a heap faulting
    that much every step), so whether a step's captures move does not hang on this test process's malloc."""

    def __init__(self, per_read: int | None) -> None:
        self.total, self.per_read = 0, per_read

    def __call__(self) -> int | None:
        if self.per_read is None:
            return None
        self.total += self.per_read
        return self.total


@pytest.fixture(autouse=True)
def faulting_heap(monkeypatch):
    """Every step faults in 1 GiB: moves happen at each step's begin (see test_the_move_policy_*)."""
    monkeypatch.setattr(capture, "minor_faults", FaultCounter(2**30 // PAGE))


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, BIG // 32), nn.Tanh(), nn.Linear(BIG // 32, 3))


def _capturing(model: nn.Module, target: str = "0") -> Explorer:
    """An explorer capturing ``target``'s output."""
    ex = Explorer(model)
    ex.attach(target, "forward")
    return ex


def _train_step(model: nn.Module, x: torch.Tensor) -> None:
    model(x).sum().backward()


def _kept_record(numel: int = BIG) -> tuple[CaptureStore, object]:
    store = CaptureStore()
    record = make_record("a", "forward", 1, 0, {"output": torch.randn(numel)}, copy=False)
    store.add(record)
    return store, record


def test_a_capture_kept_past_its_step_leaves_the_model_memory_with_its_values():
    model = _model()
    ex = _capturing(model)
    x = torch.randn(32, 8)
    _train_step(model, x)
    first = ex.captures["0"]["forward"][0]
    where, expected = first.tensor.data_ptr(), first.tensor.clone()
    _train_step(model, torch.randn(32, 8))  # the next step begins: step 1's graph is gone
    moved = ex.captures["0"]["forward"][0].tensor
    assert moved.data_ptr() != where
    assert moved.data_ptr() % PAGE == 0  # a block of the pool's own mapping
    assert torch.equal(moved, expected) and moved.shape == (32, BIG // 32) and moved.dtype == torch.float32
    assert not first.stale and not moved.requires_grad
    ex.close()


def test_a_tensor_someone_else_still_holds_stays_the_same_object():
    model = _model()
    ex = _capturing(model)
    _train_step(model, torch.randn(32, 8))
    held = ex.captures["0"]["forward"][0].tensor  # the user keeps the captured tensor
    _train_step(model, torch.randn(32, 8))
    assert ex.captures["0"]["forward"][0].tensor is held
    del held
    _train_step(model, torch.randn(32, 8))  # tried again at the next step, now held by the store alone
    assert ex.captures["0"]["forward"][0].tensor.data_ptr() % PAGE == 0
    ex.close()


def test_a_graph_kept_for_a_later_backward_keeps_its_saved_capture_in_place():
    model = nn.Sequential(nn.Linear(8, BIG // 32), nn.Tanh())  # tanh saves its output: the captured tensor
    ex = _capturing(model, "1")
    loss1 = model(torch.randn(32, 8)).sum()  # not backwarded yet: its graph holds tanh's output
    where = ex.captures["1"]["forward"][0].tensor.data_ptr()
    model(torch.randn(32, 8))
    assert ex.captures["1"]["forward"][0].tensor.data_ptr() == where
    loss1.backward()
    del loss1
    model(torch.randn(32, 8))
    assert ex.captures["1"]["forward"][0].tensor.data_ptr() != where
    ex.close()


def test_a_capture_changed_in_place_before_the_move_stays_stale():
    model = nn.Sequential(nn.Linear(8, BIG // 32), nn.ReLU(inplace=True))
    ex = _capturing(model)  # relu_ then changes the captured output
    with torch.no_grad():
        model(torch.randn(32, 8))
        first = ex.captures["0"]["forward"][0]
        where = first.tensor.data_ptr()
        model(torch.randn(32, 8))
    assert first.stale
    assert first.tensor.data_ptr() == where  # still the model's tensor, which relu_ changed
    assert first.tensor.min() >= 0
    ex.close()


def test_inference_captures_stay_and_a_step_in_inference_mode_moves_the_last_one_as_a_plain_tensor():
    model = _model()
    ex = _capturing(model)
    _train_step(model, torch.randn(32, 8))
    with torch.inference_mode():
        model(torch.randn(32, 8))  # step 1's capture moves here, inside inference mode
        first, second = ex.captures["0"]["forward"]
        where = second.tensor.data_ptr()
        model(torch.randn(32, 8))
    assert first.tensor.data_ptr() % PAGE == 0 and not first.tensor.is_inference()
    assert not first.stale
    assert second.tensor.is_inference() and second.tensor.data_ptr() == where  # no version counter: kept
    assert not second.stale
    ex.close()


def test_records_waiting_to_move_do_not_outlive_their_eviction():
    store = CaptureStore(memory_budget=BIG * 4)  # one record fits
    first = make_record("a", "forward", 1, 0, {"output": torch.randn(BIG)}, copy=False)
    gone = weakref.ref(first.tensor)  # the record's own detached tensor
    store.add(first)
    del first
    store.add(make_record("a", "forward", 2, 0, {"output": torch.randn(BIG)}, copy=False))  # no step began
    gc.collect()
    assert gone() is None  # evicted, and not kept alive by the list of records waiting to move
    assert store.compact() == 1  # the second record


@pytest.mark.parametrize(
    ("pages_a_step", "moves"),
    [
        (0, False),  # a loop reusing its heap: the captures stay references, which cost it nothing
        (BIG * 4 // PAGE - 1, False),  # faulted in less than the step captured
        (BIG * 4 // PAGE, True),  # faulted in as much: the heap is churning
        (None, True),  # an OS that does not count faults: always moved
    ],
)
def test_the_move_policy_follows_the_page_faults_of_the_last_step(monkeypatch, pages_a_step, moves):
    monkeypatch.setattr(capture, "minor_faults", FaultCounter(pages_a_step))
    model = _model()
    ex = _capturing(model)  # captures BIG floats a step
    _train_step(model, torch.randn(32, 8))
    where = ex.captures["0"]["forward"][0].tensor.data_ptr()
    _train_step(model, torch.randn(32, 8))
    assert (ex.captures["0"]["forward"][0].tensor.data_ptr() != where) is moves
    assert ex.captures.compact() == (1 if moves else 2)  # an explicit compact() moves whatever it can, step 2 too
    ex.close()


def test_the_pools_own_page_faults_do_not_keep_captures_moving(monkeypatch):
    counter = FaultCounter(0)
    monkeypatch.setattr(capture, "minor_faults", counter)
    monkeypatch.setattr(capture_pool, "SHARED", CapturePool(0))  # every move maps a new block
    model = _model()
    ex = _capturing(model)
    counter.per_read = BIG * 4 // PAGE  # the first step faults in as much as it captures: it moves
    _train_step(model, torch.randn(32, 8))
    _train_step(model, torch.randn(32, 8))
    assert ex.captures["0"]["forward"][0].tensor.data_ptr() % PAGE == 0
    where = ex.captures["0"]["forward"][1].tensor.data_ptr()
    _train_step(model, torch.randn(32, 8))  # those faults were the new block's own: the loop's heap is quiet
    assert ex.captures["0"]["forward"][1].tensor.data_ptr() == where
    ex.close()


def test_a_view_of_a_moved_capture_keeps_its_block_after_eviction():
    store, record = _kept_record()
    store._pool = CapturePool(keep_bytes=2**30)  # a pool of the test's own, whose free blocks it can count
    expected = record.tensor.clone()
    assert store.compact() == 1
    view = record.tensor[:10]
    store.clear()
    del record
    gc.collect()
    assert store._pool.free_bytes == 0  # the block still backs the user's view: never handed out again
    store.add(make_record("b", "forward", 2, 0, {"output": torch.randn(BIG)}, copy=False))
    store.compact()
    assert torch.equal(view, expected[:10])
    del view
    gc.collect()
    assert store._pool.free_bytes == size_class(BIG * 4)


def test_an_evicted_capture_gives_its_block_to_the_next_one():
    pool = CapturePool(keep_bytes=2**30)
    t = pool.move(torch.randn(BIG))
    block = t.data_ptr()
    del t
    assert pool.free_bytes == size_class(BIG * 4)
    again = pool.move(torch.ones(BIG - 100))  # a little smaller: the same size class
    assert again.data_ptr() == block and pool.free_bytes == 0
    assert torch.equal(again, torch.ones(BIG - 100))


def test_free_blocks_are_kept_only_up_to_keep_bytes():
    pool = CapturePool(keep_bytes=size_class(BIG * 4))
    first, second = pool.move(torch.randn(BIG)), pool.move(torch.randn(BIG))
    del first, second
    assert pool.free_bytes == size_class(BIG * 4)  # the second block was unmapped
    pool.clear()
    assert pool.free_bytes == 0


def test_size_classes_share_blocks_within_an_eighth():
    assert size_class(1) == PAGE
    for n in (MIN_BYTES, 100_000, 3_000_000, 4 * 2**20, 123_456_789):
        c = size_class(n)
        assert n <= c <= n * 1.125 + PAGE and c % PAGE == 0
    assert size_class(4 * 2**20 - 1000) == size_class(4 * 2**20)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(MIN_BYTES // 4 - 1),  # small: stays with malloc
        lambda: torch.empty(MAX_BYTES + 1, dtype=torch.uint8),  # malloc maps it apart from the heap already
        lambda: torch.randn(BIG * 2)[::2],  # not contiguous
        lambda: torch.randn(BIG, dtype=torch.complex64).conj(),  # a lazy conjugate
        lambda: nn.Parameter(torch.randn(BIG)),  # a subclass
    ],
)
def test_tensors_that_cannot_move_unchanged_are_left_alone(make):
    assert not movable(make())


def test_a_tensor_whose_memory_is_shared_does_not_move():
    t = torch.randn(BIG)
    assert movable(t) and not shared(t)
    view = t[1:]
    assert shared(t)  # the view holds its storage
    del view
    assert not shared(t)
    x = torch.randn(BIG, requires_grad=True)
    y = x * 2
    z = y.sin()  # sin keeps y itself for its backward
    assert shared(y)
    del z
    assert shared(y.detach())  # y and its detached alias share the storage
    out = x.exp()  # exp keeps its output's memory for its backward
    assert shared(out.detach())


def test_a_store_that_cannot_map_more_memory_keeps_references(monkeypatch):
    store, record = _kept_record()
    store._pool = CapturePool(keep_bytes=0)  # no free block to hand out: a new one must be mapped
    where = record.tensor.data_ptr()

    def refuse(*args, **kwargs):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(mmap, "mmap", refuse)
    assert store.compact() == 0
    assert record.tensor.data_ptr() == where


def test_a_block_can_come_back_while_the_pool_is_busy_on_the_same_thread():
    # A garbage collection set off by an allocation inside the pool's locked code can free a moved tensor.
    pool = CapturePool(keep_bytes=2**30)
    moved = pool.move(torch.randn(BIG))

    def free_inside_the_lock() -> None:
        nonlocal moved
        with pool._lock:
            moved = None  # the block comes back here, on the thread holding the lock

    worker = threading.Thread(target=free_inside_the_lock, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert pool.free_bytes == size_class(BIG * 4)


def test_a_pool_maps_at_most_max_blocks(monkeypatch):
    monkeypatch.setattr(capture_pool, "MAX_BLOCKS", 2)
    pool = CapturePool(keep_bytes=2**30)
    kept = [pool.move(torch.randn(BIG)), pool.move(torch.randn(BIG))]
    assert pool.move(torch.randn(BIG)) is None and pool.blocks == 2
    kept.pop()
    assert pool.move(torch.randn(BIG)) is not None  # a freed block is handed out again
    pool.clear()
    assert pool.blocks == 1  # the one still in use


def test_a_new_store_reuses_the_blocks_a_closed_one_gave_back(monkeypatch):
    monkeypatch.setattr(capture_pool, "SHARED", CapturePool(capture_pool.KEEP_FREE))  # no other test's blocks
    model = _model()

    def blocks_of_one_explorer() -> set[int]:
        ex = _capturing(model)
        for _ in range(3):  # the first two steps' captures move
            _train_step(model, torch.randn(32, 8))
        blocks = {r.tensor.data_ptr() for r in ex.captures["0"]["forward"][:2]}
        ex.close()
        del ex
        gc.collect()
        return blocks

    first = blocks_of_one_explorer()
    assert capture_pool.SHARED.free_bytes == 2 * size_class(BIG * 4)  # given back when the store went
    assert blocks_of_one_explorer() == first  # the second explorer's captures moved into the same blocks


def test_offloading_stores_do_not_move_captures():
    store = CaptureStore(offload="cpu")
    record = make_record("a", "forward", 1, 0, {"output": torch.randn(BIG)}, copy=False, offload="cpu")
    store.add(record)
    assert store.compact() == 0
