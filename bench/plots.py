"""Feature-map grid to PNG: a 64-channel 56×56 activation through ``feature_map_figure`` + ``figure_png``.

Run: ``.venv/bin/python bench/plots.py [--pairs N] [--threads T]``. stdout is the markdown section for
bench/RESULTS.md (bench/README.md); progress goes to stderr.
The bar is absolute: the median B time ≤ 250 ms. A is the least a hand-written plot does — the same
64 tiles as one ``imshow`` in a 9-inch figure, saved as PNG, without labels, colour bar or NaN
marking — so the ratio B/A says what the labels and checks cost (or save).

Issue 35: a 64-map grid and a 12-head attention redrawn as the widget redraws them after the page reports a new
pane (``figure_image`` under ``using_frame``: 600 px at ratio 2, then 900 px at ratio 1), median ≤ 250 ms each;
and each figure's payload (PNG + hover values + hover description) against its PNG before issue 35 at the same CSS
size (``TODAY``, recorded by bench/plots_reference.py at c304aa0), ≤ 2×.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import statistics
import sys
import time

import torch
from _protocol import MIN_PAIRS, WARMUP_PAIRS, add_arguments, compare, machine, quantile, revision, set_threads
from matplotlib.figure import Figure
from plots_figures import FIGURES, Drawn, png_size

from hookwidgets.plots import feature_map_figure, figure_png, summary_heatmap_figure
from hookwidgets.plots.frame import Frame, using_frame
from hookwidgets.plots.hover import figure_image

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


_png_size = png_size

RESIZES = (Frame(600, 2.0), Frame(900, 1.0))
"""The panes a resize goes between: a 600 px window on a HiDPI screen, a 900 px one at ratio 1."""
TODAY_COMMIT = "c304aa0"
TODAY: dict[str, tuple[int, int, int]] = {
    "64-map grid (64×56×56)": (217302, 411, 371),  # sha256 6bd24735ae53
    "12-head attention (12×32×32)": (255899, 1152, 1152),  # sha256 cacc5b85b886
}
"""Each figure's PNG before issue 35, (bytes, width px, height px) at 96 dpi, as bench/plots_reference.py printed
them at commit ``TODAY_COMMIT``: the reference of the payload rows."""
PAYLOAD_BAR = 2.0


def _draw(drawn: Drawn, frame: Frame) -> tuple[bytes, dict]:
    """The figure's PNG and hover as the widget makes them for a pane of ``frame``."""
    with using_frame(frame):
        png, hover = figure_image(drawn.figure())
    return png, dict(hover)


def _hover_bytes(hover: dict) -> tuple[int, int]:
    """(bytes of the values the page reads under the mouse, bytes of the rest of the description as JSON)."""
    values = 0
    for region in hover.get("regions", []):
        values += len(region.get("values", b""))
        values += sum(len(series["values"]) for series in region.get("series", []))

    def stripped(value: object) -> object:
        if isinstance(value, bytes):
            return ""
        if isinstance(value, dict):
            return {k: stripped(v) for k, v in value.items()}
        if isinstance(value, list):
            return [stripped(v) for v in value]
        return value

    return values, len(json.dumps(stripped(hover), ensure_ascii=False).encode())


def resize_lines(pairs: int) -> list[str]:
    """Each figure redrawn for one pane, then the other, ``pairs`` times after warm-ups (no cache: each draw is new)."""
    rows = []
    for build in FIGURES:
        drawn = build()
        times: dict[Frame, list[float]] = {frame: [] for frame in RESIZES}
        sizes: dict[Frame, tuple[int, int]] = {}
        for i in range(WARMUP_PAIRS + pairs):
            for frame in RESIZES:
                gc.collect()
                start = time.perf_counter()
                png, _ = _draw(drawn, frame)
                seconds = time.perf_counter() - start
                if i >= WARMUP_PAIRS:
                    times[frame].append(seconds * 1e3)
                sizes[frame] = png_size(png)
        for frame in RESIZES:
            ms = times[frame]
            median = statistics.median(ms)
            print(f"{drawn.name} at {frame.width} px ×{frame.ratio:g}: median {median:.1f} ms", file=sys.stderr)
            width, height = sizes[frame]
            css = width / frame.ratio
            fits = "" if css <= frame.width + 0.5 else ", wider than the pane"
            rows.append(
                f"| redraw after a resize: {drawn.name}, {frame.width} px × {frame.ratio:g} | {median:.1f} | "
                f"{quantile(ms, 0.1):.1f}–{quantile(ms, 0.9):.1f} | {width}×{height} "
                f"({css:.0f}×{height / frame.ratio:.0f} CSS{fits}) | ≤ {BAR_MS:.0f} ms | "
                f"{'PASS' if median <= BAR_MS else 'OVER'} |"
            )
    return [
        "",
        "### Redraw after a resize (issue 35)",
        "",
        "The page reports a new pane; the widget redraws each figure for it: `tensor_views.draw` (the view the "
        "inspector shows: maps of a `(2, 64, 56, 56)` ReLU'd conv output; all heads of `(1, 12, 32, 32)` softmax "
        "probabilities with 32 token labels), then `figure_image` (PNG at 96 × ratio dpi and the hover "
        f"description) under `using_frame`, alternately for {RESIZES[0].width} px at ratio {RESIZES[0].ratio:g} and "
        f"{RESIZES[1].width} px at ratio {RESIZES[1].ratio:g}; {pairs} of each after {WARMUP_PAIRS} warm-ups, each "
        "after a full garbage collection. The PNG's size says the figure followed the pane (CSS px ≤ the width). "
        f"Bar: median ≤ {BAR_MS:.0f} ms.",
        "",
        "| figure | median ms | p10–p90 ms | PNG px | bar | verdict |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def payload_lines() -> list[str]:
    """What each figure sends to the page, against its PNG before issue 35 at the same CSS size."""
    rows = []
    for build in FIGURES:
        drawn = build()
        today, today_w, today_h = TODAY[drawn.name]
        frames = [(Frame(today_w, 1.0), True), *((frame, False) for frame in RESIZES)]
        for frame, barred in frames:
            png, hover = _draw(drawn, frame)
            values, described = _hover_bytes(hover)
            total = len(png) + values + described
            width, height = png_size(png)
            ratio = total / today
            bar = f"≤ {PAYLOAD_BAR:g}×" if barred else "—"
            verdict = ("PASS" if ratio <= PAYLOAD_BAR else "OVER") if barred else "—"
            rows.append(
                f"| payload: {drawn.name}, {frame.width} px × {frame.ratio:g} | {total / 1024:.1f} KiB | "
                f"{today / 1024:.1f} KiB ({today_w}×{today_h}) | {len(png) / 1024:.1f} KiB ({width}×{height}) | "
                f"{values / 1024:.1f} KiB | {described / 1024:.1f} KiB | {ratio:.2f}× | {bar} | {verdict} |"
            )
    return [
        "",
        "### Payload per figure (issue 35)",
        "",
        "What the widget sends for one figure: the PNG, the hover values (float32, a binary buffer) and the rest of "
        "the hover description (JSON), against the same figure's PNG before issue 35 (`figure_png` at 96 dpi and the "
        f"figure's own size, recorded by `bench/plots_reference.py` at commit {TODAY_COMMIT}). The barred row draws "
        "for a pane as wide as that PNG at ratio 1 (the same CSS size): ≤ "
        f"{PAYLOAD_BAR:g}×. The rows at the resize's panes are stated (a ratio-2 PNG holds 4× the pixels).",
        "",
        "| figure | payload | baseline: PNG before issue 35 | PNG | values | description | payload / baseline "
        "| bar | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]


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
        *resize_lines(args.pairs),
        *payload_lines(),
    ]
    print("\n".join(lines))
    print(f"took {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
