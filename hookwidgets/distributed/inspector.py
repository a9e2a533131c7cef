"""DDPInspector: per-bucket, per-step records of a DistributedDataParallel model's gradient communication."""

from __future__ import annotations

import os
import socket
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel
from torch.utils.hooks import RemovableHandle

from .checks import INSPECTED, require_ddp, require_no_comm_hook, require_process_group
from .compression import RoundTrip, round_trip_for
from .logs import RECORDS, RankLog, load_records, sort_records
from .recorder import Recorder, comm_hook

DEFAULT_MAX_RECORDS = 100_000


class DDPInspector:
    """Wraps a DDP model's gradient communication in a recording comm hook, on every rank.

    ``hook=None`` wraps torch's default (allreduce, then divide by the world size); any comm hook,
    e.g. ``fp16_compress_hook``, can be given instead, with ``hook_state`` (default: the model's
    process group). Records per bucket per step: rank, step, bucket, numel, bytes, params,
    grad_norm (local, before communication), reduced_norm, seconds, compression_error. Post-accumulate
    hooks record the order gradients become ready (``ready_order``). With ``log_dir`` every rank
    appends its records there as JSON lines; ``DDPInspector.load(log_dir)`` reads all ranks back.
    """

    def __init__(
        self,
        ddp_model: DistributedDataParallel,
        hook: Callable | None = None,
        log_dir: str | os.PathLike | None = None,
        *,
        hook_state: Any = None,
        compression: RoundTrip | None = None,
        ready_order: bool = True,
        max_records: int = DEFAULT_MAX_RECORDS,
    ) -> None:
        ddp = require_ddp(ddp_model)
        require_process_group()
        require_no_comm_hook(ddp)
        if hook is not None and not callable(hook):
            raise TypeError(f"hook must be a DDP comm hook hook(state, bucket) -> Future, got {type(hook).__name__}")
        if compression is not None and not callable(compression):
            raise TypeError(
                f"compression must be a callable g -> decompress(compress(g)), got {type(compression).__name__}"
            )
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
            raise ValueError(f"max_records must be a positive int (records kept in memory), got {max_records!r}")
        self.ddp = ddp
        """The ``DistributedDataParallel`` model."""
        self.hook = hook or allreduce_hook
        """The comm hook it wraps (torch's ``allreduce_hook`` by default)."""
        self.rank = dist.get_rank()
        """This process's rank."""
        self.world_size = dist.get_world_size(ddp.process_group)
        """The number of ranks in the model's process group."""
        names = {id(p): name for name, p in ddp.module.named_parameters()}
        log = None
        if log_dir is not None:
            log = RankLog(log_dir, self.rank, self._header())
        self._recorder = Recorder(
            self.hook,
            ddp.process_group if hook_state is None else hook_state,
            names,
            self.rank,
            compression or round_trip_for(self.hook),
            max_records,
            log,
        )
        try:
            ddp.register_comm_hook(self._recorder, comm_hook)
        except BaseException:
            if log is not None:
                log.close()  # no inspector came of it: leave no open file behind
            raise
        INSPECTED.add(ddp)
        handles = self._ready_hooks(ddp) if ready_order else []
        # The finalizer removes the gradient-ready hooks and closes the log if the inspector is dropped unclosed.
        self._finalizer = weakref.finalize(self, _close, self._recorder, handles)

    def _header(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "hook": getattr(self.hook, "__qualname__", repr(self.hook)),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }

    def _ready_hooks(self, ddp: DistributedDataParallel) -> list[RemovableHandle]:
        """Post-accumulate-grad hooks on every trainable parameter (the Horovod pattern)."""
        recorder = self._recorder
        handles = []
        for name, param in ddp.module.named_parameters():
            if param.requires_grad:

                def ready(p: torch.Tensor, name: str = name) -> None:
                    recorder.grad_ready(name)

                handles.append(param.register_post_accumulate_grad_hook(ready))
        return handles

    @property
    def records(self) -> list[dict[str, Any]]:
        """This rank's bucket records, oldest first (the newest ``max_records`` are kept)."""
        return self._recorder.snapshot("bucket")

    @property
    def ready_order(self) -> list[dict[str, Any]]:
        """This rank's gradient-ready records: step, order, param, seconds since the step's first gradient."""
        return self._recorder.snapshot("ready")

    @property
    def step(self) -> int:
        """How many synchronised backward passes the comm hook has seen."""
        return self._recorder.step

    @property
    def log_error(self) -> str | None:
        """Why writing the log failed, if it did (training went on without it)."""
        return self._recorder.log.error if self._recorder.log is not None else None

    def gather(self, dst: int | None = 0, records: str = "bucket") -> list[dict[str, Any]] | None:
        """Every rank's ``records`` (``bucket`` or ``ready``) on rank ``dst`` (None on the others), or on every rank
        with ``dst=None``. A collective: every rank of the model's process group must call it, at the same point.
        """
        if records not in RECORDS:
            raise ValueError(f"records must be one of {RECORDS}, got {records!r}")
        require_process_group("DDPInspector.gather()")
        local = self.records if records == "bucket" else self.ready_order
        group = self.ddp.process_group
        every: list[Any] | None
        if dst is None:
            every = [None] * self.world_size
            dist.all_gather_object(every, local, group=group)
        else:
            every = [None] * self.world_size if self.rank == dst else None
            dist.gather_object(local, every, dst=dst, group=group)
            if every is None:
                return None
        return sort_records([r for rank_records in every for r in rank_records])

    @staticmethod
    def load(log_dir: str | os.PathLike, records: str | None = "bucket", *, last_run: bool = True) -> list[dict]:
        """Every rank's ``records`` (``bucket``, ``ready`` or None for both) from ``log_dir``, as ``gather`` gives
        them."""
        return load_records(log_dir, records, last_run=last_run)

    def close(self) -> None:
        """Stop recording, remove the gradient-ready hooks and close the log.

        DDP cannot remove a comm hook: after ``close()`` it still calls the thin wrapper, which only
        forwards to the wrapped hook, so training goes on unchanged; the model cannot get another hook.
        """
        self._finalizer()

    def __enter__(self) -> DDPInspector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if not self._finalizer.alive else f"step {self.step}, {len(self._recorder.records)} records"
        hook = getattr(self.hook, "__qualname__", "hook")
        return f"<DDPInspector rank {self.rank}/{self.world_size} wrapping {hook}: {state}>"


def _close(recorder: Recorder, handles: list[RemovableHandle]) -> None:
    recorder.active = False
    for handle in handles:
        handle.remove()
    if recorder.log is not None:
        recorder.log.close()
