"""What a first look at the explorer reads (issue 36, first steps): a failed shape probe named as such, the common
hook kinds marked for the inspector's first group, and attribution methods named in words."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.core import ProbeFailedWarning

from ._messages import browser_sends


def test_a_failed_shape_probe_is_named_in_the_status():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    with pytest.warns(ProbeFailedWarning), HookExplorer(model, example_inputs=torch.randn(1, 5)) as ex:
        output = ex.view.status["output"]
        assert output["kind"] == "none"
        assert output["probe_failed"] == (
            "the shape probe failed: RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x5 and 4x3)"
        )
        browser_sends(ex.view, type="run")  # the example inputs fail again: the error says why, the run bar still
        assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in ex.view.error
        assert ex.view.status["output"]["probe_failed"].startswith("the shape probe failed: RuntimeError")


def test_a_probe_that_worked_names_no_failure(explorer):
    assert explorer.view.status["output"]["probe_failed"] == ""
