"""preserved_state: what a run changes in grads, buffers, RNG and modes is put back, from one walk of the modules."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import _torch
from hookwidgets.core.model.modules import modules_of
from hookwidgets.core.model.preserved_state import preserved_state


class Writes(nn.Module):
    """Writes its buffers in every way a forward can: in place, through ``.data`` and numpy, resized, replaced."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(3)
        self.register_buffer("inplace", torch.zeros(3))
        self.register_buffer("through_data", torch.zeros(3))
        self.register_buffer("through_numpy", torch.zeros(3))
        self.register_buffer("resized", torch.arange(4.0))
        self.register_buffer("replaced", torch.zeros(()))
        self.register_buffer("removed", torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.inplace.add_(1)
        self.through_data.data.add_(1)  # .data has a version counter of its own: the buffer's does not move
        self.through_numpy.numpy()[:] = 5  # numpy writes move no version counter either
        self.resized.resize_(2).fill_(9)
        self.replaced = self.replaced + 1
        del self._buffers["removed"]
        self.register_buffer("added", torch.ones(1))
        return self.bn(x)


def state_of(model: nn.Module) -> tuple:
    """Buffers (names, objects, values), grads (objects) and modes, to compare before and after."""
    buffers = [(m, list(m._buffers.items()), [b.clone() for b in m._buffers.values()]) for m in model.modules()]
    return buffers, [(p, p.grad) for p in model.parameters()], [m.training for m in model.modules()]


def assert_as_found(model: nn.Module, before: tuple) -> None:
    buffers, grads, modes = before
    for module, items, values in buffers:
        assert list(module._buffers.items()) == items  # the same names, holding the same objects, in order
        assert all(torch.equal(b, v) for b, v in zip(module._buffers.values(), values, strict=True))
    assert all(p.grad is g for p, g in grads)
    assert [m.training for m in model.modules()] == modes


@pytest.mark.parametrize("mode", ["train", "eval", None])
def test_every_way_a_forward_writes_its_buffers_is_put_back_also_when_the_body_raises(mode):
    model = Writes().train()
    model.bn.weight.grad = torch.ones(3)
    before = state_of(model)
    seen = []

    def body() -> None:
        with preserved_state(model, mode=mode), torch.no_grad():
            model(torch.randn(4, 3))
            seen.extend([model.inplace[0].item(), model.through_data[0].item(), model.through_numpy[0].item()])
            raise RuntimeError("after the forward")

    with pytest.raises(RuntimeError, match="after the forward"):
        body()
    assert seen == [1, 1, 5]  # the body saw every write
    assert_as_found(model, before)
    # BatchNorm's kernel updates the running statistics in place without moving their version counter
    assert torch.equal(model.bn.running_mean, torch.zeros(3)) and model.bn.num_batches_tracked.item() == 0


def test_a_backward_in_the_body_leaves_each_grad_object_and_value_as_found():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))
    kept = torch.full_like(model[0].weight, 2.0)
    model[0].weight.grad = kept
    with preserved_state(model):
        model(torch.randn(4, 3)).sum().backward()
        assert model[0].weight.grad is not kept and model[1].bias.grad is not None
    assert model[0].weight.grad is kept and torch.all(kept == 2.0)
    assert model[1].weight.grad is None and model[1].bias.grad is None


class CountsTrainCalls(nn.Sequential):
    """Counts the calls of its ``train`` (a transformers model overrides it too)."""

    calls = 0

    def train(self, mode: bool = True) -> CountsTrainCalls:
        type(self).calls += 1
        return super().train(mode)


def test_a_model_already_in_the_runs_mode_is_not_walked_again_and_one_that_is_not_is_put_in_it_and_back():
    model = CountsTrainCalls(nn.Linear(2, 2), nn.Dropout(0.5)).eval()
    CountsTrainCalls.calls = 0
    with preserved_state(model):
        assert not any(m.training for m in model.modules())
    assert CountsTrainCalls.calls == 0
    model[1].train()  # one module in training: the whole model is put in eval for the body
    with preserved_state(model):
        assert not any(m.training for m in model.modules())
    assert CountsTrainCalls.calls == 1
    assert [m.training for m in model.modules()] == [False, False, True]
    with preserved_state(model, mode="train"):
        assert all(m.training for m in model.modules())
    assert CountsTrainCalls.calls == 2 and [m.training for m in model.modules()] == [False, False, True]


def test_a_buffer_shared_by_two_modules_and_a_tied_parameter_are_restored_once_each():
    first, second = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
    second.running_mean = first.running_mean  # one tensor, two modules
    model = nn.Sequential(first, second, nn.Linear(3, 3), nn.Linear(3, 3)).train()
    model[3].weight = model[2].weight
    shared = first.running_mean
    with preserved_state(model, mode="train"):
        model(torch.randn(5, 3)).sum().backward()
    assert first.running_mean is shared and second.running_mean is shared and torch.equal(shared, torch.zeros(3))
    assert model[2].weight.grad is None


def test_buffers_are_put_back_in_one_fused_copy_or_one_by_one_where_torch_has_none(monkeypatch):
    model = nn.Sequential(nn.BatchNorm1d(3), nn.BatchNorm1d(3)).train()
    calls = []
    fused = _torch._foreach_copy

    def spy(targets, sources):
        calls.append(len(targets))
        fused(targets, sources)

    monkeypatch.setattr(_torch, "_foreach_copy", spy)
    with preserved_state(model, mode="train"):
        model(torch.randn(4, 3))
    assert calls == [6] and torch.equal(model[0].running_mean, torch.zeros(3))

    monkeypatch.setattr(_torch, "HAS_FOREACH_COPY", False)
    with preserved_state(model, mode="train"):
        model(torch.randn(4, 3))
    assert calls == [6]  # the loop ran, not the fused copy
    assert torch.equal(model[1].running_var, torch.ones(3)) and model[1].num_batches_tracked.item() == 0


def test_a_model_without_buffers_needs_no_copy():
    model = nn.Linear(2, 2)
    with preserved_state(model):
        model(torch.randn(1, 2))
    assert list(model.buffers()) == []


def test_the_walk_gives_the_modules_in_torchs_order_each_once():
    shared = nn.Linear(2, 2)
    inner = nn.Sequential(shared, nn.ReLU())
    model = nn.Sequential(inner, nn.Sequential(shared, inner), nn.Identity())
    model.add_module("none", None)
    assert modules_of(model) == list(model.modules())
    assert len(modules_of(model)) == 6
