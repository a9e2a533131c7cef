"""Feature-map grid to PNG: a 64-channel 56×56 activation through ``feature_map_figure`` + ``figure_png``.

Run: ``.venv/bin/python bench/plots.py [--pairs N] [--threads T]``. stdout is the markdown section for
bench/RESULTS.md (bench/README.md); progress goes to stderr.
The bar is absolute: the median B time ≤ 250 ms. A is the least a hand-written plot does — the same
64 tiles as one ``imshow`` in a 9-inch figure, saved as PNG, without labels, colour bar or NaN
marking — so the ratio B/A says what the labels and checks cost (or save).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time

import torch
from _protocol import MIN_PAIRS, WARMUP_PAIRS, add_arguments, compare, machine, quantile, revision, set_threads
from matplotlib.figure import Figure

from hookwidgets.plots import feature_map_figure, figure_png, summary_heatmap_figure

LAYERS, STEPS = 62, 40  # ResNet-18's modules, and a summary 40 steps long

BAR_MS = 250.0
TITLE = "layer1.0.conv1"


def hand_written(tensor: torch.Tensor) -> bytes:
    """8×8 tiles with NumPy, one imshow, savefig: the baseline a user could write in ten lines."""
    maps = tensor[0].numpy()
    tiles = maps.reshape(8, 8, 56, 56).transpose(0, 2, 1, 3).reshape(8 * 56, 8 * 56)
    fig = Figure(figsize=(9.0, 9.0))
    ax = fig.add_subplot()
    ax.imshow(tiles, cmap="viridis", interpolation="nearest")
    ax.set_axis_off()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96)
    return buffer.getvalue()


def summary_rows() -> tuple[list[dict], list[str]]:
    """``ex.summary()``-like rows: a gradient norm per layer and step, layer names as ResNet-18's."""
    layers = [""] + [f"layer{i // 15 + 1}.{i % 15}.downsample.{i % 3}" for i in range(LAYERS - 1)]
    generator = torch.Generator().manual_seed(1)
    norms = (torch.rand(LAYERS, STEPS, generator=generator) + 0.1).tolist()
    rows = [{"path": t, "step": s + 1, "grad_norm": norms[i][s]} for s in range(STEPS) for i, t in enumerate(layers)]
    return rows, layers


def hand_written_heatmap(rows: list[dict], layers: list[str]) -> bytes:
    """The heatmap as one usually writes it: imshow, a label per layer and per step, a colour bar, tight_layout."""
    grid = torch.tensor([[r["grad_norm"] for r in rows[i :: len(layers)]] for i in range(len(layers))])
    fig = Figure(figsize=(min(10.0, 2.6 + 0.35 * STEPS), min(10.0, 1.2 + 0.22 * len(layers))))
    ax = fig.add_subplot()
    image = ax.imshow(grid.numpy(), cmap="viridis", aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(layers)), [t or "(model)" for t in layers], fontsize=7)
    ax.set_xticks(range(STEPS), [str(s + 1) for s in range(STEPS)], fontsize=7)
    ax.set_title("grad_norm", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96)
    return buffer.getvalue()


def heatmap_lines(pairs: int) -> list[str]:
    """The summary heatmap the live view redraws, against the same figure written by hand (no bar)."""
    rows, layers = summary_rows()
    result = compare(
        "summary_heatmap_figure+figure_png vs hand-written",
        lambda: hand_written_heatmap(rows, layers),
        lambda: figure_png(summary_heatmap_figure(rows, "grad_norm", layers=layers)),
        pairs=pairs,
        show=False,
    )
    print(result.line(), file=sys.stderr, flush=True)
    b_ms = [t * 1e3 for t in result.b_s]
    return [
        "",
        "### The summary heatmap, redrawn by live updates (issue 6, no bar)",
        "",
        f"B = `figure_png(summary_heatmap_figure(rows, 'grad_norm'))` for {LAYERS} layers × {STEPS} steps (log "
        "colour scale, NaN/Inf checks, at most a dozen step numbers, margins measured from the widest label). "
        "A = the same heatmap written by hand: `imshow`, a label per layer and per step, a colour bar, "
        "`tight_layout`. Live updates redraw the summary within 3% of the loop's time, so this cost sets how "
        "often it refreshes while a loop runs.",
        "",
        "| figure | median B ms | p10–p90 B ms | baseline: hand-written ms | B/A median (p10–p90) | bar | verdict |",
        "|---|---|---|---|---|---|---|",
        f"| {LAYERS}×{STEPS} summary heatmap to PNG | {statistics.median(b_ms):.1f} | "
        f"{quantile(b_ms, 0.1):.1f}–{quantile(b_ms, 0.9):.1f} | {result.a_ms:.1f} | "
        f"{result.median:.2f}× ({result.p10:.2f}–{result.p90:.2f}) | — | — |",
    ]


def _png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` from the PNG's IHDR chunk."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs must be at least {MIN_PAIRS} (the protocol of bench/_protocol.py)")
    set_threads(args.threads)
    command = " ".join([os.path.relpath(sys.executable), *sys.argv])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    tensor = torch.relu(torch.randn(2, 64, 56, 56, generator=torch.Generator().manual_seed(0)))
    build_ms: list[float] = []
    render_ms: list[float] = []

    def ours() -> bytes:
        start = time.perf_counter()
        fig = feature_map_figure(tensor, max_channels=64, title=TITLE)
        middle = time.perf_counter()
        png = figure_png(fig)
        build_ms.append((middle - start) * 1e3)
        render_ms.append((time.perf_counter() - middle) * 1e3)
        return png

    png, baseline_png = ours(), hand_written(tensor)
    assert png[:8] == baseline_png[:8] == b"\x89PNG\r\n\x1a\n"
    build_ms.clear()
    render_ms.clear()
    result = compare(
        "feature_map_figure+figure_png vs hand-written",
        lambda: hand_written(tensor),
        ours,
        pairs=args.pairs,
        show=False,
    )
    print(result.line(), file=sys.stderr, flush=True)
    timed = slice(WARMUP_PAIRS, None)  # the warm-up calls are recorded too
    b_ms = [t * 1e3 for t in result.b_s]
    median_ms = statistics.median(b_ms)
    verdict = "PASS" if median_ms <= BAR_MS else "OVER"
    (width, height), (base_w, base_h) = _png_size(png), _png_size(baseline_png)
    lines = [
        "## Feature-map grid to PNG (issue 5)",
        "",
        f"`{command}`, {date}; {machine()}; hookwidgets at {revision()}. "
        f"1-min load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        "B = `figure_png(feature_map_figure(x, max_channels=64))` for a ReLU'd `(2, 64, 56, 56)` tensor: 64 tiles "
        "composed in NumPy (colour LUT, one-pixel separators, dark label boxes, NaN/Inf check), shown 1:1 as one "
        "RGBA `imshow`, the 64 channel numbers as matplotlib texts, with a title and a colour bar, PNG at zlib "
        "level 1 "
        f"({width}×{height} px, {len(png) / 1024:.0f} KiB). A = the least a hand-written plot does: the same "
        "64 tiles as one `imshow` in a 9×9-inch figure, no labels, no colour bar, default PNG settings "
        f"({base_w}×{base_h} px, {len(baseline_png) / 1024:.0f} KiB). Interleaved pairs after "
        f"{WARMUP_PAIRS} warm-ups, {len(result.ratios)} pairs; the bar is absolute: median B ≤ {BAR_MS:.0f} ms. "
        "matplotlib draws on one thread, so `--threads` does not matter here.",
        "",
        "| figure | median B ms | p10–p90 B ms | baseline: hand-written ms | B/A median (p10–p90) | bar | verdict |",
        "|---|---|---|---|---|---|---|",
        f"| 64×56×56 grid to PNG | {median_ms:.1f} | {quantile(b_ms, 0.1):.1f}–{quantile(b_ms, 0.9):.1f} | "
        f"{result.a_ms:.1f} | {result.median:.2f}× ({result.p10:.2f}–{result.p90:.2f}) | ≤ {BAR_MS:.0f} ms | "
        f"{verdict} |",
        "",
        "### Where B's time goes (medians of the same timed calls)",
        "",
        "| part | median ms |",
        "|---|---|",
        f"| `feature_map_figure` (NumPy composition, Figure, colour bar) | {statistics.median(build_ms[timed]):.1f} |",
        f"| `figure_png` (Agg draw, PNG encoding) | {statistics.median(render_ms[timed]):.1f} |",
        *heatmap_lines(args.pairs),
    ]
    print("\n".join(lines))
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
