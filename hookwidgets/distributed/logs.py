"""JSON-lines logs of DDP records: one file per rank, appended to, read back from every rank."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

RANK_FILE = re.compile(r"rank(\d+)\.jsonl")
RECORDS = ("bucket", "ready")  # the records a log line or a gather can hold: per bucket, per gradient ready


class RankLog:
    """Appends one JSON line per record to ``<log_dir>/rank<rank>.jsonl``; a ``start`` line opens each run."""

    def __init__(self, log_dir: str | os.PathLike, rank: int, header: dict[str, Any]) -> None:
        self.path = Path(log_dir) / f"rank{rank}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # completion callbacks may run on the backend's threads
        self._file = self.path.open("a", encoding="utf-8")
        self.error: str | None = None
        self.write({"kind": "start", "rank": rank, "time": time.time(), **header})

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record``; a failing write (disk full) is kept in ``error`` and never breaks training."""
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            if self._file.closed or self.error is not None:
                return
            try:
                self._file.write(line)
                self._file.flush()  # a crashed rank still leaves its lines for load()
            except OSError as exc:
                self.error = f"writing {self.path} failed: {exc}"

    def close(self) -> None:
        with self._lock:
            self._file.close()


def load_records(log_dir: str | os.PathLike, records: str | None = "bucket", *, last_run: bool = True) -> list[dict]:
    """Every rank's ``records`` (``bucket``, ``ready`` or None for both) from ``log_dir``, sorted.

    ``last_run`` keeps, per rank file, only the lines after its newest ``start`` line, so a log dir
    reused by a re-run notebook cell shows the latest run.
    """
    if records is not None and records not in RECORDS:
        raise ValueError(f"records must be one of {RECORDS} or None, got {records!r}")
    folder = Path(log_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"no log dir {str(folder)!r}: pass the log_dir= the ranks' DDPInspector wrote to")
    files = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := RANK_FILE.fullmatch(p.name)))
    if not files:
        raise FileNotFoundError(f"{str(folder)!r} holds no rank<N>.jsonl files: did the ranks run with log_dir= set?")
    lines: list[dict] = []
    for _, path in files:
        lines += _read(path, last_run)
    wanted = [r for r in lines if r.get("kind") in ((records,) if records else RECORDS)]
    return sort_records(wanted)


def _read(path: Path, last_run: bool) -> list[dict]:
    """The records of one rank file, each checked; a ValueError names the file, the line and what is wrong."""
    lines: list[dict] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            where = f"{path}:{number}"
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start}): not a DDPInspector log"
                ) from None
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                if text.endswith("\n"):
                    raise ValueError(f"{where} is not a JSON line ({exc.msg}): {text[:80]!r}") from None
                continue  # the last line of a rank killed mid-write
            except RecursionError:
                raise ValueError(f"{where} nests JSON too deeply to read: not a DDPInspector log line") from None
            problem = _problem(record)
            if problem:
                raise ValueError(f"{where} is not a DDPInspector record: {problem}; the line begins {text[:80]!r}")
            if record["kind"] == "start" and last_run:
                lines.clear()
            lines.append(record)
    return lines


# The fields each kind of line must have, with their types; the writer adds others (host, pid, ...).
_INT, _NUMBER = (int,), (int, float)
FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "start": {"rank": _INT},
    "bucket": {
        "rank": _INT,
        "step": _INT,
        "bucket": _INT,
        "numel": _INT,
        "bytes": _INT,
        "params": (list,),
        "seconds": _NUMBER,
        "grad_norm": _NUMBER,
        "reduced_norm": _NUMBER,
    },
    "ready": {"rank": _INT, "step": _INT, "order": _INT, "param": (str,), "seconds": _NUMBER},
}
_NAMES = {int: "an integer", float: "a number", list: "a list", str: "a string"}


def _problem(record: object) -> str | None:
    """Why ``record`` is no line of a DDPInspector log (a JSON object of a known kind, its fields typed); else None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    kind = record.get("kind")
    if kind not in FIELDS:
        return f"its kind is {kind!r}, not one of {', '.join(map(repr, FIELDS))}"
    for name, types in FIELDS[kind].items():
        if name not in record:
            return f"a {kind!r} line without {name!r}"
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, types):  # JSON true is no count
            return f"{name!r} is {json.dumps(value)[:40]}, not {_NAMES[types[-1]]}"
    if kind == "bucket" and not all(isinstance(name, str) for name in record["params"]):
        return "'params' holds something other than parameter names"
    error = record.get("compression_error")  # None when the hook does not compress
    if kind == "bucket" and error is not None and (isinstance(error, bool) or not isinstance(error, _NUMBER)):
        return f"'compression_error' is {json.dumps(error)[:40]}, not a number or null"
    return None


def sort_records(records: list[dict]) -> list[dict]:
    """Records ordered by step, then rank, then bucket index or ready order."""
    return sorted(records, key=lambda r: (r.get("step", 0), r.get("rank", 0), r.get("bucket", r.get("order", 0))))
