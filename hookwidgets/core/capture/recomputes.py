"""A recomputed forward is one forward: what every aggregate of records (summary, plots, counts) reads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, TypeVar


class _Keyed(Protocol):
    """What ``once_each`` reads of every record (``target``, ``kind`` and ``recompute`` where it has them)."""

    @property
    def step(self) -> int: ...
    @property
    def call(self) -> int: ...


R = TypeVar("R", bound=_Keyed)


def once_each(records: Iterable[R]) -> list[R]:
    """``records`` (``Record``s in arrival order) without the repeats a checkpoint's recompute made: a ``recompute``
    record stands for its (path, kind, step, call) only when no record of that call came before it (its original
    was not kept, or the hook was attached after the forward)."""
    seen: set[tuple[Any, ...]] = set()
    kept: list[R] = []
    for record in records:
        key = (getattr(record, "path", None), getattr(record, "kind", None), record.step, record.call)
        if getattr(record, "recompute", False) and key in seen:
            continue
        seen.add(key)
        kept.append(record)
    return kept
