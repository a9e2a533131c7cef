"""Bugs the fuzzer found, kept as plain tests that name the case."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer

from ._state import all_hook_state


class DictOut(nn.Module):
    """Two Linears whose outputs come as a dict: full backward hooks cannot fire on it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.lin2 = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"main": self.lin(x), "side": self.lin2(x)}


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.inner = DictOut()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        return out["main"] + 3 * out["side"]


@pytest.mark.filterwarnings("ignore:For backward hooks to be called")  # torch's, about the dict output
def test_a_backward_pre_callable_on_a_dict_output_gets_torchs_signature_and_can_replace_the_gradient():
    """Found by the fuzzer: the tensor-hook stand-in for backward_pre on a dict output called the user's
    ``hook(module, grad_output)`` with the gradient alone."""
    model = Net()
    twin = copy.deepcopy(model)
    x = torch.randn(3, 4)
    seen: list[tuple[Any, int]] = []

    def double(module: nn.Module, grad_output: tuple) -> tuple:
        seen.append((module, len(grad_output)))
        return tuple(2 * g for g in grad_output)

    before = all_hook_state(model)
    with Explorer(model) as ex:
        info = ex.attach("inner", "backward_pre", action=double)
        model(x).sum().backward()
        assert info.last_error is None and info.fired == 2  # one per dict value that requires grad
        assert "output is a dict" in info.note
    assert seen == [(model.inner, 1), (model.inner, 1)]
    twin(x).sum().backward()
    for name in ("lin", "lin2"):
        got, want = getattr(model.inner, name).weight.grad, getattr(twin.inner, name).weight.grad
        torch.testing.assert_close(got, 2 * want)
    assert all_hook_state(model) == before
