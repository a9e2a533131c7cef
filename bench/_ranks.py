"""Two gloo ranks for a bench script: a free loopback address, the spawned processes, rank 0's reply, all reaped."""

from __future__ import annotations

import argparse
import socket
import tempfile
from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp
from _protocol import MIN_PAIRS, add_arguments


def free_address() -> str:
    """A TCP rendezvous address on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def spawn_ranks(
    rank_main: Callable[..., None], *args: Any, world: int = 2, prefix: str = "bench-", timeout: float = 1800
) -> tuple[Any, ...]:
    """``rank_main(rank, address, *args, log_dir, results)`` on ``world`` spawned ranks; what rank 0 put on
    ``results`` after its ``"ok"`` (a RuntimeError with its text otherwise). Every process is reaped."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix=prefix) as log_dir:
        address = free_address()
        procs = [ctx.Process(target=rank_main, args=(r, address, *args, log_dir, results)) for r in range(world)]
        for proc in procs:
            proc.start()
        try:
            reply = results.get(timeout=timeout)
        finally:
            for proc in procs:
                proc.join(timeout=30)
                if proc.is_alive():
                    proc.terminate()
                    proc.join()
    if reply[0] != "ok":
        raise RuntimeError(reply[1])
    return tuple(reply[1:])


def parse_arguments(doc: str) -> argparse.Namespace:
    """The protocol's flags for a script whose ranks share the machine's cores: one thread a rank by default."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    add_arguments(parser)
    parser.set_defaults(threads=1)
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs must be at least {MIN_PAIRS} (the protocol of bench/_protocol.py)")
    return args
