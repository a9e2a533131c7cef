"""Records the capture store evicted before their own step ended: a budget that holds less than one step."""

from __future__ import annotations

from dataclasses import dataclass, field

STARTS = ("the budget (", "max_records (")
"""How the note of such a hook begins (``ex.hooks``): it is replaced as newer steps come, never stacked."""
SHOWN_CALLS = 8


@dataclass
class ShortStep:
    """The records of one (path, kind) evicted during the step they belong to."""

    step: int
    limit: str
    """What evicted them: ``"memory_budget"`` (bytes) or ``"max_records"`` (count)."""
    calls: list[int] = field(default_factory=list)


class ShortSteps:
    """The latest such step of each (path, kind); not thread-safe: the store calls it under its lock."""

    def __init__(self) -> None:
        self._by_hook: dict[tuple[str, str], ShortStep] = {}

    def note(self, path: str, kind: str, step: int, call: int, limit: str) -> None:
        """One record of ``(path, kind)`` of ``step`` was evicted while ``step`` was still being recorded."""
        short = self._by_hook.get((path, kind))
        if short is None or short.step != step:
            short = self._by_hook[(path, kind)] = ShortStep(step, limit)
        short.calls.append(call)
        if limit == "memory_budget":
            short.limit = limit  # the budget is the one to raise first

    def current(self, path: str, kind: str, newest_kept: int | None) -> ShortStep | None:
        """The note of ``(path, kind)`` unless a later step of it was kept since (``newest_kept``: the step
        of its newest record held); such a step lost nothing, so the note is dropped."""
        short = self._by_hook.get((path, kind))
        if short is not None and newest_kept is not None and newest_kept > short.step:
            del self._by_hook[(path, kind)]
            return None
        return short

    def hooks(self) -> list[tuple[str, str]]:
        """``(path, kind)`` of every note, in the order they were first made."""
        return list(self._by_hook)

    def forget(self, path: str | None = None) -> None:
        """Drop every note, or those of one path."""
        if path is None:
            self._by_hook.clear()
        else:
            for key in [k for k in self._by_hook if k[0] == path]:
                del self._by_hook[key]


def describe(short: ShortStep, kind: str, memory_budget: int, max_records: int) -> str:
    """The note: which records of ``kind`` went, and the limit to raise."""
    count = len(short.calls)
    calls = ", ".join(map(str, sorted(short.calls)[:SHOWN_CALLS])) + (", …" if count > SHOWN_CALLS else "")
    plural = "s" if count != 1 else ""
    went = f"step {short.step} lost {count} {kind!r} record{plural} (call{plural} {calls}) before it ended"
    if short.limit == "memory_budget":
        held, fix = f"{STARTS[0]}{format_bytes(memory_budget)})", "raise memory_budget"
    else:
        held, fix = f"{STARTS[1]}{max_records:,} records)", "raise ex.captures.max_records"
    return f"{held} holds less than one step: {went}; {fix}"


def format_bytes(n: int) -> str:
    """``n`` bytes for people: 512 B, 64.0 KiB, 1.0 MiB, 2.0 GiB."""
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"
