"""``ex.record_to(log_dir)``: this rank's hook records, one frame per step, in the run log (``run_format.py``).

Records come through the capture store's taps as hooks fire (any thread); they wait in memory until the step
boundary, the registry's clock beginning the next step (``RunLog.on_step``), or an explicit ``flush()``/``close()``,
and are then written as one DATA frame. A ``stats`` record's statistics are read at that boundary, so that a
reduction across ranks done at the same boundary first (sharded tensors) is what is written; a ``capture``
record's are computed from its tensor as it is added (``tensor_stats``: the tensor may be changed in place later).

A writing error (a full disk) or the size budget stops the log, never the training: said once in a warning, in
``RunLog.error``/``RunLog.full``, and, for the budget, in a NOTE frame the reader shows.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from .._warnings import RunLogWarning
from ..core.capture.recomputes import once_each
from ..core.capture.stats import tensor_stats
from ..core.capture.store import Record
from ..core.kind_table import KINDS
from . import run_format as fmt

DEFAULT_MAX_BYTES = 2**30
"""A rank's log stops growing at this many bytes (1 GiB): about 60 000 steps of stats on 300 modules, both sides."""
PHASES = {k.user_name: k.phase for k in KINDS.values()}
_STAT_NAMES = (*fmt.STATS, *fmt.COUNTS)


class _Row(NamedTuple):
    """A record waiting for its step's frame: a stats record's ``Record`` (read at the boundary) or a capture's
    statistics."""

    path: str
    kind: str
    step: int
    call: int
    recompute: bool
    stats: Any
    flags: int


def rank_identity() -> dict[str, Any]:
    """This process's rank, world size and node: from torch.distributed when it is initialized, else from the
    launcher's environment (``RANK``, ``WORLD_SIZE``, ``GROUP_RANK``/``NODE_RANK``, ``LOCAL_RANK``), else 0 of 1."""
    env = os.environ
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    else:
        rank, world = _env_int("RANK", 0) or 0, _env_int("WORLD_SIZE", 1) or 1
    node = env.get("GROUP_RANK", env.get("NODE_RANK"))
    return {
        "rank": rank,
        "world": world,
        "node_rank": int(node) if node is not None and node.isdigit() else None,
        "local_rank": _env_int("LOCAL_RANK", None),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "run_id": env.get("TORCHELASTIC_RUN_ID"),
    }


def _env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else default


def tree_shape(tree: dict[str, Any]) -> list[list[str]]:
    """The module tree's ``[path, class]`` pairs in preorder: what two ranks' trees are compared by."""
    out: list[list[str]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append([node["path"], node["cls"]])
        stack.extend(reversed(node["children"]))
    return out


def tree_hash(tree: dict[str, Any]) -> str:
    """A short hash of ``tree_shape(tree)``: ranks with equal trees name one structure file."""
    return hashlib.sha256(json.dumps(tree_shape(tree)).encode()).hexdigest()[:16]


class RunLog:
    """What ``ex.record_to(log_dir)`` returns: this rank's open run log. ``flush()`` writes the records of the step
    still open; ``close()`` (also by ``ex.close()``, ``with``, or at interpreter exit) flushes and closes the files."""

    def __init__(
        self, log_dir: str | os.PathLike[str], tree: dict[str, Any], every: int = 1, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(
                f"every= is how many steps apart records are written, a whole number from 1, got {every!r}: "
                "ex.record_to('runs/exp1', every=10) writes every tenth step"
            )
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 4096:
            raise ValueError(f"max_bytes= is this rank's log size budget in bytes, at least 4096, got {max_bytes!r}")
        folder = Path(log_dir)
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(f"record_to({str(folder)!r}): that is a file; pass a directory for the run log")
        folder.mkdir(parents=True, exist_ok=True)
        identity = rank_identity()
        self.rank: int = identity["rank"]
        """This process's rank (0 without torch.distributed)."""
        self.world: int = identity["world"]
        """The job's world size (1 without torch.distributed)."""
        self.every = every
        """Steps apart: a step whose number is a multiple of ``every`` is written."""
        self.path = folder / f"rank{self.rank}.hwlog"
        """This rank's frames; ``rank<r>.hwidx`` beside it is their index."""
        digest = tree_hash(tree)
        _write_tree(folder / f"tree-{digest}.json", tree)
        header = {
            "format": "hookwidgets run log",
            "version": fmt.VERSION,
            **identity,
            "started": time.time(),
            "every": every,
            "max_bytes": max_bytes,
            "tree": digest,
            "torch": torch.__version__,
        }
        self._writer = _Writer(self.path, header, every, max_bytes)
        self._finalizer = weakref.finalize(self, self._writer.close)  # the last step is written at exit too

    def on_step(self, step: int) -> None:
        """The registry's clock began ``step``: write the records of the steps before it (one frame)."""
        self._writer.on_step(step)

    def tap(self, record: Record) -> None:
        """Take one record as the capture store keeps it (any thread; never raises into the hook)."""
        self._writer.tap(record)

    def flush(self) -> None:
        """Write the records not written yet (the step still open), as a frame of its own."""
        self._writer.flush(time.time())

    def close(self) -> None:
        """Flush, note the log closed, and close the files; safe to call again."""
        self._finalizer()

    @property
    def error(self) -> str | None:
        """Why writing stopped (an OSError's text, or a record that could not be written), or None."""
        return self._writer.error

    @property
    def full(self) -> bool:
        """True once the size budget stopped the log."""
        return self._writer.full

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._writer.closed

    @property
    def nbytes(self) -> int:
        """Bytes written to this rank's frames so far."""
        return self._writer.nbytes

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("full" if self.full else "open")
        return f"<RunLog rank {self.rank} of {self.world} at {str(self.path)!r}: {self.nbytes} bytes, {state}>"


def _write_tree(path: Path, tree: dict[str, Any]) -> None:
    """The structure file, once: a rank that finds it (another rank wrote the same tree) leaves it."""
    if path.exists():
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(tree), encoding="utf-8")
    os.replace(tmp, path)  # whole or absent for a reader, whichever rank wins


class _Writer:
    """The files and the rows waiting for the step boundary (no reference to the RunLog, for its finalizer)."""

    def __init__(self, path: Path, header: dict[str, Any], every: int, max_bytes: int) -> None:
        self.every, self.max_bytes = every, max_bytes
        self.error: str | None = None
        self.full = self.closed = False
        self.nbytes = 0
        self._lock = threading.Lock()
        self._pending: list[_Row] = []
        self._keys: dict[tuple[str, str, int], int] = {}
        self._began: dict[int, float] = {}  # step -> its start (Unix time), for the steps not written yet
        self._data = open(path, "wb", buffering=0)  # noqa: SIM115  # held open across steps; one write per frame
        self._index = open(path.with_suffix(".hwidx"), "wb", buffering=0)  # noqa: SIM115
        self._index.write(fmt.INDEX_MAGIC)
        self._write(fmt.HEADER, fmt.json_frame(fmt.HEADER, header))

    def tap(self, record: Record) -> None:
        if record.step % self.every or self.closed or self.full:
            return
        try:
            flags = fmt.RECOMPUTE if record.recompute else 0
            stats: Any = record  # a stats record: read at the boundary (a reduction across ranks may refine it)
            primary = record.tensor
            if primary is not None:  # a capture: its statistics now, before anything changes the tensor in place
                stats = None if primary.is_meta else tensor_stats(primary)
                flags |= fmt.MAGNITUDE if primary.is_complex() else 0
            row = _Row(record.path, record.kind, record.step, record.call, record.recompute, stats, flags)
            with self._lock:  # a backward thread's record never lands in a batch being written
                self._pending.append(row)
        except Exception as exc:  # a log must never break the user's forward or backward
            self._fail(f"a record of {record.kind!r} on {record.path!r} could not be logged: {exc!r}")

    def on_step(self, step: int) -> None:
        now = time.time()
        self.flush(now)
        self._began[step] = now

    def flush(self, now: float) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            if not pending or self.closed or self.full or self.error:
                return
            try:
                self._flush(pending, now)
            except Exception as exc:
                self._fail(f"writing {self._data.name} failed: {exc!r}")

    def _flush(self, pending: list[_Row], now: float) -> None:
        pending = once_each(pending)  # a forward a checkpoint recomputed is one forward
        keys = self._keys
        new = [key for key in dict.fromkeys((row.path, row.kind, row.call) for row in pending) if key not in keys]
        if new:
            first = len(keys)
            keys.update((key, first + k) for k, key in enumerate(new))
            names = [[path, kind, PHASES.get(kind, "forward"), call] for path, kind, call in new]
            if not self._write(fmt.NAMES, fmt.json_frame(fmt.NAMES, {"first": first, "keys": names})):
                return
        n = len(pending)
        values = np.full((len(_STAT_NAMES), n), np.nan)
        flags = np.zeros(n, np.int64)
        for k, (*_, stats, flag) in enumerate(pending):
            if isinstance(stats, Record):
                stats = stats.stats
                flag |= fmt.MAGNITUDE if stats is not None and stats.get("magnitude") else 0
            if stats is None:
                values[6:, k] = 0  # no statistics: counts of 0, NaN values
                flag |= fmt.NO_STATS
            else:
                values[:, k] = [stats[name] for name in _STAT_NAMES]
                flag |= fmt.LOCAL if str(stats.get("scope", "")).startswith("local") else 0
            flags[k] = flag
        steps = np.array([row.step for row in pending], np.int64)
        step, min_step = int(steps.max()), int(steps.min())
        columns: dict[str, np.ndarray] = {"key": np.array([keys[row.path, row.kind, row.call] for row in pending])}
        if min_step != step:
            columns["step"] = steps
        columns["flags"] = flags
        columns.update(zip(_STAT_NAMES, values, strict=True))
        began = self._began.pop(step, math.nan)
        for old in [s for s in self._began if s < step]:
            del self._began[old]
        wall = now - began if math.isfinite(began) else math.nan
        payload, frame_flags = fmt.data_payload(step, began, wall, columns)
        entry = {"flags": frame_flags, "step": step, "min_step": min_step, "rows": n, "began": began, "wall": wall}
        self._write(fmt.DATA, fmt.frame(fmt.DATA, payload), nonfinite=fmt.nonfinite_row(columns, step), **entry)

    def _write(self, kind: int, frame: bytes, **entry: Any) -> bool:
        """Append ``frame`` and its index entry (data first: an entry always points at a whole frame); False once the
        size budget is reached, which writes a NOTE frame instead and stops the log."""
        if kind != fmt.NOTE and self.nbytes + len(frame) > self.max_bytes:
            self.full = True
            note = {"stopped": "max_bytes", "max_bytes": self.max_bytes, "step": entry.get("step", -1)}
            self._write(fmt.NOTE, fmt.json_frame(fmt.NOTE, note))
            warnings.warn(
                f"the run log {self._data.name} reached its size budget of {self.max_bytes} bytes and stopped at step "
                f"{entry.get('step', '?')}: pass record_to(..., max_bytes=...) a larger budget, or every= to write "
                "fewer steps",
                RunLogWarning,
                stacklevel=2,
            )
            return False
        offset = self.nbytes
        self._data.write(frame)
        self.nbytes += len(frame)
        self._index.write(fmt.index_entry(offset, len(frame), kind, **entry))
        return True

    def _fail(self, text: str) -> None:
        if self.error is None:
            self.error = text
            warnings.warn(f"{text}; the run log stops here, training goes on", RunLogWarning, stacklevel=3)

    def close(self) -> None:
        if self.closed:
            return
        self.flush(time.time())
        with self._lock:
            self.closed = True
            try:
                if self.error is None:
                    self._write(fmt.NOTE, fmt.json_frame(fmt.NOTE, {"closed": True}))
            except OSError as exc:
                self.error = f"closing {self._data.name} failed: {exc!r}"
            finally:
                self._data.close()
                self._index.close()
