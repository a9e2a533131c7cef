"""Explorer.watch_optimizer: monitors named after the model, replaced rather than stacked, closed with the explorer."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import optimizer_hook_state


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))


def _train_step(model: nn.Module, opt: torch.optim.Optimizer) -> None:
    opt.zero_grad(set_to_none=True)
    model(torch.randn(5, 4, generator=torch.Generator().manual_seed(1))).pow(2).sum().backward()
    opt.step()


def test_records_name_the_models_parameters_and_hold_the_ratio():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Explorer(model) as ex:
        monitor = ex.watch_optimizer(opt)
        opt.zero_grad()
        model(torch.randn(5, 4, generator=torch.Generator().manual_seed(1))).pow(2).sum().backward()
        expected = {n: 0.1 * p.grad.norm().item() / p.norm().item() for n, p in model.named_parameters()}
        opt.step()
        assert [r["param"] for r in monitor.records] == ["0.weight", "0.bias", "2.weight", "2.bias"]
        assert {r["param"]: r["ratio"] for r in monitor.records} == pytest.approx(expected, rel=1e-5)
        assert monitor.scope == "local"


def test_watching_again_replaces_and_never_stacks():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = optimizer_hook_state(opt)
    with Explorer(model) as ex:
        first = ex.watch_optimizer(opt)
        second = ex.watch_optimizer(opt, every=2)
        assert "closed" in repr(first) and ex.monitors == [second]
        assert [len(d) for d in optimizer_hook_state(opt)[:2]] == [1, 1]  # one pre and one post hook
        # A re-run cell makes a new optimizer of the same parameters: its watch replaces the old one too.
        rerun = torch.optim.SGD(model.parameters(), lr=0.1)
        third = ex.watch_optimizer(rerun)
        assert "closed" in repr(second) and ex.monitors == [third]
        assert optimizer_hook_state(opt) == before
        _train_step(model, rerun)
        assert len(third.records) == 4 and first.records == [] and second.records == []
    assert optimizer_hook_state(rerun)[:2] == [[], []]


def test_disjoint_optimizers_are_kept_and_watching_every_optimizer_replaces_them():
    model = _model()
    first_opt = torch.optim.SGD(model[0].parameters(), lr=0.1)  # e.g. a GAN's two optimizers
    second_opt = torch.optim.Adam(model[2].parameters(), lr=0.01)
    before = optimizer_hook_state(first_opt, second_opt)
    with Explorer(model) as ex:
        a, b = ex.watch_optimizer(first_opt), ex.watch_optimizer(second_opt)
        assert ex.monitors == [a, b]
        every = ex.watch_optimizer()  # every optimizer of the model: it measures both, so it replaces both
        assert every.scope == "global" and ex.monitors == [every]
        assert "closed" in repr(a) and "closed" in repr(b)
        for opt in (first_opt, second_opt):
            _train_step(model, opt)
        assert [r["param"] for r in every.records] == ["0.weight", "0.bias", "2.weight", "2.bias"]
        assert a.records == [] and b.records == []  # the replaced monitors measure nothing more
        one = ex.watch_optimizer(first_opt)  # and a single optimizer replaces the watch of every optimizer
        assert ex.monitors == [one] and "closed" in repr(every)
        for opt in (first_opt, second_opt):
            _train_step(model, opt)
        assert [r["param"] for r in one.records] == ["0.weight", "0.bias"] and len(every.records) == 4
    assert optimizer_hook_state(first_opt, second_opt) == before


def test_close_restores_every_optimizer_hook_dict_and_lets_go_of_the_optimizers():
    model = _model()
    first_opt = torch.optim.SGD(model[0].parameters(), lr=0.1)
    second_opt = torch.optim.SGD(model[2].parameters(), lr=0.1)
    before = optimizer_hook_state(first_opt, second_opt)
    ex = Explorer(model)
    local = ex.watch_optimizer(first_opt)  # the optimizer's own step hooks
    ex.watch_optimizer(second_opt, scope="global")  # torch's global step hooks
    _train_step(model, first_opt)
    assert all(optimizer_hook_state(first_opt, second_opt)[i] != before[i] for i in (0, 1, 4, 5))
    ex.close()
    assert optimizer_hook_state(first_opt, second_opt) == before and ex.monitors == []
    assert len(local.records) == 2  # a closed monitor keeps what it measured
    optimizers = [weakref.ref(first_opt), weakref.ref(second_opt)]
    del local, first_opt, second_opt
    gc.collect()
    assert [ref() for ref in optimizers] == [None, None]  # the closed explorer holds none of them
    ex.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        ex.watch_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))


def test_a_dropped_explorer_frees_the_model_and_removes_its_step_hooks():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # the user keeps the optimizer
    before = optimizer_hook_state(opt)
    ex = Explorer(model)
    ex.watch_optimizer(opt)
    ex.watch_optimizer(scope="global")
    _train_step(model, opt)
    model_ref = weakref.ref(model)
    del ex, model
    gc.collect()
    assert model_ref() is None
    assert optimizer_hook_state(opt) == before


def test_bad_arguments_name_the_fix_and_leave_the_watch_as_it_was():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Explorer(model) as ex:
        kept = ex.watch_optimizer(opt)
        with pytest.raises(TypeError, match=r"got Sequential: ex.watch_optimizer\(torch.optim.SGD"):
            ex.watch_optimizer(model)
        other = torch.optim.SGD(_model().parameters(), lr=0.1)
        with pytest.raises(ValueError, match="steps no parameter of the explored Sequential"):
            ex.watch_optimizer(other)
        with pytest.raises(ValueError, match="every must be a positive int"):
            ex.watch_optimizer(opt, every=0)
        with pytest.raises(ValueError, match="scope must be one of"):
            ex.watch_optimizer(opt, scope="everywhere")
        assert ex.monitors == [kept] and "closed" not in repr(kept)
