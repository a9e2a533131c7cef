"""What statistics plus a run log cost an FSDP2 training step: 2 gloo ranks on the CPU.

Run: ``.venv/bin/python bench/fsdp_step.py [--pairs N] [--threads T]`` (T threads per rank).
Each rank holds copies of a GPT-2-shaped model (6 layers, width 128), each sharded with FSDP2
(``fully_shard`` per block and at the root): A plain, B under an explorer made with ``collective=True``
and ``record_to`` writing this rank's log, with stats on each layer's output and gradient, or on every
module's and every parameter's gradient (``SIDES``). A step is forward + backward (all-gathers, reduce-scatters) +
AdamW. The pairs run inside the ranks in the same order on both; rank 0's timings are reported. The
collectives each step issues are counted on both sides, by wrapping torch.distributed's functions.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from _protocol import (
    MARKDOWN_HEADER,
    Comparison,
    compare,
    machine,
    progress_to_stderr,
    revision,
    set_threads,
)
from _ranks import parse_arguments, spawn_ranks

from hookwidgets.core import Explorer

WORLD = 2
BAR = 1.15
LAYERS, WIDTH, HEADS, VOCAB, BATCH, LENGTH = 6, 128, 4, 512, 8, 64
COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_single", "all_gather_object",
    "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "broadcast", "reduce", "gather",
    "scatter", "all_to_all", "all_to_all_single", "barrier", "send", "recv", "isend", "irecv",
)  # fmt: skip


def make_model() -> torch.nn.Module:
    """A GPT-2 of 6 layers, width 128, with random weights (the same on both ranks)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=LENGTH, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    return GPT2LMHeadModel(config)


def sharded() -> torch.nn.Module:
    from torch.distributed.fsdp import fully_shard

    model = make_model()
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    return model


class Stepper:
    """One AdamW training step of ``model`` on ``ids`` per call."""

    def __init__(self, model: torch.nn.Module, ids: torch.Tensor) -> None:
        self.model, self.ids = model, ids
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def __call__(self) -> None:
        self.model(self.ids, labels=self.ids).loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


@contextlib.contextmanager
def counted(counts: Counter[str]) -> Iterator[None]:
    """Count the calls of torch.distributed's collectives (as ``dist.X`` and ``distributed_c10d.X``) inside."""
    from torch.distributed import distributed_c10d

    saved: list[tuple[Any, str, Any]] = []
    for name in COLLECTIVES:
        for owner in (dist, distributed_c10d):
            original = getattr(owner, name, None)
            if original is None:
                continue

            def wrapper(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
                counts[_name] += 1
                return _original(*args, **kwargs)

            saved.append((owner, name, original))
            setattr(owner, name, wrapper)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def collectives_per_step(step: Stepper, steps: int = 4) -> tuple[float, dict[str, int]]:
    """The collectives ``steps`` calls of ``step`` issue, per step, and by name (the first call is left out)."""
    step()
    counts: Counter[str] = Counter()
    with counted(counts):
        for _ in range(steps):
            step()
    return sum(counts.values()) / steps, dict(counts)


def watch(model: torch.nn.Module, everything: bool, log_dir: str) -> Explorer:
    """The explorer of side B: stats on each block's output and gradient, or on every module's and every parameter's
    gradient (DTensors, reduced across ranks); both with ``record_to``."""
    explorer = Explorer(model, collective=True)
    if everything:
        explorer.attach("", ["global_forward", "global_backward"], action="stats")
        for name, _ in model.named_parameters():
            explorer.attach(name, "post_accumulate", action="stats")
    else:
        for i in range(LAYERS):
            explorer.attach(f"transformer.h.{i}", ["forward", "grad"], action="stats")
    explorer.record_to(log_dir, every=1)
    return explorer


SIDES = (
    ("FSDP2 step, stats on each layer's output and gradient + record_to vs plain", False, BAR),
    ("FSDP2 step, stats on every module's output and gradient and every parameter's gradient + record_to vs plain",
     True, None),
)  # fmt: skip


def rank_main(rank: int, address: str, pairs: int, threads: int, log_dir: str, results: Any) -> None:
    """The comparisons on this rank; rank 0 sends its Comparisons and the collective counts back."""
    set_threads(threads)
    dist.init_process_group("gloo", init_method=address, rank=rank, world_size=WORLD)
    try:
        ids = torch.randint(0, VOCAB, (BATCH, LENGTH), generator=torch.Generator().manual_seed(rank))
        plain = Stepper(sharded(), ids)
        rows = []
        for i, (name, everything, bar) in enumerate(SIDES):
            watched_model = sharded()
            explorer = watch(watched_model, everything, f"{log_dir}/{i}")
            watched = Stepper(watched_model, ids)
            a_count, a_names = collectives_per_step(plain)
            b_count, b_names = collectives_per_step(watched)
            result = compare(name, plain, watched, pairs=pairs, show=rank == 0, bar=bar)
            explorer.sync_stats()
            explorer.close()
            extra = {key: b_names.get(key, 0) - a_names.get(key, 0) for key in set(a_names) | set(b_names)}
            rows.append((result, (a_count, b_count, extra)))
        dist.barrier()
        if rank == 0:
            results.put(("ok", rows, machine()))
    except BaseException as exc:
        results.put(("error", f"rank {rank}: {type(exc).__name__}: {exc}", None))
        raise
    finally:
        dist.destroy_process_group()


def run(pairs: int, threads: int) -> tuple[list[tuple[Comparison, tuple[float, float, dict[str, int]]]], str]:
    """Spawn the ranks and return what rank 0 measured (``_ranks.spawn_ranks``)."""
    rows, where = spawn_ranks(rank_main, pairs, threads, world=WORLD, prefix="fsdp-bench-")
    return rows, where


def main() -> None:
    args = parse_arguments(__doc__)
    started = time.perf_counter()
    command = " ".join([".venv/bin/python", "bench/fsdp_step.py", *sys.argv[1:]])
    params = sum(p.numel() for p in make_model().parameters())
    model = (
        f"GPT-2 shape, {LAYERS} layers, width {WIDTH}, {params:,} parameters, batch {BATCH} × {LENGTH} tokens per"
        f" rank; FSDP2 per block and root; {WORLD} gloo ranks"
    )
    with progress_to_stderr():
        print(f"$ {command}\nhookwidgets at {revision()}\nmodel: {model}")
        rows, where = run(args.pairs, args.threads)
        print(f"took {time.perf_counter() - started:.0f} s")
    date = time.strftime("%Y-%m-%d %H:%M %Z")
    lines = [
        "## FSDP2 training step with statistics and a run log (issue 34)",
        "",
        f"`{command}` — {date}, rank 0: {where}; hookwidgets at `{revision()}`.",
        "",
        f"Model: {model}. A: a plain FSDP2 step (forward, backward, AdamW). B: the same step under"
        " `Explorer(model, collective=True)` with `record_to(log_dir, every=1)` and `stats` on each of the 6 layers'"
        " output and gradient (`forward`, `grad`: the issue's figure), or on every module's output and gradient"
        " (`global_forward`, `global_backward`) and every parameter's gradient (`post_accumulate`: DTensors, whose"
        " statistics are reduced across the ranks once per step).",
        "",
        MARKDOWN_HEADER,
        *(result.markdown_row() for result, _ in rows),
        "",
        "| extra collectives per step | A (plain) | B (explorer) | extra | bar | verdict |",
        "|---|---|---|---|---|---|",
        *(
            f"| {result.name.split(' + ')[0].removeprefix('FSDP2 step, ')} | {a:g} | {b:g} | {b - a:g} | ≤ 1 |"
            f" {'PASS' if b - a <= 1 else 'OVER'} |"
            for result, (a, b, _) in rows
        ),
        "",
        *(
            f"- {result.name.split(' + ')[0].removeprefix('FSDP2 step, ')}: extra collectives by name: "
            + (", ".join(f"{key} {count:+d}" for key, count in sorted(extra.items()) if count) or "none")
            for result, (_, _, extra) in rows
        ),
        "- Counted over 4 steps after one, as calls of `torch.distributed`'s functions on rank 0.",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
