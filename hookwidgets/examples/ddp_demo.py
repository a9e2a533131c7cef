"""Two-process DDP training of the digits CNN under a DDPInspector, for notebooks/distributed.ipynb.

``train_rank`` runs in each spawned process (a notebook's own functions cannot be pickled to
``spawn`` children, so it lives here); ``wait`` joins the processes with a deadline.
"""

from __future__ import annotations

import datetime
import gc
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.multiprocessing import ProcessContext
from torch.nn.parallel import DistributedDataParallel as DDP

from ..distributed import DDPInspector
from .digits import DigitsCNN, load_digits

BUCKET_CAP_MB = 0.02
"""Small buckets (about 20 KB) so the CNN's 19k gradients travel in several of them."""
BATCH = 32
COLLECTIVE_TIMEOUT = datetime.timedelta(seconds=60)
"""A rank left waiting in a collective (its peer died) fails after this instead of gloo's 30 minutes."""


def train_rank(rank: int, world: int, init_method: str, log_dir: str, steps: int = 6) -> None:
    """One rank: DDP over gloo, the digits CNN trained ``steps`` SGD steps on this rank's shard, twice.

    The first model's buckets go through torch's allreduce, the second's through fp16 compression;
    each under a DDPInspector logging to ``<log_dir>/allreduce`` and ``<log_dir>/fp16``. The final
    weights of each are saved as ``<log_dir>/<mode>/weights-rank<N>.pt`` so the notebook can compare ranks.
    """
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook

    torch.set_num_threads(1)  # the ranks share the machine's cores
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT)
    try:
        images, labels = load_digits()
        shard_x, shard_y = images[rank:1500:world], labels[rank:1500:world]  # each rank its own digits
        for mode, hook in (("allreduce", None), ("fp16", fp16_compress_hook)):
            torch.manual_seed(rank)  # different initial weights per rank: DDP broadcasts rank 0's
            _train(shard_x, shard_y, hook, Path(log_dir) / mode, rank, steps)
        dist.barrier()  # every rank's logs are complete before the notebook reads them
    finally:
        # Whatever still holds the process group (a DDP model in a reference cycle, an inspector) is
        # released here, on this thread, before the group is torn down: a group freed later, on one
        # of gloo's own threads or at interpreter exit, can abort the process.
        gc.collect()
        dist.destroy_process_group()


def _train(x: torch.Tensor, y: torch.Tensor, hook: Any, folder: Path, rank: int, steps: int) -> None:
    """``steps`` SGD steps of a fresh DDP digits CNN under a DDPInspector logging to ``folder``; its weights saved."""
    ddp = DDP(DigitsCNN(), bucket_cap_mb=BUCKET_CAP_MB)
    inspector = DDPInspector(ddp, hook=hook, log_dir=folder)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        batch = slice(step * BATCH, (step + 1) * BATCH)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(ddp(x[batch]), y[batch]).backward()
        optimizer.step()
    inspector.close()
    torch.save(ddp.module.state_dict(), folder / f"weights-rank{rank}.pt")


def wait(context: ProcessContext, timeout: float = 120.0) -> float:
    """Join the processes of ``torch.multiprocessing.start_processes(..., join=False)``; seconds taken.

    A rank that raised re-raises here with its traceback (torch terminates the others); past
    ``timeout`` the processes are terminated and a TimeoutError names the ranks still running.
    """
    start = time.monotonic()
    while not context.join(timeout=0.5):
        if time.monotonic() - start > timeout:
            alive = [rank for rank, process in enumerate(context.processes) if process.is_alive()]
            for process in context.processes:
                process.terminate()
            for process in context.processes:
                process.join(timeout=5)
                if process.is_alive():
                    process.kill()
            raise TimeoutError(f"ranks {alive} were still running after {timeout:.0f} s and were terminated")
    return time.monotonic() - start


def final_weights(log_dir: str | Path, mode: str, world: int) -> list[dict[str, Any]]:
    """Each rank's saved final ``state_dict`` of the ``mode`` run (``allreduce`` or ``fp16``), by rank."""
    return [torch.load(Path(log_dir) / mode / f"weights-rank{r}.pt", weights_only=True) for r in range(world)]
