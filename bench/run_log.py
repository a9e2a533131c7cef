"""Reading a run log past one machine's scale (issue 34): a synthetic log of 512 ranks × 300 modules × 2000 steps.

The log is written in the run log's own format (``hookwidgets.distributed.run_format``), as ``ex.record_to`` would
on 512 ranks: the first frame of each rank is made by the writer's own encoder and checked, the others reuse its
bytes with each step's statistics put in (the generator has to write ~8.5 GB fast). One NaN is planted on one rank
at one step. Then, in one process, the reader is timed:

- ``open_run`` to the first view data: the directory opened (headers, row keys, index of every rank), the tree,
  the ranks × layers matrix of the newest step, and rank 0's layers × steps matrix over every step;
- a new step shown: every rank's writer appends one step, then ``refresh()`` and that step's ranks × layers matrix;
- ``first_nonfinite()``;
- memory: the reader process's resident set before and after.

Warm: the files in the page cache, as right after they were written (the usual case of a view following a run);
cold: each rank file dropped from the page cache first (``posix_fadvise(DONTNEED)``), as when a notebook opens a
finished run. Bars (absolute, from the issue): first view data ≤ 2 s, a new step ≤ 200 ms, first_nonfinite ≤ 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
from _protocol import machine, revision

import hookwidgets
from hookwidgets.distributed import run_format as fmt

BARS = {"first": 2.0, "step": 0.2, "nonfinite": 1.0}
NAN_AT = (317 / 512, 1500 / 2000, 123 / 300)  # where the one NaN is: rank, step and row, as shares of the sizes
GPUS_PER_NODE = 8


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _tree(modules: int) -> dict:
    """A model of blocks of 10 Linear layers: the tree ``ex.tree`` gives, and the 300 leaf paths logged."""

    def node(path: str, cls: str, children: list) -> dict:
        name = path.rsplit(".", 1)[-1] if path else cls
        return {"path": path, "name": name, "cls": cls, "trainable": 0, "frozen": 0, "packed": 0,
                "shape": None, "dtype": None, "children": children}  # fmt: skip

    blocks = []
    for b in range((modules + 9) // 10):
        leaves = [node(f"blocks.{b}.{j}", "Linear", []) for j in range(min(10, modules - 10 * b))]
        blocks.append(node(f"blocks.{b}", "Block", leaves))
    return node("", "Synthetic", [node("blocks", "ModuleList", blocks)])


class Generator:
    """Writes each rank's frames and index as the writer lays them out."""

    def __init__(self, folder: Path, ranks: int, modules: int, steps: int) -> None:
        self.folder, self.ranks, self.modules, self.steps = folder, ranks, modules, steps
        tree = _tree(modules)
        from hookwidgets.distributed.run_writer import tree_hash

        self.digest = tree_hash(tree)
        (folder / f"tree-{self.digest}.json").write_text(json.dumps(tree))
        self.paths = [f"blocks.{i // 10}.{i % 10}" for i in range(modules)]
        self.numel = (np.arange(modules) % 7 + 1) * 8 * 64 * 128  # per layer, the same every step
        self._template: tuple[bytes, bytes, int] | None = None
        self.nan_at = (int(ranks * NAN_AT[0]), max(1, int(steps * NAN_AT[1])), int(modules * NAN_AT[2]))
        """The rank, step and row of the one NaN."""
        self._ncols = 0

    def _columns(self, stats: np.ndarray, nan_row: int | None = None) -> dict[str, np.ndarray]:
        n = self.modules
        nan = np.zeros(n, np.int64)
        if nan_row is not None:
            nan[nan_row] = 1
        columns = {"key": np.arange(n), "flags": np.zeros(n, np.int64)}
        columns |= dict(zip(fmt.STATS, stats, strict=True))
        columns |= {"numel": self.numel, "nan": nan, "inf": np.zeros(n, np.int64)}
        return columns

    def frame(self, step: int, stats: np.ndarray, nan_row: int | None = None) -> tuple[bytes, tuple[int, int]]:
        """One DATA frame of ``stats`` (6 × modules float32) and its first non-finite row."""
        began, wall = 1.7e9 + step, 0.25
        if nan_row is not None:  # the writer's encoder itself: a NaN count column of its own
            columns = self._columns(stats, nan_row)
            payload, _ = fmt.data_payload(step, began, wall, columns)
            return fmt.frame(fmt.DATA, payload), fmt.nonfinite_row(columns, step)
        if self._template is None:  # the writer's bytes for the first frame, split around the statistics
            payload, _ = fmt.data_payload(step, began, wall, self._columns(stats))
            blob = stats.tobytes()
            at = payload.index(blob)
            self._template = (payload[fmt.DATA_HEAD.size : at], payload[at + len(blob) :], len(payload))
            self._ncols = fmt.DATA_HEAD.unpack_from(payload)[1]
        middle, tail, size = self._template
        head = fmt.DATA_HEAD.pack(fmt.VERSION, self._ncols, 0, self.modules, step, began, wall)
        payload = b"".join((head, middle, stats.tobytes(), tail))
        assert len(payload) == size
        return fmt.FRAME_HEAD.pack(fmt.MAGIC, fmt.DATA, size, zlib.crc32(payload)) + payload, (-1, -1)

    def stats(self, rank: int, steps: int) -> np.ndarray:
        """(steps, 6, modules) float32 statistics, drifting per layer and rank."""
        rng = np.random.default_rng(rank)
        base = rng.random((1, 6, self.modules), np.float32) + 0.5
        noise = rng.standard_normal((steps, 6, self.modules), np.float32) * np.float32(0.05)
        return np.ascontiguousarray(np.abs(base + noise), np.float32)

    def write_rank(self, rank: int) -> None:
        header = {
            "format": "hookwidgets run log", "version": fmt.VERSION, "rank": rank, "world": self.ranks,
            "node_rank": rank // GPUS_PER_NODE, "local_rank": rank % GPUS_PER_NODE,
            "host": f"node{rank // GPUS_PER_NODE:03d}", "pid": 1000 + rank, "run_id": "synthetic",
            "started": 1.7e9, "every": 1, "max_bytes": 2**40, "tree": self.digest,
        }  # fmt: skip
        keys = [[path, "global_forward", "forward", 0] for path in self.paths]
        frames = [fmt.json_frame(fmt.HEADER, header), fmt.json_frame(fmt.NAMES, {"first": 0, "keys": keys})]
        index = np.zeros(self.steps + 2, fmt.INDEX_ENTRY)
        index["type"][:2] = (fmt.HEADER, fmt.NAMES)
        index["step"][:2] = index["min_step"][:2] = index["nonfinite_row"][:2] = index["nonfinite_step"][:2] = -1
        stats = self.stats(rank, self.steps)
        steps = np.arange(1, self.steps + 1)
        for step in steps.tolist():
            nan_row = self.nan_at[2] if (rank, step) == self.nan_at[:2] else None
            frame, first = self.frame(step, stats[step - 1], nan_row)
            frames.append(frame)
            if first != (-1, -1):
                index["nonfinite_row"][step + 1], index["nonfinite_step"][step + 1] = first
            else:
                index["nonfinite_row"][step + 1] = index["nonfinite_step"][step + 1] = -1
        index["step"][2:] = index["min_step"][2:] = steps
        index["rows"][2:] = self.modules
        index["began"][2:], index["wall"][2:] = 1.7e9 + steps, 0.25
        lengths = np.array([len(f) for f in frames], np.uint64)
        index["length"] = lengths
        index["offset"] = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        index["type"][2:] = fmt.DATA
        (self.folder / f"rank{rank}.hwlog").write_bytes(b"".join(frames))
        (self.folder / f"rank{rank}.hwidx").write_bytes(fmt.INDEX_MAGIC + index.tobytes())

    def append_step(self, step: int) -> None:
        """Every rank's writer adds one step (frame, then index entry), as at a step boundary."""
        for rank in range(self.ranks):
            data = self.folder / f"rank{rank}.hwlog"
            offset = data.stat().st_size
            frame, first = self.frame(step, self.stats(rank + 10_000, 1)[0])
            with data.open("ab") as handle:
                handle.write(frame)
            entry = fmt.index_entry(
                offset, len(frame), fmt.DATA, step=step, min_step=step, rows=self.modules, nonfinite=first,
                began=1.7e9 + step, wall=0.25,
            )  # fmt: skip
            with (self.folder / f"rank{rank}.hwidx").open("ab") as handle:
                handle.write(entry)


def _drop_cache(folder: Path) -> None:
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def first_view(folder: Path) -> tuple[float, dict[str, float], hookwidgets.RunView]:
    """``open_run`` to the first view data; the time of each part."""
    parts: dict[str, float] = {}
    start = time.perf_counter()
    run = hookwidgets.open_run(folder)
    parts["open_run (headers, keys, indexes)"] = time.perf_counter() - start
    mark = time.perf_counter()
    tree, layers, steps = run.tree, run.layers, run.steps
    assert tree is not None
    assert len(layers) > 0
    assert len(steps) > 0
    ranks_layers = run.rank_layers(steps[-1], "norm")
    parts["ranks × layers of the newest step"] = time.perf_counter() - mark
    mark = time.perf_counter()
    layers_steps = run.layer_steps("norm", rank=0)
    parts["rank 0's layers × steps, every step"] = time.perf_counter() - mark
    assert ranks_layers.shape == (len(run.ranks), len(layers))
    assert layers_steps.shape == (len(layers), len(steps))
    return time.perf_counter() - start, parts, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=512)
    parser.add_argument("--modules", type=int, default=300)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of each figure (median reported)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the log (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the log afterwards")
    args = parser.parse_args()
    command = " ".join([os.path.relpath(sys.executable), *sys.argv])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    folder = Path(tempfile.mkdtemp(prefix="run_log_bench_", dir=args.dir))
    try:
        started = time.perf_counter()
        gen = Generator(folder, args.ranks, args.modules, args.steps)
        for rank in range(args.ranks):
            gen.write_rank(rank)
            if rank % 64 == 63:
                print(f"wrote {rank + 1} ranks in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        written_s = time.perf_counter() - started
        disk = sum(p.stat().st_size for p in folder.iterdir())
        index_bytes = sum(p.stat().st_size for p in folder.glob("*.hwidx"))
        rss_before = _rss_mib()

        cold, warm, parts_runs = [], [], []
        for _ in range(max(1, args.repeats // 2)):
            _drop_cache(folder)
            total, _, run = first_view(folder)
            cold.append(total)
            run.close()
        for _ in range(args.repeats):
            total, parts, run = first_view(folder)
            warm.append(total)
            parts_runs.append(parts)
            run.close()
        total, parts, run = first_view(folder)
        rss_open = _rss_mib()

        nonfinite_s = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            found = run.first_nonfinite()
            nonfinite_s.append(time.perf_counter() - start)
        nan_rank, nan_step, nan_row = gen.nan_at
        expected = {"rank": nan_rank, "step": nan_step, "path": gen.paths[nan_row], "phase": "forward"}
        assert found is not None
        assert {k: found[k] for k in expected} == expected, found

        step_s = []
        for k in range(args.repeats):
            new = args.steps + 1 + k
            gen.append_step(new)
            start = time.perf_counter()
            assert run.refresh()
            matrix = run.rank_layers(new, "norm")
            column = run.layer_steps("norm", rank=0, steps=[new])
            step_s.append(time.perf_counter() - start)
            assert run.steps[-1] == new
            assert not np.isnan(matrix).any()
            assert column.shape == (args.modules, 1)
        rss_after = _rss_mib()

        window = run.steps[-100:]
        start = time.perf_counter()
        run.layer_steps("norm", steps=window)
        reduced_s = time.perf_counter() - start
        start = time.perf_counter()
        run.per_rank(gen.paths[0], "norm", steps=window)
        per_rank_s = time.perf_counter() - start
        rss_end = _rss_mib()
        run.close()
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)

    def row(name: str, values: list[float], bar: float) -> str:
        median = statistics.median(values)
        verdict = "PASS" if median <= bar else "OVER"
        spread = f"{min(values) * 1e3:.0f}–{max(values) * 1e3:.0f}"
        return f"| {name} | {median * 1e3:.0f} | {spread} | {len(values)} | ≤ {bar * 1e3:.0f} ms | {verdict} |"

    rows, modules, steps = args.ranks, args.modules, args.steps
    parts_median = {name: statistics.median(p[name] for p in parts_runs) for name in parts_runs[0]}
    lines = [
        f"## Run log at scale: open_run on {rows} ranks × {modules} modules × {steps} steps (issue 34)",
        "",
        f"`{command}`, {date}; {machine()}; hookwidgets at {revision()}. "
        f"1-min load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        f"A synthetic run log of {rows} ranks ({GPUS_PER_NODE} a node, by the headers) × {modules} modules (one "
        f"`stats` record per module per step, forward side: both sides would double the rows) × {steps} steps, "
        f"one NaN on rank {nan_rank} at step {nan_step}, written in the run log's format in {written_s:.0f} s: "
        f"{disk / 2**30:.2f} GiB on disk ({disk / (rows * modules * steps):.1f} bytes a record; the indexes "
        f"{index_bytes / 2**20:.0f} MiB). Each figure is the median of its repeats; warm: the files in the page "
        "cache (as when following a run); cold: every file dropped from the page cache first "
        "(`posix_fadvise(DONTNEED)`). A new step: every rank's frame and index entry appended, then `refresh()`, "
        "that step's ranks × layers matrix and rank 0's column of it. Bars are absolute, from the issue.",
        "",
        "| figure | median ms | min–max ms | repeats | bar | verdict |",
        "|---|---|---|---|---|---|",
        row("open_run to first view data, warm", warm, BARS["first"]),
        row("open_run to first view data, cold", cold, BARS["first"]),
        row("a new step shown (refresh + its matrices)", step_s, BARS["step"]),
        row("first_nonfinite()", nonfinite_s, BARS["nonfinite"]),
        "",
        "### Where the first view's time goes (warm medians) and what else costs",
        "",
        "| part | ms |",
        "|---|---|",
        *(f"| {name} | {seconds * 1e3:.0f} |" for name, seconds in parts_median.items()),
        f"| layers × steps reduced over all {rows} ranks, last 100 steps (no bar: reads every rank's frames) | "
        f"{reduced_s * 1e3:.0f} |",
        f"| `per_rank(path, 'norm')` over the last 100 steps (no bar) | {per_rank_s * 1e3:.0f} |",
        "",
        f"Memory (resident set of the reading process): {rss_before:.0f} MiB before opening, {rss_open:.0f} MiB with "
        f"the run open and its first view read, {rss_after:.0f} MiB after {args.repeats} new steps, {rss_end:.0f} MiB "
        "after the two uncached figures above. What is kept: each rank's index (64 bytes a step), and the layer "
        "statistics computed, per (rank, step) for the 4096 newest and per step for those reduced over ranks.",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
