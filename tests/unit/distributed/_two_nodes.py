"""The script each node's ``torch.distributed.run`` launches in the two-node test: record_to on every rank.

``python -m torch.distributed.run --nnodes=2 ... _two_nodes.py LOG_DIR``; gloo on the CPU, a NaN on rank 1 at step 2.
"""

from __future__ import annotations

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
        model = DDP(make_model())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with Explorer(model) as ex:
            ex.attach("", ["global_forward", "global_grad"], action="stats")
            ex.record_to(log_dir)
            for step in range(1, STEPS + 1):
                opt.zero_grad(set_to_none=True)
                model(batch(step, dist.get_rank())).pow(2).mean().backward()
                opt.step()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
