"""``hookwidgets.open_run(log_dir)``: every rank's run log (``record_to``) read as one run, with no model and no
process group.

The reader is lazy: opening reads each rank's header, row keys and index (64 bytes a step); a step's rows are read
when asked for, one frame per rank, and kept in small caches. So the first non-finite value (in the index), the
ranks × layers matrix of a step and one rank's layers × steps matrix stay cheap on big runs, while a matrix
reduced over every rank and step reads every frame once (then cached per step): pass ``steps=`` to bound it.

A layer is a ``(path, kind)`` of the records; a module called several times in a step gets the statistics of its
calls taken as one tensor, and a row reduced over ranks (``rank=None``) those of every rank's tensors taken as
one (under data parallelism: the global batch's), as ``combine_stats`` does. ``DDPInspector`` logs in the same
directory (``rank<N>.jsonl``) are listed in ``ddp_logs`` and read by ``ddp_records()``.
"""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.diagnostics.nonfinite import SUMMARY_FIELDS
from ..core.kind_table import summary_columns
from . import moments as mo
from .logs import RANK_FILE as DDP_FILE
from .logs import load_records
from .run_format import MIXED
from .run_reader import NotBegun, RankFile
from .run_writer import tree_shape

if TYPE_CHECKING:
    import pandas

RUN_FILE = re.compile(r"rank(\d+)\.hwlog")
LAYER_CACHE = 4096  # (rank, step) layer moments kept: ~26 KB each at 300 layers


def open_run(log_dir: str | os.PathLike[str]) -> RunView:
    """The run log the ranks' ``ex.record_to(log_dir)`` wrote, as a ``RunView`` (it needs no model, no process group;
    reading it runs no code from it)."""
    return RunView(log_dir)


class RunView:
    """Every rank's run log in one directory: ranks, steps, module tree, and the statistics by layer, rank and step.

    ``refresh()`` reads what the files gained (a run followed live). Displayed in a notebook, it is the run view
    widget.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        folder = Path(log_dir)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"no run log directory {str(folder)!r}: pass the log_dir that the ranks' ex.record_to() wrote to"
            )
        self.log_dir: Path = folder
        """The directory."""
        self.notes: list[str] = []
        """What the reader skipped or could not show, and why (rank files of another run, or without their header
        yet, a missing tree); each rank's own notes are in ``all_notes()``."""
        self._waiting: dict[int, Path] = {}  # rank files without their header yet: tried again by refresh()
        self._run: tuple[int, str | None] = (0, None)  # the run's world size and launcher's run id
        self._files = self._open(folder)
        self.world: int = next(iter(self._files.values())).header["world"]
        """The job's world size, as the ranks' headers say."""
        self.tree: dict[str, Any] | None = self._tree()
        """The module tree (``ex.tree``'s plain data) every rank logged under; None when its file is missing."""
        self._layers: list[tuple[str, str, str]] = []  # (path, kind, phase)
        self._layer_of: dict[tuple[str, str], int] = {}
        self._key_layers: dict[int, np.ndarray] = {}  # rank -> layer of each of its row keys
        self._steps = np.zeros(0, np.int64)
        self._chunks: dict[tuple[tuple[str, str, str, int], ...], np.ndarray] = {}
        self._synced: dict[int, int] = {}  # rank -> its index entries taken into steps
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()  # (rank, step) -> layer moments
        self._reduced_cache: dict[int, np.ndarray] = {}  # step -> layer moments over every rank
        self._sync()

    # -- what is in the directory
    def _open(self, folder: Path) -> dict[int, RankFile]:
        found = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := RUN_FILE.fullmatch(p.name)))
        if not found:
            ddp = [p.name for p in folder.iterdir() if DDP_FILE.fullmatch(p.name)]
            hint = (
                f"; it holds DDPInspector logs ({', '.join(sorted(ddp)[:3])}): read them with "
                "hookwidgets.distributed.load_records()"
                if ddp
                else ""
            )
            raise FileNotFoundError(
                f"{str(folder)!r} holds no run log (rank<N>.hwlog files): did the ranks call ex.record_to() with it"
                f"{hint}?"
            )
        files: dict[int, RankFile] = {}
        for rank, path in found:
            log = self._rank_file(rank, path)
            if log is not None:
                files[rank] = log
        if not files:
            raise FileNotFoundError(f"no rank log in {str(folder)!r} has its header yet: open it once a step ran")
        newest = max(files.values(), key=lambda f: f.header.get("started") or 0.0).header
        self._run = (newest["world"], newest.get("run_id"))
        for rank, log in list(files.items()):
            if not self._same_run(log):
                del files[rank]
        return files

    def _rank_file(self, rank: int, path: Path) -> RankFile | None:
        """``path`` opened; None, noted and kept to try again on ``refresh()``, while it has no header yet."""
        try:
            log = RankFile(path)
        except NotBegun as exc:
            self._waiting[rank] = path
            if str(exc) not in self.notes:
                self.notes.append(str(exc))
            return None
        if log.header["rank"] != rank:
            log.close()
            raise ValueError(f"{path}: its header says rank {log.header['rank']}, its name rank {rank}")
        return log

    def _same_run(self, log: RankFile) -> bool:
        """Whether ``log`` belongs to the run (world size and launcher's run id); noted and closed when not."""
        world, run_id = self._run
        if log.header["world"] == world and (run_id is None or log.header.get("run_id") == run_id):
            return True
        self.notes.append(
            f"{log.path.name} is from another run (world {log.header['world']}, run id "
            f"{log.header.get('run_id')!r}) than the newest rank log: left out"
        )
        log.close()
        return False

    def _tree(self) -> dict[str, Any] | None:
        """The structure file all ranks name; a ValueError naming the first path where two ranks' trees differ."""
        by_hash: dict[str, list[int]] = {}
        for rank, log in self._files.items():
            by_hash.setdefault(log.header["tree"], []).append(rank)
        trees = {digest: self._tree_file(digest) for digest in by_hash}
        if len(by_hash) > 1:
            (first, ranks_a), (second, ranks_b) = list(by_hash.items())[:2]
            a, b = trees[first], trees[second]
            if a is not None and b is not None:
                raise ValueError(_tree_difference(a, b, ranks_a[0], ranks_b[0], self.log_dir))
            raise ValueError(
                f"ranks {ranks_a[0]} and {ranks_b[0]} of {str(self.log_dir)!r} logged different module trees: every "
                "rank must explore the same model"
            )
        return trees[next(iter(by_hash))]

    def _tree_file(self, digest: str) -> dict[str, Any] | None:
        if not re.fullmatch(r"[0-9a-f]{16}", digest):
            raise ValueError(f"{self.log_dir}: a rank header names tree {digest[:40]!r}, which is no tree hash")
        path = self.log_dir / f"tree-{digest}.json"
        if not path.is_file():
            self.notes.append(f"{path.name}, the module tree, is missing: the view shows the logged paths only")
            return None
        try:
            tree = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"{path}: not a module tree the run log wrote ({type(exc).__name__})") from None
        problem = _tree_problem(tree)
        if problem:
            raise ValueError(f"{path}: not a module tree the run log wrote: {problem}")
        return tree

    # -- following the files
    def refresh(self) -> bool:
        """Read what every rank's files gained since the last read (and the rank files that got their header);
        whether any step's records came."""
        oldest: int | None = None  # the oldest step the new frames hold rows of: cached moments from it on are stale
        for rank, path in sorted(self._waiting.items()):
            log = self._rank_file(rank, path)
            if log is None:
                continue
            del self._waiting[rank]
            if self._same_run(log):
                self._files = dict(sorted({**self._files, rank: log}.items()))
                self.tree = self._tree()  # a ValueError naming the first path where its tree differs
                if len(log.entries):
                    low = int(log.entries["min_step"].min())
                    oldest = low if oldest is None else min(oldest, low)
        for log in self._files.values():
            before = len(log.entries)
            if log.refresh():
                low = int(log.entries["min_step"][before:].min())
                oldest = low if oldest is None else min(oldest, low)
        if oldest is None:
            return False
        for key in [key for key in self._cache if key[1] >= oldest]:
            del self._cache[key]
        for step in [step for step in self._reduced_cache if step >= oldest]:
            del self._reduced_cache[step]
        self._sync()
        return True

    def _sync(self) -> None:
        """Layers, key mappings and steps brought up to what the rank files hold."""
        steps = [self._steps]
        for rank, log in self._files.items():
            mapping = self._key_layers.get(rank, np.zeros(0, np.int64))
            if len(mapping) < len(log.keys):
                chunk = tuple(log.keys[len(mapping) :])
                extra = self._chunks.get(chunk)  # ranks declare the same keys: each list is mapped once
                if extra is None:
                    extra = self._chunks[chunk] = np.array([self._layer(p, k, ph) for p, k, ph, _ in chunk], np.int64)
                self._key_layers[rank] = np.concatenate([mapping, extra])
            new = log.entries[self._synced.get(rank, 0) :]  # only the entries since the last sync: a step stays cheap
            self._synced[rank] = len(log.entries)
            steps += [new["step"], new["min_step"]]
        self._steps = np.unique(np.concatenate(steps)).astype(np.int64)

    def _layer(self, path: str, kind: str, phase: str) -> int:
        found = self._layer_of.get((path, kind))
        if found is None:
            found = self._layer_of[(path, kind)] = len(self._layers)
            self._layers.append((path, kind, phase))
        return found

    # -- what the run holds
    @property
    def ranks(self) -> list[int]:
        """The ranks whose logs are here, ascending."""
        return list(self._files)

    @property
    def steps(self) -> list[int]:
        """The steps any rank logged, ascending."""
        return [int(s) for s in self._steps]

    @property
    def latest(self) -> dict[int, int | None]:
        """Per rank: the newest step it logged (None before its first frame): a rank lagging behind the others."""
        return {rank: int(log.entries["step"].max()) if len(log.entries) else None for rank, log in self._files.items()}

    @property
    def layers(self) -> list[dict[str, str]]:
        """The rows of the matrices: ``{"path", "kind", "phase"}`` for each ``(path, kind)`` logged, in the order
        they first fired."""
        return [{"path": p, "kind": k, "phase": ph} for p, k, ph in self._layers]

    @property
    def nodes(self) -> dict[int, dict[str, Any]]:
        """Where each rank ran: ``{"node_rank", "local_rank", "host", "pid"}`` (``node_rank`` from the launcher,
        None without one)."""
        fields = ("node_rank", "local_rank", "host", "pid")
        return {rank: {f: log.header.get(f) for f in fields} for rank, log in self._files.items()}

    @property
    def ddp_logs(self) -> list[Path]:
        """``DDPInspector`` logs in the same directory (``rank<N>.jsonl``): read them with ``ddp_records()``."""
        return sorted(p for p in self.log_dir.iterdir() if DDP_FILE.fullmatch(p.name))

    def ddp_records(self, records: str | None = "bucket") -> list[dict[str, Any]]:
        """The DDPInspector records of this directory (``load_records``)."""
        return load_records(self.log_dir, records)

    @property
    def live(self) -> dict[int, bool]:
        """Per rank: whether its log may still grow (not closed, not stopped at its size budget)."""
        return {rank: log.stopped is None for rank, log in self._files.items()}

    def all_notes(self) -> list[str]:
        """``notes`` and each rank's (cut-off frames, size budgets), in rank order."""
        return [*self.notes, *(n for log in self._files.values() for n in log.notes)]

    # -- numbers
    def _read_pairs(self, pairs: list[tuple[int, int]], layer: int | None = None) -> np.ndarray:
        """The layer moments of each ``(rank, step)`` of ``pairs``, ``(len(pairs), len(layers), WIDTH)``, computed
        in one vectorized pass over their frames' rows (only ``layer``'s rows when given)."""
        count = len(self._layers)
        parts: dict[str, list[np.ndarray]] = {}
        groups: list[np.ndarray] = []
        slow = self._read_together(pairs, layer, parts, groups)
        for p in slow:
            rank, step = pairs[p]
            log, mapping = self._files[rank], self._key_layers[rank]
            for i in log.frames_of(step):
                head, columns = log.data(int(i))
                chosen = mapping[columns["key"]]
                keep = None
                if head["flags"] & MIXED:
                    keep = columns["step"] == step
                if layer is not None:
                    keep = chosen == layer if keep is None else keep & (chosen == layer)
                if keep is not None:
                    chosen = chosen[keep]
                for name in mo.COLUMNS:
                    parts.setdefault(name, []).append(columns[name] if keep is None else columns[name][keep])
                groups.append(chosen + p * count)
        if not groups:
            return mo.combine(np.zeros((0, mo.WIDTH)), np.zeros(0, np.int64), len(pairs) * count).reshape(
                len(pairs), count, mo.WIDTH
            )
        merged = {name: np.concatenate(values) for name, values in parts.items()}
        return mo.of_rows(merged, np.concatenate(groups), len(pairs) * count).reshape(len(pairs), count, mo.WIDTH)

    def _read_together(
        self, pairs: list[tuple[int, int]], layer: int | None, parts: dict[str, list[np.ndarray]], groups: list
    ) -> list[int]:
        """Read the pairs of a rank whose steps are each one frame of one layout in one go (``data_many``), into
        ``parts`` and ``groups``; the positions in ``pairs`` left to read frame by frame."""
        count = len(self._layers)
        by_rank: dict[int, list[int]] = {}
        for p, (rank, _) in enumerate(pairs):
            by_rank.setdefault(rank, []).append(p)
        slow: list[int] = []
        for rank, chosen in by_rank.items():
            log, mapping = self._files[rank], self._key_layers[rank]
            entries = log.entries
            positions = np.searchsorted(entries["step"], [pairs[p][1] for p in chosen])
            positions = np.minimum(positions, max(len(entries) - 1, 0))
            single = (
                len(chosen) > 1
                and len(entries)
                and not (entries["flags"] & MIXED).any()
                and (entries["step"][positions] == [pairs[p][1] for p in chosen]).all()
                and (np.diff(entries["step"]) > 0).all()
            )
            columns = log.data_many(positions) if single else None
            if columns is None:
                slow.extend(chosen)
                continue
            layers = mapping[columns["key"]] + (np.array(chosen)[:, None] * count)
            keep = None if layer is None else (layers % count) == layer
            for name in mo.COLUMNS:
                values = columns[name]
                parts.setdefault(name, []).append(values.reshape(-1) if keep is None else values[keep])
            groups.append(layers.reshape(-1) if keep is None else layers[keep])
        return slow

    def _pairs(self, pairs: list[tuple[int, int]]) -> np.ndarray:
        """``_read_pairs`` through the cache of recent ``(rank, step)`` moments."""
        count = len(self._layers)
        missing = [pair for pair in pairs if pair not in self._cache or len(self._cache[pair]) != count]
        for k in range(0, len(missing), LAYER_CACHE // 2):  # in chunks that the cache holds
            chunk = missing[k : k + LAYER_CACHE // 2]
            for pair, moments in zip(chunk, self._read_pairs(chunk), strict=True):
                self._cache[pair] = moments
                if len(self._cache) > LAYER_CACHE:
                    self._cache.popitem(last=False)
        out = np.empty((len(pairs), count, mo.WIDTH))
        for k, pair in enumerate(pairs):
            hit = self._cache.get(pair)
            out[k] = hit if hit is not None else self._read_pairs([pair])[0]  # pushed out by a bigger request
        return out

    def _reduced(self, steps: list[int]) -> np.ndarray:
        """Every rank's layer moments of each step combined, ``(len(steps), len(layers), WIDTH)`` (cached per step
        until a refresh brings rows of it)."""
        count, ranks = len(self._layers), list(self._files)
        out = np.empty((len(steps), count, mo.WIDTH))
        missing = []
        for k, step in enumerate(steps):
            hit = self._reduced_cache.get(step)
            if hit is not None and len(hit) == count:
                out[k] = hit
            else:
                missing.append(k)
        chunk = max(1, LAYER_CACHE // max(len(ranks), 1))
        for at in range(0, len(missing), chunk):
            which = missing[at : at + chunk]
            moments = self._read_pairs([(rank, steps[k]) for k in which for rank in ranks])  # (S·R, L, W)
            reduced = mo.stack(moments.reshape(len(which), len(ranks), count, mo.WIDTH), axis=1)
            for j, k in enumerate(which):
                out[k] = self._reduced_cache[steps[k]] = reduced[j]
        return out

    def _check_rank(self, rank: int) -> None:
        if rank not in self._files:
            raise ValueError(f"rank {rank!r} has no log in {str(self.log_dir)!r}; its ranks are {self.ranks}")

    def _check_steps(self, steps: Any) -> list[int]:
        if steps is None:
            return self.steps
        chosen = [int(s) for s in ([steps] if isinstance(steps, int) else steps)]
        known = set(self.steps)
        missing = [s for s in chosen if s not in known]
        if missing:
            shown = f"{self.steps[0]}…{self.steps[-1]}" if self.steps else "none yet"
            raise ValueError(f"step(s) {missing[:5]} were not logged; the logged steps are {shown}")
        return chosen

    def layer_steps(self, field: str, *, rank: int | None = None, steps: Any = None) -> np.ndarray:
        """``field`` of each layer in each step: ``(len(layers), len(steps))``, NaN where a layer did not fire.

        ``rank=None``: every rank's records taken as one (reads every rank's frame of each step: pass ``steps=``,
        e.g. ``run.steps[-100:]``, on big runs); else that rank's. ``steps``: default every logged step.
        """
        chosen = self._check_steps(steps)
        mo.field(np.zeros((0, mo.WIDTH)), field)  # an unknown field: its ValueError before any reading
        if rank is not None:
            self._check_rank(rank)
        if not chosen:
            return np.zeros((len(self._layers), 0))
        moments = self._reduced(chosen) if rank is None else self._pairs([(rank, step) for step in chosen])
        return mo.field(moments, field).T

    def rank_layers(self, step: int, field: str) -> np.ndarray:
        """``field`` of each layer on each rank in ``step``: ``(len(ranks), len(layers))`` (one frame per rank)."""
        self._check_steps([step])
        return mo.field(self._pairs([(rank, step) for rank in self._files]), field)

    def per_rank(self, path: str, field: str, *, kind: str | None = None, steps: Any = None) -> np.ndarray:
        """``field`` of the module ``path`` on each rank in each step: ``(len(ranks), len(steps))``.

        ``kind`` is needed when ``path`` was logged by several kinds; ``field`` may also be a summary column,
        ``act_<field>`` or ``grad_<field>`` (forward or backward kinds). Reads every rank's frame of each step.
        """
        layer = self._find_layer(path, field, kind)
        name = field.split("_", 1)[1] if field.startswith(("act_", "grad_")) else field
        chosen = self._check_steps(steps)
        mo.field(np.zeros((0, mo.WIDTH)), name)  # an unknown field: its ValueError before any reading
        pairs = [(rank, step) for rank in self._files for step in chosen]
        moments = self._read_pairs(pairs, layer)[:, layer]  # only that layer's rows: no cache needed
        return mo.field(moments, name).reshape(len(self._files), len(chosen))

    def _find_layer(self, path: str, field: str, kind: str | None) -> int:
        kinds = [k for p, k, _ in self._layers if p == path]
        if not kinds:
            paths = sorted({p for p, _, _ in self._layers})
            more = "…" if paths[10:] else ""
            raise ValueError(f"no records of {path!r} in this run; its paths are {paths[:10]}{more}")
        if field.startswith(("act_", "grad_")) and kind is None:
            side = field.split("_", 1)[0]
            columns = summary_columns()
            kinds = [k for k in kinds if columns.get(k) == side]
            if not kinds:
                raise ValueError(f"{path!r} has no records of a kind filling {side}_ columns")
            kinds = kinds[-1:]  # as summary(): two kinds filling one column see the same tensors; the last is shown
        if kind is not None:
            if kind not in kinds:
                raise ValueError(f"{path!r} has no records of kind {kind!r}; it has {kinds}")
            kinds = [kind]
        if len(kinds) > 1:
            raise ValueError(f"{path!r} was logged by kinds {kinds}: pass kind=, or a field act_… / grad_…")
        return self._layer_of[(path, kinds[0])]

    def step_times(self) -> np.ndarray:
        """Seconds each rank's steps took, ``(len(ranks), len(steps))`` (NaN where unknown), from the index."""
        out = np.full((len(self._files), len(self._steps)), np.nan)
        for r, log in enumerate(self._files.values()):
            entries = log.entries
            out[r, np.searchsorted(self._steps, entries["step"])] = entries["wall"]
        return out

    def first_nonfinite(self) -> dict[str, Any] | None:
        """The earliest record holding NaN or Inf across all ranks: ``{"step", "rank", "path", "kind", "phase",
        "call", "nan", "inf", "node_rank", "host"}`` (earliest step, then the record's place in its rank's step,
        then rank); None when every logged value is finite. Read from the index and one frame."""
        best: tuple[int, int, int, int] | None = None
        for rank, log in self._files.items():
            entries = log.entries
            bad = np.flatnonzero(entries["nonfinite_row"] >= 0)
            if not len(bad):
                continue
            order = np.lexsort((entries["nonfinite_row"][bad], entries["nonfinite_step"][bad]))
            i = int(bad[order[0]])
            candidate = (int(entries["nonfinite_step"][i]), int(entries["nonfinite_row"][i]), rank, i)
            if best is None or candidate < best:
                best = candidate
        if best is None:
            return None
        step, row, rank, i = best
        log = self._files[rank]
        _, columns = log.data(i)
        if row >= len(columns["key"]) or not (columns["nan"][row] or columns["inf"][row]):
            raise ValueError(f"{log.index_path}: its index marks a non-finite row that the frame does not hold")
        path, kind, phase, call = log.keys[int(columns["key"][row])]
        return {
            "step": step,
            "rank": rank,
            "path": path,
            "kind": kind,
            "phase": phase,
            "call": call,
            "nan": int(columns["nan"][row]),
            "inf": int(columns["inf"][row]),
            "node_rank": log.header.get("node_rank"),
            "host": log.header.get("host"),
        }

    def summary(
        self, steps: Any = None, *, ranks: list[int] | None = None, as_frame: bool = False
    ) -> list[dict[str, Any]] | pandas.DataFrame:
        """Rows as ``ex.summary()``'s (``step``, ``path``, ``act_*``/``grad_*`` columns) with a ``rank``: one per
        step, rank and module, then per step and module one reduced over ranks with ``rank=None`` (every rank's
        tensors taken as one). ``steps``/``ranks`` choose (default all: on big runs pass a few steps)."""
        chosen = self._check_steps(steps)
        ranks = self.ranks if ranks is None else ranks
        for rank in ranks:
            self._check_rank(rank)
        columns = summary_columns()
        rows: list[dict[str, Any]] = []
        for step in chosen:
            per_rank = dict(zip(ranks, self._pairs([(rank, step) for rank in ranks]), strict=True))
            reduced = mo.stack(np.stack(list(per_rank.values())))
            every: list[tuple[int | None, np.ndarray]] = [*per_rank.items(), (None, reduced)]
            for who, moments in every:
                by_path: dict[str, dict[str, Any]] = {}
                for layer, (path, kind, _) in enumerate(self._layers):
                    prefix = columns.get(kind)
                    if prefix is None or moments[layer, mo.RECORDS] == 0:
                        continue
                    row = by_path.setdefault(path, {"step": step, "rank": who, "path": path})
                    for name in SUMMARY_FIELDS:
                        value = float(mo.field(moments[layer], name))
                        row[f"{prefix}_{name}"] = int(value) if name in ("nan", "inf") else value
                rows.extend(by_path[path] for path in sorted(by_path))  # as ex.summary(): by path
        if as_frame:
            import pandas

            return pandas.DataFrame(rows)
        return rows

    def close(self) -> None:
        """Close the rank files (a view reopened later reads them again)."""
        for log in self._files.values():
            log.close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # The widget layer is imported when a notebook displays the run: reading a log needs no widget.
        from ..widget.run_widget import run_widget

        bundle = run_widget(self)._repr_mimebundle_(**kwargs)
        # ipywidgets gives (data, metadata), older versions data alone; a console without widgets shows text/plain
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = repr(self)
        return bundle

    def __repr__(self) -> str:
        steps = f"steps {self.steps[0]}…{self.steps[-1]}" if len(self._steps) else "no steps yet"
        return f"<RunView {str(self.log_dir)!r}: {len(self._files)} of {self.world} ranks, {steps}>"


def _tree_problem(tree: Any) -> str | None:
    """Why ``tree`` is not a module tree's plain data (each node a dict with string path and cls, a list of
    children), else None."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            return f"a node is a JSON {type(node).__name__}, not an object"
        if not isinstance(node.get("path"), str) or not isinstance(node.get("cls"), str):
            return "a node without a string path and cls"
        children = node.get("children")
        if not isinstance(children, list):
            return f"the node {node['path'][:80]!r} has no list of children"
        stack.extend(children)
    return None


def _tree_difference(a: dict[str, Any], b: dict[str, Any], rank_a: int, rank_b: int, folder: Path) -> str:
    """The ValueError text naming the first module where two ranks' trees differ."""
    shape_a, shape_b = tree_shape(a), tree_shape(b)
    for k in range(max(len(shape_a), len(shape_b))):
        left = shape_a[k] if k < len(shape_a) else None
        right = shape_b[k] if k < len(shape_b) else None
        if left != right:
            path = (left or right or ["", ""])[0]
            what_a = f"{left[1]} at {left[0]!r}" if left else "nothing"
            what_b = f"{right[1]} at {right[0]!r}" if right else "nothing"
            return (
                f"ranks {rank_a} and {rank_b} of {str(folder)!r} logged different module trees; the first difference "
                f"is at path {path!r}: rank {rank_a} has {what_a}, rank {rank_b} has {what_b}. Every rank must "
                "explore the same model"
            )
    return f"ranks {rank_a} and {rank_b} of {str(folder)!r} logged different module trees"
