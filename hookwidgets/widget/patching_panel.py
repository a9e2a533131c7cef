"""The patching panel: the last activation-patching sweep of the explorer, drawn, and its progress while it runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from ..core.diagnostics.patch_metrics import METRICS
from ..core.explorer import Explorer
from .patching_inputs import METRIC_CHOICES, boxes
from .protocol import Patching

EMPTY: Patching = {
    "available": False,
    "reason": "",
    "mode": "ids",
    "clean": "",
    "corrupted": "",
    "hint": "",
    "metric": METRIC_CHOICES[0],
    "tokens": [],
    "differs": [],
    "png": None,
    "hover": None,
    "caption": "",
    "progress": None,
    "error": "",
    "edits": "",
}
PUSH_EVERY_S = 0.1
"""Progress reaches the page at most this often: a sweep of short forwards would otherwise flood the comm."""


def patching_offer(explorer: Explorer) -> Patching:
    """The panel before any sweep: offered, with its boxes filled, where a sweep can start from the page; else hidden,
    with the reason."""
    offer = boxes(explorer)
    return {
        **EMPTY,
        "available": not offer.reason,
        "reason": offer.reason,
        "mode": offer.mode,
        "clean": offer.clean,
        "corrupted": offer.corrupted,
        "hint": offer.hint,
    }


def patching_payload(result: torch.Tensor, shown: Patching, edits: str) -> Patching:
    """The ``patching`` traitlet for a finished sweep ``(L, T)`` over the panel ``shown`` so far: its figure, what it
    tells under the mouse and what it measured, the colours said by the figure's own ``restoration``."""
    from ..plots import patch_sweep_figure  # matplotlib only when drawing
    from ..plots.hover import figure_image
    from ..plots.patching import DIFFERS, restoration

    layers, positions = result.shape
    name = getattr(result, "metric", "custom")
    metric = METRICS.get(name, "your metric")
    colours = restoration(getattr(result, "clean", None), getattr(result, "corrupted", None))
    differs = list(getattr(result, "differs", None) or [])
    where = "position" if len(differs) == 1 else f"{len(differs)} positions"
    marked = f"; {DIFFERS} marks the {where} where clean and corrupted differ" if differs else ""
    caption = (
        f"activation patching: {metric}, for the corrupted run with the clean activation of each of {layers} "
        f"layers patched in at each of {positions} positions ({colours.legend}){marked}"
    )
    png, hover = figure_image(patch_sweep_figure(result, title="patch sweep"))
    tokens = getattr(result, "tokens", None)
    return {
        **shown,
        "metric": name if name in METRIC_CHOICES else shown["metric"],
        "tokens": [str(t) for t in tokens] if tokens is not None else [],
        "differs": differs,
        "png": png,
        "hover": hover,
        "caption": caption,
        "progress": None,
        "error": "",
        "edits": edits,
    }


def without_sweep(
    shown: Patching, *, progress: list[int] | None = None, caption: str = "", error: str = ""
) -> Patching:
    """The panel ``shown`` with its boxes and no sweep (figure, tokens, edits gone): while one runs, or failed."""
    return {
        **shown,
        "png": None,
        "hover": None,
        "tokens": [],
        "differs": [],
        "edits": "",
        "progress": progress,
        "caption": caption,
        "error": error,
    }


class ProgressPush:
    """A ``progress(done, total)`` callback that shows the sweep's progress in the page, at most every 0.1 s, and
    passes every call on to the user's own callback."""

    def __init__(self, show: Callable[[int, int], None], user: Callable[[int, int], Any] | None) -> None:
        self._show, self._user = show, user
        self._next = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now >= self._next or done == total:
            self._next = now + PUSH_EVERY_S
            self._show(done, total)
        if self._user is not None:
            self._user(done, total)
