"""The in-place collision is told from other errors by torch's message, in each spelling torch has used."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core.hooks.collisions import is_inplace_collision

TAIL = (
    " is a view and is being modified inplace. This view was created inside a custom Function (or because an input "
    "was returned as-is) and the autograd logic to handle view+inplace would override the custom backward associated "
    "with the custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning "
    "the output of the custom Function."
)


@pytest.mark.parametrize(
    "node",
    [
        "BackwardHookFunction",  # torch 2.13
        "BackwardHookFunctionBackward",  # torch 2.11 (seen on the CUDA machine)
    ],
)
def test_torchs_message_in_each_spelling_is_a_collision(node):
    assert is_inplace_collision(RuntimeError(f"Output 0 of {node}{TAIL}"))


def test_other_errors_are_not_collisions():
    assert not is_inplace_collision(RuntimeError(f"Output 0 of SelectBackward0{TAIL}"))
    assert not is_inplace_collision(ValueError(f"Output 0 of BackwardHookFunction{TAIL}"))
    assert not is_inplace_collision(None)


def test_the_message_this_torch_raises_is_a_collision():
    layer = nn.Linear(3, 3)
    layer.register_full_backward_hook(lambda *args: None)
    with pytest.raises(RuntimeError) as caught:
        layer(torch.randn(2, 3, requires_grad=True)).add_(1)
    assert is_inplace_collision(caught.value)
