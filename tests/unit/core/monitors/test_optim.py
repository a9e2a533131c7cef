"""UpdateRatioMonitor: update-to-weight ratios through optimizer step hooks, checked by hand."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.optim import optimizer as optim_module

from hookwidgets.core import UpdateRatioMonitor


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))


def _backward(model: nn.Module) -> None:
    model.zero_grad(set_to_none=True)
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    model(x).pow(2).sum().backward()


def _hook_dicts(*opts: torch.optim.Optimizer) -> list:
    local = [
        list(getattr(o, name).items())
        for o in opts
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks")
    ]
    return [
        *local,
        list(optim_module._global_optimizer_pre_hooks.items()),
        list(optim_module._global_optimizer_post_hooks.items()),
    ]


def test_sgd_ratio_is_lr_times_grad_norm_over_weight_norm():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with UpdateRatioMonitor(opt, model) as monitor:
        _backward(model)
        expected = {n: 0.1 * p.grad.norm().item() / p.detach().norm().item() for n, p in model.named_parameters()}
        opt.step()
    assert [r["param"] for r in monitor.records] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for record in monitor.records:
        assert record["step"] == 0 and record["optimizer"] == 0 and record["lr"] == 0.1
        assert record["ratio"] == pytest.approx(expected[record["param"]], rel=1e-5)


def test_adam_first_step_ratio_matches_hand_computed_update():
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-8)
    monitor = UpdateRatioMonitor(opt, model)
    _backward(model)
    # Adam's first step: m̂ = g and v̂ = g², so the update is lr · g / (|g| + eps)
    expected = {
        n: (0.01 * p.grad / (p.grad.abs() + 1e-8)).norm().item() / p.detach().norm().item()
        for n, p in model.named_parameters()
    }
    opt.step()
    monitor.close()
    got = {r["param"]: r["ratio"] for r in monitor.records}
    assert got == pytest.approx(expected, rel=1e-4)


def test_steps_are_counted_and_every_skips_steps():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    monitor = UpdateRatioMonitor(opt, model, every=2)
    for _ in range(5):
        _backward(model)
        opt.step()
    monitor.close()
    assert sorted({r["step"] for r in monitor.records}) == [0, 2, 4]


def test_params_without_grad_are_skipped_and_zero_weight_gives_nan():
    model = _model()
    with torch.no_grad():
        model[2].bias.zero_()
    model[0].weight.requires_grad_(False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with UpdateRatioMonitor(opt, model) as monitor:
        _backward(model)
        opt.step()
    got = {r["param"]: r["ratio"] for r in monitor.records}
    assert "0.weight" not in got
    assert math.isnan(got["2.bias"]) and got["2.weight"] > 0


def test_without_model_params_are_named_by_group_and_index():
    model = _model()
    opt = torch.optim.SGD([{"params": [model[0].weight]}, {"params": [model[2].weight], "lr": 0.5}], lr=0.1)
    with UpdateRatioMonitor(opt) as monitor:
        _backward(model)
        opt.step()
    assert [(r["param"], r["group"], r["lr"]) for r in monitor.records] == [
        ("param_groups[0][0]", 0, 0.1),
        ("param_groups[1][0]", 1, 0.5),
    ]


def test_global_scope_filters_to_given_optimizer():
    model, other = _model(), _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    other_opt = torch.optim.SGD(other.parameters(), lr=0.1)
    with UpdateRatioMonitor(opt, model, scope="global") as monitor:
        for m, o in ((model, opt), (other, other_opt)):
            _backward(m)
            o.step()
    assert len(monitor.records) == 4 and monitor.optimizers == [opt]


def test_global_scope_with_model_only_finds_its_optimizers():
    model, other = _model(), _model()
    with UpdateRatioMonitor(model=model, scope="global") as monitor:
        opt = torch.optim.Adam(model.parameters(), lr=0.01)  # created after the monitor, as a trainer would
        other_opt = torch.optim.SGD(other.parameters(), lr=0.1)
        for m, o in ((model, opt), (other, other_opt), (model, opt)):
            _backward(m)
            o.step()
    assert monitor.optimizers == [opt]
    assert [r["step"] for r in monitor.records] == [0] * 4 + [1] * 4


@pytest.mark.parametrize("scope", ["local", "global"])
def test_close_restores_every_hook_dict_exactly(scope):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.register_step_post_hook(lambda o, a, k: None)  # someone else's hook stays
    before = _hook_dicts(opt)
    monitor = UpdateRatioMonitor(opt, model, scope=scope)
    assert _hook_dicts(opt) != before
    monitor.close()
    monitor.close()  # idempotent
    assert _hook_dicts(opt) == before
    _backward(model)
    opt.step()
    assert monitor.records == []


def test_dropped_monitor_removes_its_hooks():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = _hook_dicts(opt)
    UpdateRatioMonitor(opt, model, scope="global")
    UpdateRatioMonitor(opt, model)
    assert _hook_dicts(opt) == before


def test_bad_arguments_name_the_fix():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = _hook_dicts(opt)
    with pytest.raises(ValueError, match="scope must be one of"):
        UpdateRatioMonitor(opt, scope="everywhere")
    with pytest.raises(ValueError, match="needs optimizers="):
        UpdateRatioMonitor()
    with pytest.raises(ValueError, match="use scope='global'"):
        UpdateRatioMonitor(model=model)
    with pytest.raises(TypeError, match="got the model Sequential"):
        UpdateRatioMonitor(model)
    with pytest.raises(ValueError, match="positive int"):
        UpdateRatioMonitor(opt, every=0)
    assert _hook_dicts(opt) == before  # a refused monitor registered nothing
