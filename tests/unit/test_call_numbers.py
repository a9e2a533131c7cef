"""Firings of a module called several times in one step name the forward call they belong to, for every kind."""

import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer

from ..conftest import hook_state


class Twice(nn.Module):
    """Calls ``l`` twice in a row, then ``fc``: ``l``'s gradients differ between its two calls."""

    def __init__(self) -> None:
        super().__init__()
        self.l, self.fc = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.l(self.l(x)))


def expected_output_grads(model: Twice, x: torch.Tensor) -> list[torch.Tensor]:
    """The gradient of class 0's score at the output of each call of ``l``, in forward order, by hand."""
    first = model.l(x)
    second = model.l(first)
    first.retain_grad()
    second.retain_grad()
    model.fc(second)[:, 0].sum().backward()
    return [first.grad, second.grad]


def by_call(records) -> dict[int, torch.Tensor]:
    return {r.call: r.tensors.get("grad_output.0", r.tensor) for r in records}


@pytest.mark.parametrize(
    ("target", "kinds"),
    [
        ("l", ["backward_pre", "backward", "grad"]),
        ("", ["global_backward_pre", "global_backward", "global_grad"]),
    ],
)
def test_backward_kinds_number_calls_in_forward_order_like_grad(target, kinds):
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    expected = expected_output_grads(model, x)
    model.zero_grad(set_to_none=True)
    before = hook_state(model)
    with Explorer(model, x) as ex:
        ex.attach(target, kinds)
        ex.run(x, target=0)
        for kind in kinds:
            records = ex.captures["l"][kind]
            assert [r.call for r in records] == [1, 0], kind  # the backward reaches the second call first
            got = by_call(records)
            for call in (0, 1):
                torch.testing.assert_close(got[call], expected[call], msg=f"{kind} call {call}")
    assert hook_state(model) == before


def test_legacy_backward_numbers_calls_in_forward_order():
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    with Explorer(model, x) as ex, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex.attach("l", ["legacy_backward", "grad"])
        ex.run(x, target=0)
        assert [r.call for r in ex.captures["l"]["legacy_backward"]] == [1, 0]
        assert [r.call for r in ex.captures["l"]["grad"]] == [1, 0]


def test_calls_are_numbered_per_step_over_several_steps():
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(2, 4, requires_grad=True)
    with Explorer(model, x) as ex:
        ex.attach("l", ["backward_pre", "backward"])
        for _ in range(3):
            model(x).sum().backward()
        for kind in ("backward_pre", "backward"):
            assert [(r.step, r.call) for r in ex.captures["l"][kind]] == [
                (1, 1),
                (1, 0),
                (2, 1),
                (2, 0),
                (3, 1),
                (3, 0),
            ]
