"""Two-process FSDP2 training of a small GPT-2 with a run log per rank, for notebooks/fsdp-run-log.ipynb.

``train_rank`` runs in each spawned process (a notebook's own functions cannot be pickled to ``spawn``
children, so it lives here); ``ddp_demo.wait`` joins the processes with a deadline. Needs ``transformers``.
"""

from __future__ import annotations

import datetime
import gc
from typing import Any

import torch
import torch.distributed as dist

VOCAB, WIDTH, LAYERS, HEADS, LENGTH, BATCH = 96, 64, 4, 4, 32, 4
SHARDED_WEIGHT = "transformer.h.0.attn.c_attn.weight"
"""A parameter whose gradient statistics the demo logs: FSDP2 shards it, and its statistics are the full tensor's."""
COLLECTIVE_TIMEOUT = datetime.timedelta(seconds=60)
"""A rank left waiting in a collective (its peer died) fails after this instead of gloo's 30 minutes."""


def small_gpt2() -> Any:
    """A 4-layer GPT-2 of width 64 with random weights (the same on every rank: seeded)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(  # type: ignore[call-arg]  # attn_implementation reaches PretrainedConfig through kwargs
        vocab_size=VOCAB,
        n_positions=LENGTH,
        n_embd=WIDTH,
        n_layer=LAYERS,
        n_head=HEADS,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    return GPT2LMHeadModel(config)


def batch(rank: int, step: int, nan_at: tuple[int, int] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's token ids and their input features at ``step``; a NaN in one row when ``(rank, step) == nan_at``.

    The features stand for what a data pipeline hands the model (a frozen encoder's output, say): a fixed
    table looked up by the ids, so the model learns next-token prediction from them.
    """
    ids = torch.randint(0, VOCAB, (BATCH, LENGTH), generator=torch.Generator().manual_seed(1000 * step + rank))
    table = torch.randn(VOCAB, WIDTH, generator=torch.Generator().manual_seed(7))
    features = table[ids]
    if (rank, step) == nan_at:
        features[1, LENGTH // 2] = float("nan")  # one corrupt row in this rank's shard of the batch
    return ids, features


def train_rank(
    rank: int, world: int, init_method: str, log_dir: str, steps: int = 5, nan_at: tuple[int, int] | None = (1, 2)
) -> None:
    """One rank: the GPT-2 sharded with FSDP2 over gloo, ``steps`` AdamW steps, every module's output and gradient
    statistics logged to ``log_dir`` by ``Explorer.record_to``; ``nan_at=(rank, step)`` corrupts that batch."""
    torch.set_num_threads(1)  # the ranks share the machine's cores
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT)
    try:
        _train(rank, log_dir, steps, nan_at)
        dist.barrier()  # every rank's log is complete before the notebook reads it
    finally:
        # The sharded model, gone with _train's frame, lets go of the process group here, on this thread: a group
        # freed later, on a gloo thread or at exit, can abort the process.
        gc.collect()
        dist.destroy_process_group()


def _train(rank: int, log_dir: str, steps: int, nan_at: tuple[int, int] | None) -> None:
    from torch.distributed.fsdp import fully_shard

    from ..core import Explorer

    model = small_gpt2()
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # Every rank runs these same explorer calls, in the same order: collective=True says so, and the
    # statistics of sharded tensors are then the full tensors', reduced across the ranks once per step.
    explorer = Explorer(model, collective=True)
    explorer.attach("", ["global_forward", "global_backward"], action="stats")
    explorer.attach(SHARDED_WEIGHT, "post_accumulate", action="stats")  # its gradient: a DTensor, sharded
    explorer.record_to(log_dir, every=1)
    for step in range(steps):
        ids, features = batch(rank, step, nan_at)
        loss = model(inputs_embeds=features, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    explorer.sync_stats()  # the last step's sharded statistics reduced (each earlier one's was as the next began)
    explorer.close()  # writes the last step, removes the hooks
