"""The run log's file format: length-prefixed, checksummed frames, and the index of them, read with no code run.

One run directory holds, per rank ``r``:

- ``rank<r>.hwlog``: frames appended one after another. A frame is a 16-byte head (magic ``HWRL``, its type, the
  payload's length and CRC-32) and its payload. Types: ``HEADER`` (JSON: rank, world, node, host, pid, the tree's
  hash, ...), ``NAMES`` (JSON: the new row keys ``[path, kind, phase, call]`` the next frames use, numbered on from
  the last), ``DATA`` (one step's rows, columnar, binary) and ``NOTE`` (JSON: the log stopped at its size budget,
  or was closed).
- ``rank<r>.hwidx``: the index the writer appends after each frame it wrote: one 64-byte entry per frame (where it
  is, its type, its step, the first row with NaN/Inf and its step, when the step began and how long it took), so
  a reader finds a step, or the first non-finite value, without reading the frames. The index is a cache: when it
  is missing or shorter than the frames, the frames are read to rebuild it.
- ``tree-<hash>.json``: the module tree (``ex.tree``), written once by the first rank with that tree; each rank's
  header names the hash of its tree's (path, class) list.

A ``DATA`` payload: a 32-byte head (version, column count, flags, rows, step, the step's start as Unix time and
its duration in seconds), one 8-byte directory entry per column (its code, dtype, encoding and byte count), then
the columns. Encodings: a full array, one constant for every row, or ``start + arange(rows)`` (the usual key
column, rows in the same order each step). Integer columns take the narrowest unsigned type that holds them;
statistics are float32, float64 where a finite value does not fit float32. Rows carry the frame's step unless the
``MIXED`` flag says a ``step`` column holds each row's (a backward of an earlier step that finished after the next
step began).

Reading never unpickles or evaluates anything: JSON is parsed with the standard parser and checked field by field,
arrays are read with ``numpy.frombuffer`` of whitelisted dtypes, and every length, count and key is checked
against the file's size and the frame's own counts; what does not fit is a ValueError naming the file.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import numpy as np

MAGIC = b"HWRL"
FRAME_HEAD = struct.Struct("<4sB3xII")  # magic, type, payload length, payload CRC-32
HEADER, NAMES, DATA, NOTE = 0, 1, 2, 3
FRAME_TYPES = (HEADER, NAMES, DATA, NOTE)
MAX_JSON_FRAME = 64 * 2**20  # a HEADER, NAMES or NOTE payload larger than this is no frame the writer made
MAX_DATA_FRAME = 1 << 31
MAX_ROWS = 1 << 24
VERSION = 1

INDEX_MAGIC = b"HWRI\x01\x00\x00\x00"  # the index file's first 8 bytes: magic and version
INDEX_ENTRY = np.dtype(
    [
        ("offset", "<u8"),  # where the frame's head begins in the .hwlog file
        ("length", "<u4"),  # the frame's bytes, head included
        ("type", "u1"),
        ("flags", "u1"),
        ("pad", "<u2"),
        ("step", "<i8"),  # a DATA frame's step (its rows' newest); -1 for other frames
        ("min_step", "<i8"),  # its rows' oldest step (== step unless MIXED)
        ("rows", "<u4"),
        ("nonfinite_row", "<i4"),  # the first row holding NaN or Inf (by step, then row), -1 when none
        ("nonfinite_step", "<i8"),  # that row's step, -1 when none
        ("began", "<f8"),  # the step's start, Unix time
        ("wall", "<f8"),  # the step's duration in seconds (NaN when unknown)
    ]
)
assert INDEX_ENTRY.itemsize == 64

DATA_HEAD = struct.Struct("<BBHIqdd")  # version, columns, flags, rows, step, began, wall
COLUMN_ENTRY = struct.Struct("<BBBxI")  # code, dtype, encoding, byte count
MIXED = 1  # flag: rows of several steps, with a step column

DTYPES = ("<u1", "<u2", "<u4", "<i8", "<f4", "<f8")
ARRAY, CONSTANT, RANGE = 0, 1, 2
COLUMNS = ("key", "step", "flags", "numel", "nan", "inf", "mean", "std", "min", "max", "norm", "zero_fraction")
"""The columns a DATA frame may hold, by code (their position here)."""
CODE = {name: code for code, name in enumerate(COLUMNS)}
STATS = ("mean", "std", "min", "max", "norm", "zero_fraction")
COUNTS = ("numel", "nan", "inf")
REQUIRED = ("key", *COUNTS, *STATS)

# Row flags: what a row's statistics are
LOCAL = 1  # of this rank's local shard only (the record's stats said scope="local ...")
MAGNITUDE = 2  # of a complex tensor's magnitudes
NO_STATS = 4  # the record had no statistics (a meta tensor, no tensor): NaN and zero counts
RECOMPUTE = 8  # a forward a checkpoint recomputed


def frame(kind: int, payload: bytes) -> bytes:
    """One frame: head and ``payload``."""
    return FRAME_HEAD.pack(MAGIC, kind, len(payload), zlib.crc32(payload)) + payload


def json_frame(kind: int, value: Any) -> bytes:
    """A HEADER, NAMES or NOTE frame holding ``value`` as JSON (plain data only)."""
    return frame(kind, json.dumps(value, allow_nan=False, separators=(",", ":")).encode())


def _int_column(values: np.ndarray) -> tuple[int, np.ndarray]:
    """The narrowest whitelisted dtype code for non-negative integers (int64 when any is negative or large)."""
    if values.size and values.min() >= 0:
        top = int(values.max())
        for code, limit in ((0, 0xFF), (1, 0xFFFF), (2, 0xFFFFFFFF)):
            if top <= limit:
                return code, values.astype(DTYPES[code])
    return 3, values.astype("<i8")


def _float_column(values: np.ndarray) -> tuple[int, np.ndarray]:
    """float32, or float64 where a finite value would overflow float32 (it would read as non-finite)."""
    finite = values[np.isfinite(values)]
    if finite.size and float(np.abs(finite).max()) > float(np.finfo(np.float32).max):
        return 5, values.astype("<f8")
    return 4, values.astype("<f4")


def data_payload(step: int, began: float, wall: float, columns: dict[str, np.ndarray]) -> tuple[bytes, int]:
    """A DATA payload of ``columns`` (name -> 1-D array, all of one length; ``key`` and the counts required) and its
    flags."""
    rows = len(columns["key"])
    flags = MIXED if "step" in columns else 0
    directory, blobs = [], []
    for name, values in columns.items():
        values = np.asarray(values)
        if name in STATS:
            dtype, values = _float_column(values)
        else:
            dtype, values = _int_column(values)
        encoding = ARRAY
        if rows and name == "key" and values[0] >= 0 and np.array_equal(values, values[0] + np.arange(rows)):
            encoding, values = RANGE, values[:1]
        elif rows > 1 and (values == values[0]).all():
            encoding, values = CONSTANT, values[:1]
        blob = values.tobytes()
        directory.append(COLUMN_ENTRY.pack(CODE[name], dtype, encoding, len(blob)))
        blobs.append(blob)
    head = DATA_HEAD.pack(VERSION, len(directory), flags, rows, step, began, wall)
    return head + b"".join(directory) + b"".join(blobs), flags


def nonfinite_row(columns: dict[str, np.ndarray], step: int) -> tuple[int, int]:
    """The first row holding NaN or Inf, by step then row order, and its step; ``(-1, -1)`` when none."""
    bad = (np.asarray(columns["nan"]) > 0) | (np.asarray(columns["inf"]) > 0)
    if not bad.any():
        return -1, -1
    rows = np.flatnonzero(bad)
    if "step" not in columns:
        return int(rows[0]), step
    steps = np.asarray(columns["step"])[rows]
    first = int(rows[np.argmin(steps)])  # argmin takes the first of equal steps: row order
    return first, int(columns["step"][first])


def index_entry(
    offset: int, length: int, kind: int, *, flags: int = 0, step: int = -1, min_step: int = -1, rows: int = 0,
    nonfinite: tuple[int, int] = (-1, -1), began: float = float("nan"), wall: float = float("nan"),
) -> bytes:  # fmt: skip
    """The 64 bytes of one index entry."""
    entry = np.zeros(1, INDEX_ENTRY)
    entry[0] = (offset, length, kind, flags, 0, step, min_step, rows, nonfinite[0], nonfinite[1], began, wall)
    return entry.tobytes()


class FormatError(ValueError):
    """A frame that is no frame the writer made (the message names the file and the offset)."""


def read_head(buf: bytes | memoryview, where: str) -> tuple[int, int, int]:
    """``(type, payload length, crc)`` of a frame head; a FormatError when it is none."""
    magic, kind, length, crc = FRAME_HEAD.unpack(buf)
    if magic != MAGIC:
        raise FormatError(f"{where}: no frame begins here (its first bytes are {bytes(magic)!r}, not {MAGIC!r})")
    if kind not in FRAME_TYPES:
        raise FormatError(f"{where}: frame type {kind} is none of the run log's ({', '.join(map(str, FRAME_TYPES))})")
    limit = MAX_DATA_FRAME if kind == DATA else MAX_JSON_FRAME
    if length > limit:
        raise FormatError(f"{where}: a frame of {length} bytes is larger than any the writer makes ({limit})")
    return kind, length, crc


def check_payload(payload: bytes, crc: int, where: str) -> None:
    """A FormatError when ``payload`` does not match its head's CRC-32."""
    if zlib.crc32(payload) != crc:
        raise FormatError(f"{where}: the frame's checksum does not match its bytes (the file was changed or damaged)")


def read_json(payload: bytes, where: str) -> Any:
    """The JSON value of a HEADER, NAMES or NOTE payload (plain data: parsing runs no code)."""
    try:
        return json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(f"{where}: the frame holds no JSON the writer made ({type(exc).__name__})") from None


Layout = list[tuple[str, np.dtype, int, int, int]]
"""A DATA payload's columns: name, dtype, encoding, where its bytes begin in the payload, how many."""


def layout(payload: bytes, where: str) -> tuple[tuple[int, int, int, int, float, float], Layout]:
    """A DATA payload's head ``(ncols, flags, rows, step, began, wall)`` and its columns' layout, each checked."""
    if len(payload) < DATA_HEAD.size:
        raise FormatError(f"{where}: a data frame of {len(payload)} bytes is shorter than its head")
    version, ncols, flags, rows, step, began, wall = DATA_HEAD.unpack_from(payload)
    if version != VERSION:
        raise FormatError(f"{where}: data frame version {version}; this hookwidgets reads version {VERSION}")
    if rows > MAX_ROWS or ncols > len(COLUMNS):
        raise FormatError(f"{where}: a data frame of {rows} rows and {ncols} columns is none the writer makes")
    at = DATA_HEAD.size + ncols * COLUMN_ENTRY.size
    if at > len(payload):
        raise FormatError(f"{where}: the column directory runs past the frame's end")
    found: Layout = []
    for k in range(ncols):
        code, dtype, encoding, nbytes = COLUMN_ENTRY.unpack_from(payload, DATA_HEAD.size + k * COLUMN_ENTRY.size)
        if code >= len(COLUMNS) or dtype >= len(DTYPES) or encoding > RANGE:
            raise FormatError(f"{where}: column {k} has code {code}, dtype {dtype}, encoding {encoding}: unknown")
        name, numpy_type = COLUMNS[code], np.dtype(DTYPES[dtype])
        count = rows if encoding == ARRAY else 1
        if nbytes != count * numpy_type.itemsize or at + nbytes > len(payload) or any(c[0] == name for c in found):
            raise FormatError(f"{where}: column {name!r} holds {nbytes} bytes, not {count} values of {numpy_type}")
        if encoding == RANGE and (name != "key" or numpy_type.kind == "f"):
            raise FormatError(f"{where}: column {name!r} cannot be a range")
        found.append((name, numpy_type, encoding, at, nbytes))
        at += nbytes
    names = {c[0] for c in found}
    missing = [name for name in REQUIRED if name not in names]
    if missing or bool(flags & MIXED) != ("step" in names):
        raise FormatError(f"{where}: a data frame without its {', '.join(missing) or 'step'} column")
    return (ncols, flags, rows, step, began, wall), found


def decode_data(payload: bytes, where: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A DATA payload: its head (``step``, ``began``, ``wall``, ``rows``, ``flags``) and its columns, each expanded to
    one value per row."""
    (_, flags, rows, step, began, wall), columns_at = layout(payload, where)
    columns: dict[str, np.ndarray] = {}
    for name, numpy_type, encoding, at, _ in columns_at:
        values = np.frombuffer(payload, numpy_type, rows if encoding == ARRAY else 1, at)
        if encoding == CONSTANT:
            values = np.full(rows, values[0], numpy_type)
        elif encoding == RANGE:
            values = values[0] + np.arange(rows, dtype=np.int64)
        columns[name] = values
    if "flags" not in columns:
        columns["flags"] = np.zeros(rows, np.uint8)
    head = {"step": step, "began": began, "wall": wall, "rows": rows, "flags": flags}
    return head, columns


_PAYLOAD_HEAD = np.dtype(
    [("version", "u1"), ("ncols", "u1"), ("flags", "<u2"), ("rows", "<u4"), ("step", "<i8"), ("b", "<f8"), ("w", "<f8")]
)


def decode_many(frames: np.ndarray, steps: np.ndarray, where: str) -> dict[str, np.ndarray] | None:
    """Frames of one length and one column layout, ``(n, length)`` bytes, decoded at once: each column as ``(n, rows)``;
    None when they differ in layout (then each is decoded alone). ``steps``: the index's step of each, checked."""
    n, length = frames.shape
    payload = frames[0, FRAME_HEAD.size :].tobytes()
    (ncols, flags, rows, _, _, _), columns_at = layout(payload, where)
    head = frames[:, : FRAME_HEAD.size].copy()
    if (head[:, :4] != np.frombuffer(MAGIC, np.uint8)).any() or (head[:, 4] != DATA).any():
        raise FormatError(f"{where}: one of the frames read together is no data frame")
    lengths, crcs = head[:, 8:12].copy().view("<u4")[:, 0], head[:, 12:16].copy().view("<u4")[:, 0]
    if (lengths != length - FRAME_HEAD.size).any():
        raise FormatError(f"{where}: one of the frames read together has another length than its index entry")
    for k in range(n):  # zlib reads the bytes in place: no copy per frame
        if zlib.crc32(frames[k, FRAME_HEAD.size :].data) != int(crcs[k]):
            raise FormatError(f"{where}: frame {k} read together: its checksum does not match its bytes")
    heads = frames[:, FRAME_HEAD.size : FRAME_HEAD.size + DATA_HEAD.size].copy().view(_PAYLOAD_HEAD)[:, 0]
    directory = frames[:, FRAME_HEAD.size + DATA_HEAD.size : FRAME_HEAD.size + DATA_HEAD.size + ncols * 8]
    if (
        flags & MIXED
        or (heads["version"] != VERSION).any()
        or (heads["ncols"] != ncols).any()
        or (heads["flags"] != flags).any()
        or (heads["rows"] != rows).any()
        or (directory != directory[0]).any()
    ):
        return None
    if (heads["step"] != steps).any():
        raise FormatError(f"{where}: a frame's step differs from its index entry's")
    columns: dict[str, np.ndarray] = {}
    for name, numpy_type, encoding, at, nbytes in columns_at:
        start = FRAME_HEAD.size + at
        values = frames[:, start : start + nbytes].copy().view(numpy_type)  # (n, rows) or (n, 1)
        if encoding == CONSTANT:
            values = np.broadcast_to(values, (n, rows))
        elif encoding == RANGE:
            values = values.astype(np.int64) + np.arange(rows, dtype=np.int64)
        columns[name] = values
    if "flags" not in columns:
        columns["flags"] = np.zeros((n, rows), np.uint8)
    return columns
