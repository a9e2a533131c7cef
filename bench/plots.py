"""Feature-map grid to PNG: a 64-channel 56×56 activation through ``feature_map_figure`` + ``figure_png``.

Run: ``.venv/bin/python bench/plots.py [--pairs N] [--threads T]``.
The bar is absolute: the median B time ≤ 250 ms. A is the least a hand-written plot does — the same
64 tiles as one ``imshow`` in a figure of the same size, saved as PNG at the same dpi, without
labels, colour bar or NaN marking — so the ratio B/A says what the labels and checks cost.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time

import numpy as np
import torch
from _protocol import MIN_PAIRS, add_arguments, compare, machine, quantile, revision, set_threads
from matplotlib.figure import Figure

from hookwidgets.plots import feature_map_figure, figure_png

BAR_MS = 250.0


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs must be at least {MIN_PAIRS} (DESIGN.md, Measuring)")
    set_threads(args.threads)
    started = time.perf_counter()
    print(f"$ {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')} — {machine()}")
    print(f"hookwidgets at {revision()}")
    tensor = torch.relu(torch.randn(2, 64, 56, 56, generator=torch.Generator().manual_seed(0)))

    def ours() -> bytes:
        return figure_png(feature_map_figure(tensor, max_channels=64, title="layer1.0.conv1"))

    png = ours()
    print(
        f"PNG: {len(png) / 1024:.0f} KiB, 64 labelled tiles; "
        f"hand-written PNG {len(hand_written(tensor)) / 1024:.0f} KiB"
    )
    result = compare(
        "feature_map_figure+figure_png vs hand-written", lambda: hand_written(tensor), ours, pairs=args.pairs
    )
    b_ms = [t * 1e3 for t in result.b_s]
    verdict = "PASS" if statistics.median(b_ms) <= BAR_MS else "OVER"
    print(
        f"\n| 64×56×56 grid to PNG | median {statistics.median(b_ms):.0f} ms | p10–p90 "
        f"{quantile(b_ms, 0.1):.0f}–{quantile(b_ms, 0.9):.0f} ms | hand-written {result.a_ms:.0f} ms | "
        f"ratio {result.median:.2f}× ({result.p10:.2f}–{result.p90:.2f}) | bar ≤ {BAR_MS:.0f} ms | {verdict} |"
    )
    print(f"\ntook {time.perf_counter() - started:.0f} s")
    assert np.frombuffer(png[:8], np.uint8).tobytes() == b"\x89PNG\r\n\x1a\n"


if __name__ == "__main__":
    main()
