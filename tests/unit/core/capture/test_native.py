"""The fused C kernel of the stats action: built here, equal to the torch reductions, and safely optional."""

import importlib
import logging
import math
import os
import signal
import subprocess
import threading
import time

import pytest
import torch

import hookwidgets.core.capture.stats as stats_module
from hookwidgets.core.capture import native
from hookwidgets.core.capture.stats import STAT_KEYS, tensor_stats

REAL_RUN = subprocess.run


def torch_path_stats(t: torch.Tensor) -> dict[str, float]:
    """``tensor_stats`` with the kernel switched off: the torch reductions it replaces."""
    original = stats_module.fused_sums
    stats_module.fused_sums = lambda x: None
    try:
        return tensor_stats(t)
    finally:
        stats_module.fused_sums = original


def assert_same_stats(fused: dict, reference: dict) -> None:
    assert tuple(fused) == STAT_KEYS
    for key in STAT_KEYS:
        if isinstance(reference[key], float) and math.isnan(reference[key]):
            assert math.isnan(fused[key]), key
        elif key in ("nan", "inf", "numel", "zero_fraction", "min", "max"):
            assert fused[key] == reference[key], key  # counts and extremes are exact on both paths
        else:
            assert fused[key] == pytest.approx(reference[key], rel=2e-6, abs=1e-9), key


@pytest.fixture
def fresh_kernel_state(monkeypatch, tmp_path):
    """The loader as in a new process (its module run again), with its cache in ``tmp_path``; as in this one after."""
    monkeypatch.setenv("HOOKWIDGETS_CACHE", str(tmp_path))
    monkeypatch.delenv(native.DISABLE_ENV, raising=False)
    importlib.reload(native)
    yield tmp_path
    importlib.reload(native)  # the next use loads the kernel again, from the cache the environment names by then


def kernel_loaders() -> list[threading.Thread]:
    """The threads loading the kernel now."""
    return [thread for thread in threading.enumerate() if thread.name == "hookwidgets-stats-kernel"]


def test_the_kernel_is_built_and_loaded_in_this_environment():
    status = native.status()
    assert status.startswith("loaded from "), (
        f"the stats kernel did not load ({status}); `make compiler` installs gcc, then rerun the tests"
    )
    assert native.fused_sums(torch.ones(3)) == (3.0, 3.0, 1.0, 1.0, 3, False)


def _cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    relu = torch.relu(torch.randn(70_001, generator=g))
    signed_zeros = torch.tensor([0.0, -0.0, 1.5, -2.0, -0.0])
    nonfinite = torch.randn(5000, generator=g)
    nonfinite[[3, 1024, 4999]] = torch.tensor([math.nan, math.inf, -math.inf])
    huge = torch.full((2048,), 3e19)  # finite, but its float32 squares overflow: the exact path decides
    cases = [
        ("one element", torch.tensor([2.5])),
        ("relu output", relu),
        ("signed zeros", signed_zeros),
        ("non-finite values", nonfinite),
        ("only NaN", torch.full((40,), math.nan)),
        ("only +Inf", torch.full((33,), math.inf)),
        ("huge finite", huge),
        ("mean dominates the spread", torch.randn(10_000, generator=g) * 1e-3 + 1e3),
        ("float64", torch.randn(3001, generator=g, dtype=torch.float64) * 7 - 2),
        ("float64 with NaN", torch.tensor([1.0, math.nan, 3.0], dtype=torch.float64)),
        ("float16", torch.randn(999, generator=g).half()),
        ("int", torch.arange(-50, 51)),
        ("bool", torch.tensor([True, False, True])),
        ("non-contiguous", torch.randn(64, 33, generator=g).t()),
        ("negative view", torch._neg_view(torch.arange(10.0))),
        ("4-d activation", torch.randn(4, 8, 13, 13, generator=g)),
    ]
    # lengths around the kernel's lane (16) and block (1024) sizes
    cases += [(f"length {n}", torch.randn(n, generator=g) + 0.5) for n in (15, 16, 17, 1023, 1024, 1025, 4099)]
    return cases


@pytest.mark.parametrize(("name", "t"), _cases(), ids=[name for name, _ in _cases()])
def test_fused_stats_equal_the_torch_reductions(name, t):
    assert native.status().startswith("loaded from ")
    assert_same_stats(tensor_stats(t), torch_path_stats(t))


@pytest.fixture
def torch_threads():
    """Set torch's intra-op thread count inside a test; the count from before is put back."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def test_the_kernel_reads_large_tensors_with_several_threads_in_this_environment():
    assert native.status().endswith("large tensors are read by several threads"), native.status()


def _split_cases() -> list[torch.Tensor]:
    """Tensors long enough to be split, with the facts that must survive the split in the last part."""
    g = torch.Generator().manual_seed(1)
    activation = torch.relu(torch.randn(16, 64, 32, 32, generator=g))
    odd = torch.randn(3 * 65_536 + 777, generator=g)  # neither whole blocks nor equal parts
    odd[-1] = 99.0  # the max, in the last element of the last part
    odd[-2] = -99.0
    late_nan = torch.randn(200_000, generator=g)
    late_nan[-5] = math.nan
    late_inf = torch.randn(200_000, generator=g, dtype=torch.float64)
    late_inf[150_000] = -math.inf
    return [activation, odd, late_nan, late_inf]


@pytest.mark.parametrize("t", _split_cases(), ids=["relu activation", "odd length", "NaN late", "-Inf late (f64)"])
@pytest.mark.parametrize("threads", [2, 3, 8])
def test_a_tensor_split_over_threads_gives_the_statistics_of_one_thread(t, threads, torch_threads):
    torch_threads(1)
    alone = native.fused_sums(t)
    torch_threads(threads)
    split = native.fused_sums(t)
    assert split[2:] == alone[2:]  # min, max, nonzero count and the non-finite flag exactly
    for got, want in zip(split[:2], alone[:2], strict=True):
        assert math.isnan(got) if math.isnan(want) else got == pytest.approx(want, rel=1e-12)
    assert_same_stats(tensor_stats(t), torch_path_stats(t))


def test_threads_calling_the_split_kernel_at_once_each_get_their_own_statistics(torch_threads):
    # Hooks fire on autograd and user threads too: each caller is the master of its own OpenMP team,
    # and each thread has its own result buffer, so concurrent calls (the GIL is released) never mix.
    import threading

    torch_threads(2)
    tensors = [torch.full((300_000,), float(k)) for k in range(1, 5)]
    expected = [(300_000.0 * k, 300_000.0 * k * k, float(k), float(k), 300_000, False) for k in range(1, 5)]
    results: dict[int, list] = {k: [] for k in range(4)}

    def read(k: int) -> None:
        for _ in range(50):
            results[k].append(native.fused_sums(tensors[k]))

    workers = [threading.Thread(target=read, args=(k,)) for k in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for k in range(4):
        assert results[k] == [expected[k]] * 50


def test_the_kernel_reads_a_contiguous_tensor_of_any_shape_in_place():
    x = torch.arange(24.0).reshape(2, 3, 4)
    assert native.fused_sums(x) == native.fused_sums(x.reshape(-1)) == (276.0, 4324.0, 0.0, 23.0, 23, False)


def test_the_kernel_counts_what_the_stats_need():
    x = torch.tensor([0.0, -0.0, 2.0, -3.0, 0.5] * 1000)
    total, squares, mn, mx, nonzero, maybe_nonfinite = native.fused_sums(x)
    assert (total, squares, mn, mx, nonzero, maybe_nonfinite) == (-500.0, 13250.0, -3.0, 2.0, 3000, False)
    x[4324] = math.nan  # in place of a 0.5: NaN is not zero, so still 3000 nonzero
    assert native.fused_sums(x)[4:] == (3000, True)
    x[4000] = math.inf  # replaces a zero
    assert native.fused_sums(x)[4:] == (3001, True)


@pytest.mark.parametrize(
    "t",
    [
        torch.randn(8, 8)[:, 0],  # not contiguous
        torch.randn(16).half(),
        torch.arange(5),
        torch.empty(5, device="meta"),
        torch._neg_view(torch.randn(5)),
        torch.nn.Parameter(torch.randn(5)),  # a subclass: torch's reductions know how to read it
    ],
    ids=["strided", "float16", "int64", "meta", "negative view", "subclass"],
)
def test_the_kernel_declines_what_it_cannot_read(t):
    assert native.fused_sums(t) is None


def test_without_a_compiler_the_stats_fall_back_with_the_reason(fresh_kernel_state, monkeypatch):
    monkeypatch.setenv("CC", "false")
    assert native.fused_sums(torch.ones(4)) is None
    assert native.status().startswith("unavailable (false failed: ")
    x = torch.tensor([0.0, 1.0, 2.0, math.nan])
    assert tensor_stats(x) == {**torch_path_stats(x)}
    assert tensor_stats(x)["nan"] == 1 and tensor_stats(x)["zero_fraction"] == 0.25


def test_a_kernel_that_does_not_compile_is_logged_with_each_attempt_and_the_fallback(
    fresh_kernel_state, monkeypatch, caplog
):
    monkeypatch.setenv("CC", "false")
    caplog.set_level(logging.DEBUG, logger="hookwidgets")
    native.status()
    records = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert {name for name, _, _ in records} == {"hookwidgets.core.capture.native"}
    attempts = [m for _, level, m in records if level == "DEBUG" and m.startswith("compiling the stats kernel with")]
    assert len(attempts) == 4  # with OpenMP and clones, down to the plain kernel: each failure said
    assert records[-1][1:] == (
        "INFO",
        "the stats kernel is unavailable (false failed: exit status 1): statistics use torch reductions",
    )


def test_a_compiled_kernel_is_logged_once_then_loaded_from_the_cache_quietly(fresh_kernel_state, caplog):
    caplog.set_level(logging.DEBUG, logger="hookwidgets")
    native.status()
    compiled = [r for r in caplog.records if r.levelname == "INFO"]
    assert [r.getMessage().split(" (flags")[0] for r in compiled] == [
        f"compiled the stats kernel into {next(fresh_kernel_state.iterdir())}"
    ]
    caplog.clear()
    importlib.reload(native)  # a new process
    native.status()
    assert [r.levelname for r in caplog.records] == ["DEBUG"]
    assert caplog.records[0].getMessage().startswith(f"the stats kernel is loaded from {fresh_kernel_state}")


def test_the_switch_turns_the_kernel_off(fresh_kernel_state, monkeypatch):
    monkeypatch.setenv(native.DISABLE_ENV, "1")
    assert native.fused_sums(torch.ones(4)) is None
    assert native.status().startswith(f"disabled by {native.DISABLE_ENV}")
    assert not list(fresh_kernel_state.iterdir())  # nothing was compiled


def test_the_library_is_compiled_once_then_taken_from_the_cache(fresh_kernel_state, monkeypatch):
    assert native.status().startswith(f"loaded from {fresh_kernel_state}")
    built = sorted(fresh_kernel_state.iterdir())
    assert len(built) == 1 and built[0].suffix == ".so"  # the scratch folder is gone, the library stays
    importlib.reload(native)  # a new process

    def no_compiling(*args, **kwargs):
        raise AssertionError(f"compiled again: {args}")

    monkeypatch.setattr(subprocess, "run", no_compiling)
    assert native.status().startswith(f"loaded from {built[0]}; ")
    assert native.fused_sums(torch.arange(4.0))[:2] == (6.0, 14.0)


def test_a_library_of_another_layout_is_refused(fresh_kernel_state, monkeypatch):
    monkeypatch.setattr(native, "ABI", native.ABI + 1)
    assert native.fused_sums(torch.ones(2)) is None
    assert "of another kernel version" in native.status()


def test_attaching_a_stats_hook_compiles_the_kernel_on_a_thread_before_the_first_firing(fresh_kernel_state):
    from hookwidgets.core import Explorer

    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    with Explorer(model) as ex:
        ex.attach("0", "forward", action="capture")
        assert kernel_loaders() == [] and not list(fresh_kernel_state.iterdir())  # a capture needs no kernel
        ex.attach("0", "forward", action="stats")
        (loader,) = kernel_loaders()  # compiling on a thread of its own: attach returned meanwhile
        loader.join(native.COMPILE_TIMEOUT_S * 4)
        assert [path.suffix for path in fresh_kernel_state.iterdir()] == [".so"]
        assert native.load_in_background() is None  # loaded: nothing more to start
        assert native.status().startswith(f"loaded from {fresh_kernel_state}")
        model(torch.ones(1, 3))
        assert ex.captures["0"]["forward"][-1].stats["max"] == pytest.approx(model(torch.ones(1, 3)).max().item())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_fork_while_the_loader_compiles_leaves_the_child_a_free_lock(fresh_kernel_state, monkeypatch):
    compiling, done_forking = threading.Event(), threading.Event()
    parent = os.getpid()

    def slow_compiler(*args, **kwargs):
        if os.getpid() == parent:  # the loader thread holds the loader's lock until its compiler is done
            compiling.set()
            done_forking.wait(120)
        return REAL_RUN(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", slow_compiler)
    loader = native.load_in_background()
    try:
        assert compiling.wait(60), "the loader never ran the compiler"
        pid = os.fork()
        if pid == 0:  # the child: loads the kernel itself instead of waiting for a thread it does not have
            os._exit(0 if native.fused_sums(torch.arange(4.0))[:2] == (6.0, 14.0) else 1)
        deadline = time.monotonic() + 60
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if done[0] == 0:  # still waiting on the lock: the child would never end
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child blocked on the kernel's lock")
    finally:
        done_forking.set()
        loader.join(native.COMPILE_TIMEOUT_S * 4)
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert native.status().startswith(f"loaded from {fresh_kernel_state}")  # and the parent's loader finished
