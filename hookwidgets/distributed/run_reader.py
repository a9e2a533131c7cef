"""One rank's run log read lazily: its index in memory, frames read one at a time when asked for (``run_format.py``).

``refresh()`` reads what the files gained since the last call: whole index entries only, each checked against the
frames file's size; a frame not indexed yet (the writer was stopped between writing it and its entry) is read
from the frames file itself; bytes after the last whole frame (a rank killed mid-write, or a frame being written)
are skipped, and said in ``notes``.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from . import run_format as fmt

_NAMES_SEEN: dict[bytes, list[tuple[str, str, str, int]]] = {}  # a names frame's payload -> its keys, checked
FRAME_CACHE = 2  # decoded DATA frames kept per rank (the view caches what it computes from them)
_HEADER_FIELDS: dict[str, tuple[type, ...]] = {"rank": (int,), "world": (int,), "tree": (str,)}
_OPTIONAL: dict[str, tuple[type, ...]] = {
    "node_rank": (int,),
    "local_rank": (int,),
    "host": (str,),
    "pid": (int,),
    "started": (int, float),
    "every": (int,),
    "run_id": (str,),
}


class RankFile:
    """A rank's ``rank<r>.hwlog`` and ``.hwidx``: header, row keys, the index of its DATA frames, its notes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index_path = path.with_suffix(".hwidx")
        self.header: dict[str, Any] = {}
        self.keys: list[tuple[str, str, str, int]] = []
        """Row key id -> (path, kind, phase, call)."""
        self._buf = np.zeros(0, fmt.INDEX_ENTRY)  # grown by doubling: a step appends one entry, copying none
        self._count = 0
        self.notes: list[str] = []
        self.stopped: str | None = None  # why the log stopped: "max_bytes" or "closed"
        self._all = 0  # index entries read (of every type)
        self._end = 0  # where the frames read so far end in the .hwlog file
        self._frames: OrderedDict[int, tuple[dict[str, Any], dict[str, np.ndarray]]] = OrderedDict()
        self._said: set[str] = set()
        self._fd = os.open(path, os.O_RDONLY)
        self.refresh()
        if not self.header:
            raise ValueError(f"{path}: no header frame: not a hookwidgets run log, or its writer has not begun")

    def close(self) -> None:
        os.close(self._fd)

    def _where(self, offset: int) -> str:
        return f"{self.path} at byte {offset}"

    def _read(self, offset: int, length: int) -> bytes:
        return os.pread(self._fd, length, offset)

    @property
    def entries(self) -> np.ndarray:
        """The DATA frames' index entries, in file order."""
        return self._buf[: self._count]

    def _append(self, new: np.ndarray) -> None:
        end = self._count + len(new)
        if end > len(self._buf):
            grown = np.zeros(max(end, 2 * len(self._buf), 64), fmt.INDEX_ENTRY)
            grown[: self._count] = self._buf[: self._count]
            self._buf = grown
        self._buf[self._count : end] = new
        self._count = end

    def refresh(self) -> bool:
        """Read the index entries and frames added since the last call; whether a DATA frame came."""
        size = os.fstat(self._fd).st_size
        before = len(self.entries)
        new = self._new_entries(size)
        if len(new):
            for entry in new[new["type"] != fmt.DATA]:  # header, names and notes: few, read now
                self._take(entry)
            self._append(new[new["type"] == fmt.DATA])
            self._end = int(new["offset"][-1]) + int(new["length"][-1])
        self._scan_tail(size)
        return len(self.entries) > before

    def _new_entries(self, size: int) -> np.ndarray:
        """The whole index entries past those read, each inside the frames file and after the last one."""
        try:  # opened for each read, not held: two descriptors a rank would not fit 1024 on 512 ranks
            fd = os.open(self.index_path, os.O_RDONLY)
        except FileNotFoundError:
            return np.zeros(0, fmt.INDEX_ENTRY)  # no index: the frames are read from the .hwlog itself
        try:
            whole = (os.fstat(fd).st_size - len(fmt.INDEX_MAGIC)) // fmt.INDEX_ENTRY.itemsize
            if whole <= self._all:
                return np.zeros(0, fmt.INDEX_ENTRY)
            if self._all == 0 and os.pread(fd, len(fmt.INDEX_MAGIC), 0) != fmt.INDEX_MAGIC:
                raise ValueError(f"{self.index_path}: not a hookwidgets run log index (its first bytes differ)")
            at = len(fmt.INDEX_MAGIC) + self._all * fmt.INDEX_ENTRY.itemsize
            raw = os.pread(fd, (whole - self._all) * fmt.INDEX_ENTRY.itemsize, at)
        finally:
            os.close(fd)
        entries = np.frombuffer(raw, fmt.INDEX_ENTRY, len(raw) // fmt.INDEX_ENTRY.itemsize)
        ends = entries["offset"].astype(np.int64) + entries["length"]
        starts = np.concatenate([[self._end], ends[:-1]])
        bad = (entries["offset"].astype(np.int64) != starts) | (entries["length"] < fmt.FRAME_HEAD.size)
        bad |= ~np.isin(entries["type"], fmt.FRAME_TYPES) | (entries["rows"] > fmt.MAX_ROWS)
        if bad.any():
            k = int(np.argmax(bad)) + self._all
            raise ValueError(
                f"{self.index_path}: index entry {k} does not follow the frames before it (a damaged or crafted index)"
            )
        inside = ends <= size  # an entry past the frames' end: the .hwlog was cut short (said by _scan_tail)
        entries = entries[: int(np.argmin(inside)) if not inside.all() else len(entries)]
        self._all += len(entries)
        return entries

    def _take(self, entry: np.ndarray) -> None:
        """Read the HEADER, NAMES or NOTE frame of one index entry."""
        offset, length, kind = int(entry["offset"]), int(entry["length"]), int(entry["type"])
        head = self._read(offset, length)
        got_kind, payload = self._frame(head, offset)
        if got_kind != kind:
            raise ValueError(f"{self._where(offset)}: the index says frame type {kind}, the frame says {got_kind}")
        self._json(kind, payload, offset)

    def _frame(self, raw: bytes, offset: int) -> tuple[int, bytes]:
        """A whole frame's type and payload, checked."""
        where = self._where(offset)
        if len(raw) < fmt.FRAME_HEAD.size:
            raise ValueError(f"{where}: the frame is cut short")
        kind, length, crc = fmt.read_head(raw[: fmt.FRAME_HEAD.size], where)
        payload = raw[fmt.FRAME_HEAD.size :]
        if len(payload) != length:
            raise ValueError(f"{where}: the frame's length ({length}) differs from the index's")
        fmt.check_payload(payload, crc, where)
        return kind, payload

    def _json(self, kind: int, payload: bytes, offset: int) -> None:
        where = self._where(offset)
        value = fmt.read_json(payload, where)
        if not isinstance(value, dict):
            raise ValueError(f"{where}: the frame holds a JSON {type(value).__name__}, not an object")
        if kind == fmt.HEADER:
            self.header = _checked_header(value, where)
        elif kind == fmt.NAMES:
            self._names(value, where, payload)
        elif value.get("stopped") == "max_bytes":
            self.stopped = "max_bytes"
            self._say(
                f"rank {self.header.get('rank')}'s log stopped at step {value.get('step')}: it reached its size budget "
                f"of {value.get('max_bytes')} bytes (record_to(max_bytes=...))"
            )
        elif value.get("closed") is True:
            self.stopped = "closed"

    def _names(self, value: dict[str, Any], where: str, payload: bytes) -> None:
        first, keys = value.get("first"), value.get("keys")
        if first != len(self.keys) or not isinstance(keys, list):
            raise ValueError(f"{where}: a names frame that does not continue the keys before it")
        known = _NAMES_SEEN.get(payload)
        if known is not None:  # every rank declares the same keys: checked once
            self.keys.extend(known)
            return
        for key in keys:
            if not (
                type(key) is list
                and len(key) == 4
                and type(key[0]) is str
                and type(key[1]) is str
                and type(key[2]) is str
                and type(key[3]) is int
            ):
                raise ValueError(f"{where}: a row key {str(key)[:80]!r} is not [path, kind, phase, call]")
        checked = [(key[0], key[1], key[2], key[3]) for key in keys]
        if len(_NAMES_SEEN) >= 64:
            _NAMES_SEEN.clear()
        _NAMES_SEEN[payload] = checked
        self.keys.extend(checked)

    def _scan_tail(self, size: int) -> None:
        """Frames after the indexed ones (no index, or the writer stopped before writing an entry); a cut-off last
        frame is skipped and said."""
        found: list[np.ndarray] = []
        try:
            self._scan(size, found)
        finally:
            if found:
                self._append(np.concatenate(found))

    def _scan(self, size: int, found: list[np.ndarray]) -> None:
        while self._end < size:
            offset = self._end
            head = self._read(offset, fmt.FRAME_HEAD.size)
            if len(head) < fmt.FRAME_HEAD.size:
                self._cut(offset, size)
                return
            kind, length, crc = fmt.read_head(head, self._where(offset))
            if offset + fmt.FRAME_HEAD.size + length > size:
                self._cut(offset, size)
                return
            payload = self._read(offset + fmt.FRAME_HEAD.size, length)
            fmt.check_payload(payload, crc, self._where(offset))
            self._end = offset + fmt.FRAME_HEAD.size + length
            self._all += 1  # the writer's index, if it catches up, has this frame's entry next
            if kind != fmt.DATA:
                self._json(kind, payload, offset)
                continue
            head_data, columns = fmt.decode_data(payload, self._where(offset))
            step = head_data["step"]
            first = fmt.nonfinite_row(columns, step)
            steps = columns.get("step")
            entry = fmt.index_entry(
                offset,
                self._end - offset,
                kind,
                flags=head_data["flags"],
                step=step,
                min_step=int(steps.min()) if steps is not None and len(steps) else step,
                rows=head_data["rows"],
                nonfinite=first,
                began=head_data["began"],
                wall=head_data["wall"],
            )
            found.append(np.frombuffer(entry, fmt.INDEX_ENTRY))

    def _cut(self, offset: int, size: int) -> None:
        self._say(
            f"rank {self.header.get('rank', '?')}: {size - offset} bytes after its last whole frame (at byte {offset} "
            f"of {self.path.name}) were skipped: a frame being written, or cut off when the rank stopped"
        )

    def _say(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.notes.append(text)

    def data(self, i: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """DATA frame ``i`` (by position in ``entries``): its head and columns (``step`` only when ``MIXED``)."""
        cached = self._frames.get(i)
        if cached is not None:
            self._frames.move_to_end(i)
            return cached
        entry = self.entries[i]
        offset, length = int(entry["offset"]), int(entry["length"])
        kind, payload = self._frame(self._read(offset, length), offset)
        where = self._where(offset)
        if kind != fmt.DATA:
            raise ValueError(f"{where}: the index says a data frame, the frame is of type {kind}")
        head, columns = fmt.decode_data(payload, where)
        if head["step"] != int(entry["step"]) or head["rows"] != int(entry["rows"]):
            raise ValueError(f"{where}: the frame's step or rows differ from its index entry's")
        keys = columns["key"]
        if len(keys) and int(keys.max()) >= len(self.keys):
            raise ValueError(f"{where}: a row names key {int(keys.max())}, but only {len(self.keys)} keys are declared")
        self._frames[i] = (head, columns)
        if len(self._frames) > FRAME_CACHE:
            self._frames.popitem(last=False)
        return head, columns

    def data_many(self, positions: np.ndarray) -> dict[str, np.ndarray] | None:
        """The DATA frames at ``positions`` decoded together, each column ``(len(positions), rows)``; None when they
        differ in length or layout (then ``data()`` reads each)."""
        entries = self.entries[positions]
        length = int(entries["length"][0])
        if len(entries) < 2 or (entries["length"] != length).any():
            return None
        raw = b"".join(self._read(int(offset), length) for offset in entries["offset"])
        if len(raw) != length * len(entries):
            raise ValueError(f"{self.path}: a frame its index lists is cut short")
        frames = np.frombuffer(raw, np.uint8).reshape(len(entries), length)
        where = f"{self.path} (frames at bytes {int(entries['offset'][0])}…{int(entries['offset'][-1])})"
        columns = fmt.decode_many(frames, entries["step"], where)
        if columns is not None and len(columns["key"][0]) and int(columns["key"].max()) >= len(self.keys):
            raise ValueError(f"{where}: a row names key {int(columns['key'].max())}, but only {len(self.keys)} keys")
        return columns

    def frames_of(self, step: int) -> np.ndarray:
        """Positions in ``entries`` of the DATA frames holding rows of ``step``."""
        entries = self.entries
        return np.flatnonzero((entries["min_step"] <= step) & (entries["step"] >= step))


def _checked_header(value: dict[str, Any], where: str) -> dict[str, Any]:
    """The header's fields, each of its type (a missing optional one is None)."""
    if value.get("format") != "hookwidgets run log":
        raise ValueError(f"{where}: the header does not say it is a hookwidgets run log")
    header: dict[str, Any] = {}
    for name, types in (_HEADER_FIELDS | _OPTIONAL).items():
        field = value.get(name)
        if field is None and name in _OPTIONAL:
            header[name] = None
            continue
        if isinstance(field, bool) or not isinstance(field, types):
            raise ValueError(f"{where}: the header's {name!r} is {str(field)[:40]!r}, not a {types[0].__name__}")
        header[name] = field
    if header["rank"] < 0 or header["world"] < 1 or header["rank"] >= header["world"]:
        raise ValueError(f"{where}: rank {header['rank']} of world {header['world']} is no rank of a job")
    return header
