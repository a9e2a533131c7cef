"""Explorers set up the same way by several widget tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from hookwidgets import HookExplorer
from tests.conftest import LateInPlace

from ._messages import browser_sends


@contextlib.contextmanager
def backward_hook_an_in_place_op_breaks(image: torch.Tensor) -> Iterator[HookExplorer]:
    """A page-attached full backward hook on ``conv``, then the model made to modify conv's output in place."""
    model = LateInPlace()
    with HookExplorer(model, example_inputs=image) as ex:
        browser_sends(ex.view, type="attach", path="conv", kind="backward", action="capture", edit=None)
        assert [h["kind"] for h in ex.view.hooks] == ["backward"]
        model.inplace = True
        yield ex
