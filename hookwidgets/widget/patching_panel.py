"""The patching panel: the last activation-patching sweep of the explorer, drawn, and its progress while it runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from .protocol import Patching

EMPTY: Patching = {"png": None, "hover": None, "caption": "", "progress": None, "error": ""}
PUSH_EVERY_S = 0.1
"""Progress reaches the page at most this often: a sweep of short forwards would otherwise flood the comm."""


def patching_payload(result: torch.Tensor, default_metric: bool) -> Patching:
    """The ``patching`` traitlet for a finished sweep ``(L, T)``: its figure, what it tells under the mouse and what
    it measured."""
    from ..plots import patch_sweep_figure  # matplotlib only when drawing
    from ..plots.hover import figure_image

    layers, positions = result.shape
    metric = "the clean top token's logit, minus its corrupted value" if default_metric else "your metric"
    caption = (
        f"activation patching: {metric}, for the corrupted run with the clean activation of each of {layers} "
        f"layers patched in at each of {positions} positions (red: the patch restores the clean prediction)"
    )
    png, hover = figure_image(patch_sweep_figure(result, title="patch sweep"))
    return {"png": png, "hover": hover, "caption": caption, "progress": None, "error": ""}


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
