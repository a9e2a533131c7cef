"""Bucket table, per-rank chart and update-ratio figure from hand-made records."""

from __future__ import annotations

import math

import pytest

from hookwidgets.distributed.summary import bucket_rows, rank_steps
from hookwidgets.plots import figure_png, update_ratio_figure
from hookwidgets.plots.distributed import bucket_table_figure, rank_chart_figure


def _bucket(rank: int, step: int, bucket: int, norm: float, seconds: float, error: float | None = None) -> dict:
    params = ["fc.weight", "fc.bias"] if bucket == 0 else ["a", "b", "c", "d", "e"]
    return {
        "kind": "bucket", "rank": rank, "step": step, "bucket": bucket, "numel": 10 * (bucket + 1),
        "bytes": 40 * (bucket + 1), "params": params, "grad_norm": norm, "reduced_norm": 1.0,
        "seconds": seconds, "compression_error": error,
    }  # fmt: skip


RECORDS = [
    _bucket(0, 0, 0, 3.0, 0.010),
    _bucket(1, 0, 0, 4.0, 0.030),
    _bucket(0, 1, 0, 1.0, 0.001, 1e-4),
    _bucket(1, 1, 0, 3.0, 0.003, 3e-4),
    _bucket(0, 1, 1, 2.0, 0.002, 2e-4),
    _bucket(1, 1, 1, 4.0, 0.004, 1e-4),
    {"kind": "ready", "rank": 0, "step": 1, "order": 0, "param": "fc.bias", "seconds": 0.0},
]


def test_bucket_rows_aggregate_ranks_of_the_newest_step():
    rows = bucket_rows(RECORDS)
    assert [(r["step"], r["bucket"], r["ranks"]) for r in rows] == [(1, 0, 2), (1, 1, 2)]
    assert rows[0]["grad_norm_mean"] == 2.0 and rows[0]["seconds_median"] == pytest.approx(0.002)
    assert rows[0]["seconds_max"] == 0.003 and rows[0]["compression_error_max"] == 3e-4
    assert rows[1]["names"] == "a, b, c, … +2" and rows[1]["params"] == 5
    first = bucket_rows(RECORDS, step=0)
    assert len(first) == 1 and first[0]["compression_error_max"] is None


def test_rank_steps_sum_seconds_and_combine_norms():
    per_rank = rank_steps(RECORDS)
    assert sorted(per_rank) == [0, 1]
    assert per_rank[0]["steps"] == [0, 1]
    assert per_rank[0]["seconds"] == pytest.approx([0.010, 0.003])
    assert per_rank[1]["grad_norm"] == pytest.approx([4.0, 5.0])  # sqrt(3² + 4²)


def test_bucket_table_figure_shows_each_bucket():
    fig = bucket_table_figure(RECORDS)
    texts = [cell.get_text().get_text() for cell in fig.axes[0].tables[0].get_celld().values()]
    assert "a, b, c, … +2" in texts and "3.00e-04" in texts and "fc.weight, fc.bias" in texts
    assert "step 1 (2 ranks)" in fig.axes[0].get_title()
    assert figure_png(fig).startswith(b"\x89PNG")


def test_rank_chart_has_a_line_per_rank_in_each_panel():
    fig = rank_chart_figure(RECORDS)
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    assert list(fig.axes[0].lines[1].get_ydata()) == pytest.approx([30.0, 7.0])
    assert figure_png(fig).startswith(b"\x89PNG")


def test_empty_records_draw_a_hint_not_an_error():
    assert "no bucket records yet" in bucket_table_figure([]).axes[0].get_title()
    assert figure_png(rank_chart_figure([])).startswith(b"\x89PNG")
    assert "no update ratios" in update_ratio_figure([]).axes[0].get_title()


def test_update_ratio_figure_skips_undefined_ratios_and_limits_lines():
    records = [
        {"step": s, "param": name, "ratio": ratio}
        for s in range(3)
        for name, ratio in (("w", 1e-3 * (s + 1)), ("b", math.nan), ("v", 2e-2))
    ]
    fig = update_ratio_figure(records)
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert labels == ["w", "v", "1e-3 guide"]
    assert list(fig.axes[0].lines[0].get_ydata()) == pytest.approx([1e-3, 2e-3, 3e-3])
    assert [line.get_label() for line in update_ratio_figure(records, max_params=1).axes[0].lines] == [
        "w",
        "1e-3 guide",
    ]
    assert [line.get_label() for line in update_ratio_figure(records, params=["v"]).axes[0].lines] == [
        "v",
        "1e-3 guide",
    ]
