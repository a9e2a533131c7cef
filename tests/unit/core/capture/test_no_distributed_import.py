"""Statistics and parameter hooks of a plain model never import torch.distributed.tensor (~0.8 s) or .fsdp: a DTensor
or an FSDP module is told by a lookup of its class, if imported."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import torch
from torch import nn
from hookwidgets.core import Explorer

model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
with Explorer(model) as ex:
    ex.attach("", ["global_forward", "global_grad"], action="stats")
    ex.attach("0.weight", ["grad", "post_accumulate"], action="stats")  # checked for FSDP at attach
    model(torch.randn(2, 4, requires_grad=True)).sum().backward()
    assert ex.summary(), "the stats hooks fired"
print(sorted(m for m in ("torch.distributed.tensor", "torch.distributed.fsdp") if m in sys.modules))
"""


def test_a_stats_step_on_a_plain_model_imports_no_distributed_package():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
