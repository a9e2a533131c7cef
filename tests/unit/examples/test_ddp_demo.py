"""ddp_demo.wait: joins spawned ranks with a deadline, re-raises a rank's error, leaves no process behind.

The demo's training itself runs in notebooks/distributed.ipynb (tests/notebooks), with its asserts.
"""

from __future__ import annotations

import time

import pytest
import torch.multiprocessing as mp

from hookwidgets.examples import ddp_demo


def _sleep(rank: int, seconds: float) -> None:
    time.sleep(seconds)


def _fail(rank: int) -> None:
    raise ValueError(f"rank {rank} failed on purpose")


def _start(fn, args: tuple, nprocs: int = 1):
    """Spawned like the notebook's ranks (one process each here: spawning costs seconds on a busy machine)."""
    return mp.start_processes(fn, args=args, nprocs=nprocs, join=False, start_method="spawn")


def test_a_rank_that_raises_fails_wait_with_its_traceback():
    context = _start(_fail, ())
    with pytest.raises(mp.ProcessRaisedException, match=r"ValueError: rank 0 failed on purpose"):
        ddp_demo.wait(context, timeout=120)
    for process in context.processes:
        process.join(timeout=10)
    assert not any(process.is_alive() for process in context.processes)


def test_ranks_past_the_deadline_are_terminated_and_named():
    context = _start(_sleep, (600.0,))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"ranks \[0\] were still running after 1 s and were terminated"):
        ddp_demo.wait(context, timeout=1)
    assert time.monotonic() - started < 30
    assert not any(process.is_alive() for process in context.processes)
