"""The figures issue 35's rows of bench/plots.py redraw, drawn as the widget draws them: ``tensor_views.draw`` (the
view the inspector picks), then ``figure_image`` under ``using_frame`` (the page's pane width and pixel ratio).

Shared with bench/plots_reference.py, which recorded the sizes of the same figures before issue 35 (its PNGs are
the "today's" reference of the payload rows): same tensors, same seeds, same titles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from matplotlib.figure import Figure

from hookwidgets.core.model.tokens import Sequences
from hookwidgets.widget.tensor_views import Context, draw

TOKENS = 32


@dataclass(frozen=True)
class Drawn:
    """A figure issue 35 names: its tensor, the view the inspector shows it in, and what that view needs."""

    name: str
    tensor: torch.Tensor
    view: str
    context: Context
    title: str

    def figure(self) -> Figure:
        """The matplotlib Figure the widget draws for it (under the caller's frame and theme)."""
        return draw(self.tensor, self.view, name="output", title=self.title, gradient=False, context=self.context)


def grid() -> Drawn:
    """A 64-map grid: a ReLU'd ``(2, 64, 56, 56)`` conv output (ResNet-18's layer1), the maps view."""
    tensor = torch.relu(torch.randn(2, 64, 56, 56, generator=torch.Generator().manual_seed(0)))
    return Drawn("64-map grid (64×56×56)", tensor, "maps", Context(), "layer1.0.conv1 · output")


def attention() -> Drawn:
    """A 12-head attention: softmax probabilities ``(1, 12, 32, 32)`` with token labels, the heads view (all heads)."""
    logits = torch.randn(1, 12, TOKENS, TOKENS, generator=torch.Generator().manual_seed(1))
    labels = [f"tok{i}" for i in range(TOKENS)]
    context = Context(Sequences([labels], None, (TOKENS,)), attention=True)
    return Drawn("12-head attention (12×32×32)", logits.softmax(-1), "heads", context, "h.0.attn · attention")


FIGURES: list[Callable[[], Drawn]] = [grid, attention]
"""Every figure of the resize and payload rows, in table order."""


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` in device pixels, from the PNG's IHDR chunk."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
