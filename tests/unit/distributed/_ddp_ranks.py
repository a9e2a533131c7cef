"""Run a function on 2 gloo ranks in spawned processes, with a deadline; every process is reaped."""

from __future__ import annotations

import gc
import queue
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _entry(rank: int, world: int, init_file: str, fn: Callable, results: Any, kwargs: dict) -> None:
    torch.set_num_threads(1)  # two ranks on a shared 2-core machine
    try:
        dist.init_process_group("gloo", init_method=init_file, rank=rank, world_size=world)
        try:
            results.put((rank, "ok", fn(rank, world, **kwargs)))
        finally:
            gc.collect()  # DDP models in cycles let go of the group here, not on a gloo thread or at exit
            dist.destroy_process_group()
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def run_ranks(
    fn: Callable, tmp_path: Path, world: int = 2, timeout: float = 90.0, tcp: bool = True, **kwargs: Any
) -> list[Any]:
    """``fn(rank, world, **kwargs)`` on ``world`` gloo ranks (file:// rendezvous in ``tmp_path``); results by rank."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    init_file = _free_tcp() if tcp else f"file://{tmp_path / 'rendezvous'}"
    procs = [ctx.Process(target=_entry, args=(r, world, init_file, fn, results, kwargs)) for r in range(world)]
    for proc in procs:
        proc.start()
    got: dict[int, Any] = {}
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < world and not errors:
            try:
                rank, status, value = results.get(timeout=0.2)
            except queue.Empty:
                errors += _dead(procs, got)  # a rank that died before reporting fails the run now
                if not errors and time.monotonic() > deadline:
                    errors.append(f"ranks {sorted(set(range(world)) - set(got))} gave no result within {timeout:.0f} s")
                continue
            if status == "error":
                errors.append(f"rank {rank}:\n{value}")  # the other rank may wait forever in a collective
            got[rank] = value
    finally:
        _reap(procs, patience=10 if not errors else 1)
        results.close()
    if errors:
        raise AssertionError("\n".join(errors))
    return [got[r] for r in range(world)]


def _free_tcp() -> str:
    """A rendezvous address on a free loopback port (bound to port 0, then released for the ranks)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def _dead(procs: list, got: dict[int, Any]) -> list[str]:
    return [f"rank {r} exited with code {p.exitcode}" for r, p in enumerate(procs) if r not in got and p.exitcode]


def _reap(procs: list, patience: float) -> None:
    """Join every process; terminate, then kill, one that is still running (e.g. stuck in a collective)."""
    for proc in procs:
        proc.join(timeout=patience)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()
