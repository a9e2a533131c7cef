"""The soak's model and its hooks: every hook kind attached to a small CNN that trains."""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from hookwidgets.core import GLOBAL_KINDS, Explorer

FULL_MODULES = ("features.conv", "features.bn", "head.fc")
"""Modules that get both full backward kinds; none is followed by an in-place op."""
LEGACY_MODULE = "head.pool"
"""The module that gets the legacy backward hook instead (torch refuses both on one module)."""


class SoakNet(nn.Module):
    """Conv, BatchNorm, ReLU, Dropout, a pooled Linear head: 5 classes from 3×8×8 images."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(conv=nn.Conv2d(3, 8, 3, padding=1), bn=nn.BatchNorm2d(8), act=nn.ReLU(), drop=nn.Dropout(0.1))
        )
        self.head = nn.Sequential(OrderedDict(pool=nn.AdaptiveAvgPool2d(2), flatten=nn.Flatten(), fc=nn.Linear(32, 5)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def attach_every_kind(ex: Explorer, model: nn.Module) -> None:
    """Forward kinds and ``grad`` on every module, full or legacy backward kinds, globals, params, nodes."""
    for path, _ in model.named_modules():
        action = "stats" if path.startswith("head") else "capture"
        ex.attach(path, ["forward_pre", "forward", "grad"], action)
        if path in FULL_MODULES:
            ex.attach(path, ["backward_pre", "backward"], action)
    ex.attach(LEGACY_MODULE, "legacy_backward", "stats")
    ex.attach("", list(GLOBAL_KINDS), "stats")
    for name, _ in model.named_parameters():
        ex.attach(name, ["grad", "post_accumulate"], "stats")
    nodes = [n["id"] for n in ex.graph()["nodes"]]
    for node in ("features.conv/ConvolutionBackward0#0", "head.fc/AccumulateGrad#weight"):
        assert node in nodes, nodes
        ex.attach(node, ["node_pre", "node"], "capture")
