"""The training panel's data: watched optimizers' update-to-weight ratios, and DDP buckets, ranks and ready order."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.capture.export import plain_number
from ..core.monitors.optim import UpdateRatioMonitor
from .protocol import DDPPanel, Hover, RatioRow, Ratios, Ready, ReadyRow, Training

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RATIO_LOW = 1e-5
RATIO_HIGH = 1e-1
"""A last-step ratio below RATIO_LOW or above RATIO_HIGH is flagged (about 1e-3 per step is healthy)."""
RECORDS_DRAWN = 20_000
"""The chart and table read each monitor's newest records only: a long run stays as cheap to redraw."""
PARAMS_DRAWN = 12
"""The chart draws at most this many parameters: those whose last ratio is furthest from 1e-3."""
BUCKET_KEYS = ("step", "rank", "bucket", "numel", "bytes", "params", "grad_norm", "seconds")
READY_KEYS = ("step", "rank", "order", "param", "seconds")
EMPTY: Training = {"visible": False, "ratios": None, "ddp": None, "step": None}


@dataclass
class DDPSource:
    """What the panel shows of DDP: a live ``DDPInspector`` (read at each refresh) or records fixed at show time."""

    inspector: Any = None
    buckets: list[dict[str, Any]] = field(default_factory=list)
    ready: list[dict[str, Any]] = field(default_factory=list)
    label: str = ""

    def records(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(bucket records, gradient-ready records)."""
        if self.inspector is not None:
            return self.inspector.records, self.inspector.ready_order
        return self.buckets, self.ready

    def version(self) -> tuple[Any, ...]:
        """Changes when the records do: a live inspector's step count, or nothing for fixed records."""
        return (id(self), self.inspector.step if self.inspector is not None else None)


def ddp_source(source: Any) -> DDPSource:
    """A ``DDPSource`` from a ``DDPInspector``, a list of its records, or a log dir; errors name the fix."""
    from ..distributed import DDPInspector  # torch.distributed only once DDP is shown

    if isinstance(source, DDPInspector):
        return DDPSource(inspector=source)
    if isinstance(source, (str, os.PathLike)):
        return _records_source(DDPInspector.load(source, records=None), f"log dir {os.fspath(source)}")
    if isinstance(source, (list, tuple)):
        return _records_source(list(source), "records passed to show_ddp()")
    hint = " (gather() returns None on ranks other than dst)" if source is None else ""
    raise TypeError(
        f"show_ddp() takes a DDPInspector, a list of its records or a log dir, got {type(source).__name__}{hint}: "
        "e.g. ex.show_ddp(DDPInspector.load(log_dir, records=None))"
    )


def _records_source(records: list[Any], where: str) -> DDPSource:
    buckets: list[dict[str, Any]] = []
    ready: list[dict[str, Any]] = []
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise TypeError(f"DDP record {index} is a {type(record).__name__}, not a dict: pass DDPInspector records")
        kind = record.get("kind", "bucket")
        keys = BUCKET_KEYS if kind == "bucket" else READY_KEYS if kind == "ready" else None
        if keys is None:
            continue  # e.g. a log's "start" line
        missing = [key for key in keys if key not in record]
        if missing:
            raise ValueError(
                f"DDP record {index} ({kind}) lacks {missing}: pass records from "
                "DDPInspector.load(log_dir, records=None) or insp.gather()"
            )
        (buckets if kind == "bucket" else ready).append(record)
    ranks = sorted({r["rank"] for r in buckets + ready})
    label = f"{where}: {len(buckets)} bucket records from rank{'s' * (len(ranks) != 1)} {_join(ranks)}"
    return DDPSource(buckets=buckets, ready=ready, label=label)


def training_version(monitors: Sequence[UpdateRatioMonitor], ddp: DDPSource | None) -> tuple[Any, ...]:
    """A key that changes whenever the panel's content would: it is redrawn only then."""
    return (tuple((id(m), len(m.records)) for m in monitors), ddp.version() if ddp is not None else None)


def training_payload(
    monitors: Sequence[UpdateRatioMonitor], ddp: DDPSource | None, ddp_prefix: str = "", step: int | None = None
) -> Training:
    """The ``training`` traitlet: the ratio chart and last-step table, and the DDP figures and ready order.

    ``ddp_prefix`` goes before the DDP records' parameter names, which are those of ``ddp.module``: an
    explorer of the DDP wrapper itself passes ``"module."`` so they read as in its tree and ratio table.
    ``step``: the explorer's step the panel is drawn at, which the page compares with the live one (its lag mark).
    """
    if not monitors and ddp is None:
        return EMPTY.copy()
    return {
        "visible": True,
        "ratios": ratio_payload(monitors) if monitors else None,
        "ddp": ddp_payload(ddp, ddp_prefix) if ddp is not None else None,
        "step": step,
    }


def ratio_payload(monitors: Sequence[UpdateRatioMonitor]) -> Ratios:
    """Every watched optimizer's newest step as rows (the monitor's values, flagged), and the chart over steps."""
    recent = [monitor.records[-RECORDS_DRAWN:] for monitor in monitors]
    labels = _optimizer_labels(monitors)
    rows: list[RatioRow] = []
    for records, names in zip(recent, labels, strict=True):
        newest: dict[int, int] = {}
        for r in records:
            newest[r["optimizer"]] = max(newest.get(r["optimizer"], r["step"]), r["step"])
        for r in records:
            if newest.get(r["optimizer"]) == r["step"]:
                rows.append(_ratio_row(r, names[r["optimizer"]]))
    flat = [label for names in labels for label in names]
    payload: Ratios = {
        "rows": rows,
        "optimizers": flat,
        "low": RATIO_LOW,
        "high": RATIO_HIGH,
        "flagged": sum(1 for row in rows if row["flag"]),
        "png": None,
        "hover": None,
        "caption": "",
        "message": "",
    }
    if not rows:
        payload["message"] = f"No update ratios yet: they come at the next step of {', '.join(flat) or 'an optimizer'}."
        return payload
    drawn = _params_drawn(rows)
    if drawn is not None:
        payload["caption"] = f"{len(drawn)} of {len({r['param'] for r in rows})} parameters drawn: furthest from 1e-3"
    from ..plots import update_ratio_figure  # matplotlib only when drawing

    records = [r for records in recent for r in records]
    payload["png"], payload["hover"], payload["message"] = _png(
        lambda: update_ratio_figure(records, params=drawn, max_params=PARAMS_DRAWN),
        "the update-ratio chart",
    )
    return payload


def _optimizer_labels(monitors: Sequence[UpdateRatioMonitor]) -> list[list[str]]:
    """Per monitor, a label per optimizer it saw: its class, numbered when two share one (``SGD #2``)."""
    names = [[type(opt).__name__ for opt in monitor.optimizers] for monitor in monitors]
    flat = [name for group in names for name in group]
    seen: dict[str, int] = {}
    labels: list[list[str]] = []
    for group in names:
        labels.append([])
        for name in group:
            seen[name] = seen.get(name, 0) + 1
            labels[-1].append(f"{name} #{seen[name]}" if flat.count(name) > 1 else name)
    return labels


def _ratio_row(record: dict[str, Any], optimizer: str) -> RatioRow:
    ratio = record["ratio"]
    if not (math.isfinite(record["update_norm"]) and math.isfinite(record["weight_norm"])):
        flag = "nonfinite"  # the training diverged here: NaN/Inf in the update or the weight
    elif not math.isfinite(ratio):
        flag = "undefined"  # an all-zero weight has no ratio
    elif ratio < RATIO_LOW:
        flag = "low"
    elif ratio > RATIO_HIGH:
        flag = "high"
    else:
        flag = ""
    return {
        "param": record["param"],
        "optimizer": optimizer,
        "step": record["step"],
        "ratio": plain_number(ratio),
        "update_norm": plain_number(record["update_norm"]),
        "weight_norm": plain_number(record["weight_norm"]),
        "lr": plain_number(record["lr"]),
        "flag": flag,
    }


def _params_drawn(rows: list[RatioRow]) -> list[str] | None:
    """The parameters the chart draws when there are too many: furthest from 1e-3 first, in table order."""
    if len({row["param"] for row in rows}) <= PARAMS_DRAWN:
        return None

    def distance(row: RatioRow) -> float:
        ratio = row["ratio"]
        if not isinstance(ratio, float) or ratio <= 0:
            return -math.inf  # NaN or 0 has no place on the log scale: the table shows it
        return abs(math.log10(ratio / 1e-3))

    chosen = {row["param"] for row in sorted(rows, key=distance, reverse=True)[:PARAMS_DRAWN]}
    return [row["param"] for row in rows if row["param"] in chosen]


def ddp_payload(source: DDPSource, prefix: str = "") -> DDPPanel:
    """The bucket table and per-rank chart (PNG), and the newest step's gradient-ready order; ``prefix``
    goes before every parameter name (see ``training_payload``)."""
    from ..plots.distributed import bucket_table_figure, rank_chart_figure  # imports torch.distributed

    buckets, ready = source.records()
    if prefix:  # copies: the inspector's records stay as it recorded them
        buckets = [{**r, "params": [prefix + name for name in r["params"]]} for r in buckets]
        ready = [{**r, "param": prefix + r["param"]} for r in ready]
    inspector = source.inspector
    if inspector is not None:
        label = f"this process: rank {inspector.rank} of {inspector.world_size}"
        if inspector.world_size > 1:
            label += " (other ranks: give them log_dir=, then ex.show_ddp(log_dir))"
    else:
        label = source.label
    payload: DDPPanel = {
        "source": label,
        "ranks": sorted({r["rank"] for r in buckets}),
        "steps": len({r["step"] for r in buckets}),
        "step": max((r["step"] for r in buckets), default=None),
        "buckets_png": None,
        "buckets_hover": None,
        "ranks_png": None,
        "ranks_hover": None,
        "ready": ready_payload(ready),
        "message": "",
    }
    log_error = inspector.log_error if inspector is not None else None
    if not buckets:
        payload["message"] = "No DDP records yet: run a forward and backward of the DDP model."
    else:
        drawable = buckets
        table = _png(lambda: bucket_table_figure(drawable), "the bucket table")
        payload["buckets_png"], payload["buckets_hover"], table_error = table
        chart = _png(lambda: rank_chart_figure(drawable), "the per-rank chart")
        payload["ranks_png"], payload["ranks_hover"], chart_error = chart
        payload["message"] = " ".join(e for e in (table_error, chart_error) if e)
    if buckets and not ready and inspector is None:
        payload["message"] += " No gradient-ready records: DDPInspector.load(log_dir, records=None) reads them too."
    if log_error:
        payload["message"] += f" {log_error}"
    payload["message"] = payload["message"].strip()
    return payload


def ready_payload(ready: list[dict[str, Any]]) -> Ready:
    """The newest step's gradient-ready order on the lowest rank, and whether the other ranks agree."""
    if not ready:
        return {"step": None, "rank": None, "rows": [], "note": ""}
    step = max(r["step"] for r in ready)
    by_rank: dict[int, list[dict[str, Any]]] = {}
    for r in ready:
        if r["step"] == step:
            by_rank.setdefault(r["rank"], []).append(r)
    rank = min(by_rank)
    shown = sorted(by_rank[rank], key=lambda r: r["order"])
    order = [r["param"] for r in shown]
    others = {k: [r["param"] for r in sorted(v, key=lambda r: r["order"])] for k, v in by_rank.items() if k != rank}
    differ = [k for k, names in sorted(others.items()) if names != order]
    note = ""
    if others and not differ:
        note = f"the same order on rank{'s' * (len(others) != 1)} {_join(sorted(others))}"
    elif differ:
        note = f"rank{'s' * (len(differ) != 1)} {_join(differ)} ordered differently"
    rows: list[ReadyRow] = [
        {"order": r["order"], "param": r["param"], "ms": plain_number(r["seconds"] * 1e3)} for r in shown
    ]
    return {"step": step, "rank": rank, "rows": rows, "note": note}


def _png(draw: Callable[[], Figure], what: str) -> tuple[bytes | None, Hover | None, str]:
    """(PNG bytes, its hover, "") or, when drawing fails, (None, None, why): one failing figure never hides the
    others."""
    from ..plots.hover import figure_image  # matplotlib only when drawing

    try:
        png, hover = figure_image(draw())
    except Exception as exc:
        return None, None, f"could not draw {what}: {type(exc).__name__}: {exc}"
    return png, hover, ""


def _join(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers)
