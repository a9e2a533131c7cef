"""A tiny model whose module imports numpy (unused by the model) and a sibling helper."""

import numpy as np
import torch
from torch import nn

from . import scales


class ScaledNet(nn.Module):
    """A Linear layer whose output is scaled by a constant from a sibling module."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * scales.SCALE


def as_array(x: torch.Tensor) -> np.ndarray:
    """Why numpy is imported: a module-level dependency the exporter must intern, extern or mock."""
    return x.detach().numpy()
