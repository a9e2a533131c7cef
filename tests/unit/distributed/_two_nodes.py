"""The script each node's ``torch.distributed.run`` launches in the two-node test: record_to on every rank.

``python -m torch.distributed.run --nnodes=2 ... _two_nodes.py LOG_DIR``; gloo on the CPU, a NaN on rank 1 at step 2.
"""

from __future__ import annotations

import gc
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from hookwidgets.core import Explorer
from tests.unit.distributed._run_log_workers import STEPS, batch, make_model


def main(log_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        train(log_dir)
        dist.barrier()  # neither rank tears the group down while the other still uses it
    finally:
        # The DDP model, gone with train()'s frame but in reference cycles, lets go of the group here, on this thread:
        # a group freed later, on a gloo thread or at exit, can abort the process ("terminate called without an
        # active exception").
        gc.collect()
        dist.destroy_process_group()


def train(log_dir: str) -> None:
    """STEPS SGD steps of a DDP model under an explorer logging every module's statistics to ``log_dir``."""
    model = DDP(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Explorer(model) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        ex.record_to(log_dir)
        for step in range(1, STEPS + 1):
            opt.zero_grad(set_to_none=True)
            model(batch(step, dist.get_rank())).pow(2).mean().backward()
            opt.step()


if __name__ == "__main__":
    main(sys.argv[1])
