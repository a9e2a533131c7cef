"""Records of hook firings and the byte-bounded store that keeps them."""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from ..display import quoted
from . import fingerprint
from .short_steps import ShortSteps, describe, format_bytes

DEFAULT_MEMORY_BUDGET = 256 * 2**20
MAX_RECORDS = 100_000
"""Records kept at most, whatever their bytes: stats and tensor-less records hold no tensor bytes, but
each still costs ~0.7 KB of Python objects, and stats on every layer add ~100 of them per step."""


class Generation(NamedTuple):
    """Where a step stands in a generation: one call of a method of the model (transformers' ``generate()``) that
    called the model several times, each call a step."""

    call: int
    """Which generation: the explorer's, numbered 1, 2, … as they come."""
    index: int  # type: ignore[assignment]  # a field shadowing tuple.index, as NamedTuple allows
    """The decode index: 0 for the prompt step, k for the k-th forward after it (the one fed the k-th new token)."""


@dataclass
class Record:
    """One hook firing: the tensors it saw (detached, ordered by name) and where it came from."""

    path: str
    """Where it fired: the hook's path."""
    kind: str
    """The kind of the hook that fired."""
    step: int
    """The forward it belongs to (a backward belongs to the step whose forward built its graph)."""
    call: int
    """0, 1, … for a module called several times in one step, in the order its forward firings come
    (``forward_pre`` as calls begin; ``forward``, ``grad``, and so the backward kinds, as they finish: a module
    calling itself numbers its innermost call 0): the forward call the firing belongs to, for backward kinds too,
    whichever thread runs the backward (a backward reaches a module's later calls first)."""
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    """Ordered name → detached tensor: ``output``, ``output.1``, ``output.logits`` (a dict key or dataclass field),
    ``args.0``, ``grad_output.0``, ``grad_input.0``, …; a None gradient is left out. The model's own tensor
    (detached), for as long as the store keeps the record."""
    stats: dict[str, float] | None = None
    """For the ``stats`` action: ``mean``, ``std``, ``min``, ``max``, ``norm`` (finite values only),
    ``zero_fraction``, ``nan``, ``inf``, ``numel``, and ``magnitude: True`` for a complex tensor (its statistics
    are of its magnitude); else None."""
    recompute: bool = False
    """True for a forward firing repeated inside a backward by ``torch.utils.checkpoint`` (reentrant or not): it
    carries the ``step`` and ``call`` of the original firing and counts no new call (a forward that torch's early
    stop ends inside its call, once it has the tensors it needs, records nothing); gradients of a recomputed
    forward are no recompute."""
    generation: Generation | None = None
    """For a step of a generation (``generate()``): which generation and which decode index (0: the prompt step);
    else None. A prompt step is known as such when the next step comes: its records say it from then on."""
    scope: str | None = None
    """What ``stats`` cover when that is not the whole tensor seen: for a DTensor, ``"local shard r of n"`` (this
    rank's shard only), ``"full tensor (reduced over n ranks)"`` once reduced across ranks, or why a Partial one
    cannot be; None for a plain tensor."""
    _versions: dict[str, int] = field(default_factory=dict, repr=False)
    _prints: dict[str, fingerprint.Print] = field(default_factory=dict, repr=False)  # see fingerprint.take
    _copy_done: Any = field(default=None, repr=False)  # a CUDA event while an offload copy is in flight
    _kept: bool = field(default=True, repr=False)  # False once the store evicted or cleared it
    _arrival: int = field(default=0, repr=False)  # the store's count of records added when this one came
    nbytes: int = field(init=False)
    """Bytes held by this record's tensors (computed once: the store reads it on every add and eviction)."""

    def __post_init__(self) -> None:
        tensors = self.tensors
        self.nbytes = sum(t.numel() * t.element_size() for t in tensors.values()) if tensors else 0

    def wait(self) -> Record:
        """Block until an asynchronous offload copy has landed (a no-op otherwise); returns self."""
        if self._copy_done is not None:
            self._copy_done.synchronize()
            self._copy_done = None
        return self

    @property
    def tensor(self) -> torch.Tensor | None:
        """The primary tensor, the first one recorded (``forward_pre``: first arg; ``forward``: first output;
        backward kinds: the first gradient on the output side), or None."""
        return next(iter(self.tensors.values()), None)

    @property
    def stale(self) -> bool:
        """True once a captured tensor changed after capture: its version counter moved (an in-place op), or
        its fingerprint differs (a write that bumps no version, such as one through ``.data``)."""
        versions = self._versions  # inference tensors are not in it: they have no version counter
        prints = self._prints
        for name, t in self.tensors.items():
            if name in versions and t._version != versions[name]:
                return True
            kept = prints.get(name)
            if kept is not None:
                if not isinstance(kept, bytes):
                    kept = prints[name] = fingerprint.as_bytes(kept)  # a device fingerprint: copied once
                if not fingerprint.matches(t, kept):
                    return True
        return False

    @property
    def verified(self) -> bool:
        """Whether ``stale`` can tell a change of every tensor: each has a version counter or a fingerprint.
        False where neither exists (e.g. a sparse tensor made under ``inference_mode``)."""
        versions, prints = self._versions, self._prints
        return all(name in versions or name in prints for name in self.tensors)


def make_record(
    path: str,
    kind: str,
    step: int,
    call: int,
    tensors: dict[str, torch.Tensor | None],
    copy: bool,
    offload: str | None = None,
    recompute: bool = False,
    generation: Generation | None = None,
) -> Record:
    """A Record of detached tensors (cloned when ``copy``; None entries left out), remembering their
    version counters.

    With ``offload="cpu"``, accelerator tensors are copied into pinned host memory without blocking;
    the store waits for the copy before handing the record out.
    """
    kept = {}
    prints = {}
    pending = False
    for name, t in tensors.items():
        if t is None:
            # A tensor hook gets None for an output that did not reach the loss but shares an autograd
            # node with one that did (a multi-output op, a module with a full backward hook).
            continue
        t = t.detach()
        if offload == "cpu" and t.device.type != "cpu":
            host = torch.empty(t.shape, dtype=t.dtype, pin_memory=torch.cuda.is_available())
            kept[name] = host.copy_(t, non_blocking=True)
            pending = True
            # the copy lands later: the values as they leave, lazy conjugation or negation applied as copy_ does
            kept_print = fingerprint.take(t.resolve_conj().resolve_neg())
        else:
            kept[name] = t = t.clone() if copy else t
            kept_print = fingerprint.take(t)
        if kept_print is not None:
            prints[name] = kept_print
    # Inference tensors (made under torch.inference_mode()) have no version counter: torch raises on
    # ._version. Their fingerprint alone tells a later change; copy=True keeps their values.
    versions = {name: t._version for name, t in kept.items() if not t.is_inference()}
    record = Record(
        path, kind, step, call, kept, recompute=recompute, generation=generation, _versions=versions, _prints=prints
    )
    if pending and torch.cuda.is_available():
        record._copy_done = torch.cuda.Event()  # type: ignore[no-untyped-call]  # unannotated in torch
        record._copy_done.record()
    return record


_NO_KINDS: Mapping[str, deque[Record]] = {}  # what a path without records holds (read only)


class CaptureStore(Mapping[str, dict[str, list[Record]]]):
    """Records by path and kind, newest last, evicting the oldest once over ``memory_budget`` bytes
    of tensors or over ``max_records`` records.

    The byte budget evicts only records holding tensor bytes (stats and tensor-less records hold none: the
    record count bounds them). ``store[path][kind]`` is a list of Records. Safe when hooks fire on other
    threads.
    """

    def __init__(
        self, memory_budget: int = DEFAULT_MEMORY_BUDGET, offload: str | None = None, max_records: int = MAX_RECORDS
    ) -> None:
        if memory_budget <= 0:
            raise ValueError(f"memory_budget must be a positive number of bytes, got {memory_budget}")
        if offload not in (None, "cpu"):
            raise ValueError(f"offload must be None or 'cpu' (copy captures to pinned host memory), got {offload!r}")
        if max_records <= 0:
            raise ValueError(f"max_records must be a positive number of records, got {max_records}")
        self.memory_budget = int(memory_budget)
        """Bytes of tensors kept at most: over it, the oldest records holding tensor bytes are evicted."""
        self.max_records = int(max_records)
        """Records kept at most, whatever their bytes: stats and tensor-less records hold no tensor bytes, but each
        costs ~0.7 KB of Python objects."""
        self.offload = offload
        """None, or ``"cpu"``: accelerator captures are copied into pinned host memory without blocking."""
        self.evicted = 0
        """Records evicted so far."""
        self.evicting = False
        """The store is full: it evicted records since it was last cleared, and each new one evicts the oldest."""
        self.nbytes = 0
        """Bytes of tensors held."""
        # Records in arrival order, those holding tensor bytes apart from those holding none, so that the byte
        # budget evicts the oldest with bytes while the count cap evicts the oldest of both.
        self._heavy: deque[Record] = deque()
        self._light: deque[Record] = deque()
        self._arrivals = 0
        self._short = ShortSteps()
        self._emptied: dict[str, str] = {}  # path -> the limit that evicted its last record
        self._by_path: dict[str, OrderedDict[str, deque[Record]]] = {}
        self._lock = threading.Lock()
        self.taps: tuple[Callable[[Record], None], ...] = ()
        """Called with each record as it is added, on the firing's thread (the run log of ``record_to``); a tap must
        not raise."""

    def add(self, record: Record) -> None:
        """Keep ``record``; evict the oldest records until the store fits its budget again; then tell the taps."""
        for tap in self.taps:
            tap(record)
        size = record.nbytes
        with self._lock:
            kinds = self._by_path.get(record.path)
            if kinds is None:
                kinds = self._by_path[record.path] = OrderedDict()
                self._emptied.pop(record.path, None)
            kinds.setdefault(record.kind, deque()).append(record)
            self._arrivals += 1
            record._arrival = self._arrivals
            if not size:
                self._light.append(record)
            else:
                self._heavy.append(record)
                self.nbytes += size
                heavy = self._heavy
                while self.nbytes > self.memory_budget and len(heavy) > 1:  # the newest is always kept
                    self._evict(heavy.popleft(), record.step, "memory_budget")
            if len(self._heavy) + len(self._light) > self.max_records:
                self._evict_over_count(record.step)

    def _evict_over_count(self, step: int) -> None:
        """Evict the oldest records, with bytes or not, until ``max_records`` are left (at least the newest)."""
        heavy, light = self._heavy, self._light
        while len(heavy) + len(light) > self.max_records:
            older = heavy if not light or (heavy and heavy[0]._arrival < light[0]._arrival) else light
            self._evict(older.popleft(), step, "max_records")

    def _evict(self, old: Record, step: int, limit: str) -> None:
        """Drop ``old``, already taken off its arrival queue, from its history; note it when it belongs to
        ``step``, the step of the record being added (the limit holds less than one step)."""
        kinds = self._by_path[old.path]
        history = kinds[old.kind]
        if history[0] is old:  # the usual case: histories keep arrival order too
            history.popleft()
        else:  # a history mixing records with and without bytes: by identity (== would compare tensors)
            del history[next(i for i, r in enumerate(history) if r is old)]
        if not history:
            del kinds[old.kind]
            if not kinds:
                del self._by_path[old.path]
                self._emptied[old.path] = limit
        if old.step == step:
            self._short.note(old.path, old.kind, old.step, old.call, limit)
        self.nbytes -= old.nbytes
        self.evicted += 1
        self.evicting = True
        old._kept = False

    def latest(self, path: str, kind: str) -> Record | None:
        """The newest record of ``(path, kind)``, or None."""
        with self._lock:
            history = self._by_path.get(path, _NO_KINDS).get(kind)
            return history[-1].wait() if history else None

    def step_records(self, keys: Iterable[tuple[str, str]], step: int) -> list[Record]:
        """The kept records of ``step`` of each ``(path, kind)`` of ``keys``, in arrival order: one step's share of
        ``snapshot()``, read from the newest end of each history (a cost that does not grow with the store)."""
        found = []
        with self._lock:
            for path, kind in keys:
                for record in reversed(self._by_path.get(path, _NO_KINDS).get(kind, ())):
                    # histories run in step order (a backward of an older step after a newer one's is not looked for)
                    if record.step < step:
                        break
                    if record.step == step:
                        found.append(record)
        found.sort(key=lambda r: r._arrival)
        return [r.wait() for r in found]

    def relabel(self, step: int, generation: Generation) -> None:
        """Mark the kept records of ``step`` as part of ``generation`` (a prompt step, known once the next step came),
        read from the newest end of each history."""
        with self._lock:
            for kinds in self._by_path.values():
                for history in kinds.values():
                    for record in reversed(history):
                        if record.step < step:
                            break
                        if record.step == step:
                            record.generation = generation

    def snapshot(self) -> tuple[list[Record], dict[str, int]]:
        """Every record in arrival order and the store's counts (``records``, ``nbytes``, ``evicted``), read together
        so they agree."""
        with self._lock:
            records = [r.wait() for r in self._in_order()]
            return records, {"records": len(records), "nbytes": self.nbytes, "evicted": self.evicted}

    def _in_order(self) -> list[Record]:
        """Every record in arrival order (the two queues merged)."""
        heavy, light = self._heavy, self._light
        if not light or not heavy:
            return list(heavy or light)
        return list(heapq.merge(heavy, light, key=lambda r: r._arrival))

    def clear(self, path: str | None = None) -> None:
        """Forget every record, or those of one path."""
        with self._lock:
            records = self._in_order()
            keep = [r for r in records if path is not None and r.path != path]
            for r in records:
                r._kept = path is not None and r.path != path
            self._heavy = deque(r for r in keep if r.nbytes)
            self._light = deque(r for r in keep if not r.nbytes)
            self._by_path = {}
            self.nbytes = 0
            for r in keep:
                self._by_path.setdefault(r.path, OrderedDict()).setdefault(r.kind, deque()).append(r)
                self.nbytes += r.nbytes
            self._short.forget(path)
            self.evicting = False  # room was made: full again only once a record is evicted
            if path is None:
                self._emptied.clear()
            else:
                self._emptied.pop(path, None)

    def __len__(self) -> int:
        return len(self._by_path)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._by_path))

    def __getitem__(self, path: str) -> dict[str, list[Record]]:
        with self._lock:
            kinds = self._by_path.get(path)
            if kinds is None:
                known = ", ".join(quoted(t) for t in self._by_path) or "none yet: attach a hook and run"
                raise KeyError(
                    f"no captures for path {quoted(path)}{self._why_gone(path)}; paths with captures: {known}"
                )
            return {kind: [r.wait() for r in records] for kind, records in kinds.items()}

    def _why_gone(self, path: str) -> str:
        """Why a path that had records holds none: ``": its records were all evicted …"``, else ``""``."""
        limit = self._emptied.get(path)
        if limit is None:
            return ""
        found = [self._short_note(t, k) for t, k in self._short.hooks() if t == path]
        notes = [n for n in found if n is not None]
        if notes:
            return f": its records were all evicted: {'; '.join(notes)}"
        what = f"memory_budget ({format_bytes(self.memory_budget)})" if limit == "memory_budget" else "max_records"
        return f": its records were all evicted, oldest first, to stay under {what}"

    def short_steps(self) -> dict[tuple[str, str], str]:
        """Why records of each ``(path, kind)`` went before their own step ended (the budget holds less than
        one step), for those where it is still so: a later step kept whole drops the note."""
        with self._lock:
            return {(s["path"], s["kind"]): s["note"] for s in self._short_steps()}

    def _short_note(self, path: str, kind: str) -> str | None:
        history = self._by_path.get(path, _NO_KINDS).get(kind)
        short = self._short.current(path, kind, history[-1].step if history else None)
        return describe(short, kind, self.memory_budget, self.max_records) if short is not None else None

    def _short_steps(self) -> list[dict[str, Any]]:
        """Every (path, kind) whose records went before their own step ended, as plain data."""
        found = []
        for path, kind in self._short.hooks():
            note = self._short_note(path, kind)
            if note is not None:
                found.append({"path": path, "kind": kind, "note": note})
        return found

    def __repr__(self) -> str:
        n = len(self._heavy) + len(self._light)
        mib = self.nbytes / 2**20
        return f"<CaptureStore {n} records, {mib:.1f} of {self.memory_budget / 2**20:.0f} MiB, {self.evicted} evicted>"

    def summary(self) -> dict[str, Any]:
        """Counts for display: records, bytes, budget, evictions, whether it is ``evicting``, and ``short_steps``: the
        hooks whose records went before their own step ended (``{"path", "kind", "note"}`` each; the budget holds
        less than one step)."""
        with self._lock:
            return {
                "records": len(self._heavy) + len(self._light),
                "nbytes": self.nbytes,
                "budget": self.memory_budget,
                "evicted": self.evicted,
                "evicting": self.evicting,
                "short_steps": self._short_steps(),
            }
