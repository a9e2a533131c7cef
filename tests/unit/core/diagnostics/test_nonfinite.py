import math
import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.diagnostics.nonfinite import first_nonfinite, first_nonfinite_row
from tests.conftest import RefusesHooks, hook_state


class Log(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


def nan_model() -> nn.Sequential:
    torch.manual_seed(0)
    # Linear -> ReLU leaves zeros and negatives out; the shift makes some inputs of log negative
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), Log(), nn.Linear(4, 2))


def test_first_nonfinite_names_the_module_where_nan_starts():
    model = nan_model()
    before = hook_state(model)
    ex = Explorer(model)
    assert ex.first_nonfinite(torch.randn(8, 4)) == "2"
    assert hook_state(model) == before


def test_first_nonfinite_is_none_for_a_healthy_forward(cnn, image):
    assert Explorer(cnn, example_inputs=image).first_nonfinite() is None


def test_first_nonfinite_inside_nested_modules_reports_the_innermost():
    inner = nn.Sequential(nn.Linear(3, 3), Log())
    model = nn.Sequential(nn.Identity(), inner, nn.Linear(3, 1))
    x = torch.full((2, 3), -1.0)
    with torch.no_grad():
        inner[0].weight.copy_(torch.eye(3))
        inner[0].bias.zero_()
    assert Explorer(model).first_nonfinite(x) == "1.1"


def test_summary_has_activation_and_gradient_stats_per_layer_and_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(5, 4)
    with Explorer(model) as ex:
        ex.attach("", ["global_forward", "global_backward"], action="stats")
        for _ in range(2):
            model(x).sum().backward()
        rows = ex.summary()
    assert [(r["step"], r["path"]) for r in rows] == [(s, t) for s in (1, 2) for t in ("", "0", "1", "2")]
    relu = next(r for r in rows if r["step"] == 1 and r["path"] == "1")
    act = torch.relu(model[0](x)).detach()
    assert relu["act_norm"] == pytest.approx(torch.linalg.vector_norm(act).item())
    assert relu["act_zero_fraction"] == pytest.approx((act == 0).float().mean().item())
    out_grad = torch.ones(5, 2) @ model[2].weight.detach()
    assert abs(relu["grad_norm"] - torch.linalg.vector_norm(out_grad).item()) < 1e-5
    assert relu["act_nan"] == 0 and relu["grad_inf"] == 0


def test_summary_orders_say_where_nan_appeared_first_in_forward_and_in_backward():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with Explorer(model) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        model(x).sum().backward()
        rows = {r["path"]: r for r in ex.summary()}
        assert [rows[p]["act_order"] for p in ("0", "1", "2", "")] == [0, 1, 2, 3]  # the order forwards finish
        # the order gradients arrive; the root's output is its last child's tensor, whose hook was armed first
        assert [rows[p]["grad_order"] for p in ("2", "", "1", "0")] == [0, 1, 2, 3]
        assert first_nonfinite_row(list(rows.values())) is None
        with torch.no_grad():
            model[2].bias.fill_(float("nan"))
        model(x).sum().backward()
        step = [r for r in ex.summary() if r["step"] == 2]
        assert first_nonfinite_row(step) == "2"  # the root's output holds the NaN too, but later
    grad_only = [  # finite activations; the gradient of "a" (which arrives last) and of "b" hold Inf
        {"path": "a", "act_nan": 0, "act_inf": 0, "act_order": 0, "grad_nan": 0, "grad_inf": 3, "grad_order": 1},
        {"path": "b", "act_nan": 0, "act_inf": 0, "act_order": 1, "grad_nan": 0, "grad_inf": 1, "grad_order": 0},
    ]
    assert first_nonfinite_row(grad_only) == "b"


def scripted(module: nn.Module) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated, yet models still ship it
        return torch.jit.script(module)


def test_first_nonfinite_skips_script_modules_and_leaves_no_hooks():
    model = nn.Sequential(scripted(nn.Linear(4, 4)), nn.ReLU(), nn.Linear(4, 3))
    before = hook_state(model)
    ex = Explorer(model, torch.randn(2, 4))
    assert ex.first_nonfinite() is None
    with torch.no_grad():
        model[2].bias.fill_(float("nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "2" received finite inputs: the unwatched "0" is not to blame
        assert ex.first_nonfinite() == "2"
    ex.close()
    assert hook_state(model) == before
    assert dict(model._forward_hooks) == {} and dict(model._forward_hooks_always_called) == {}


def test_first_nonfinite_warns_when_the_nan_may_start_in_an_unwatched_script_module():
    model = nn.Sequential(scripted(Log()), nn.Linear(3, 1))
    with pytest.warns(UserWarning, match=r"could not watch the ScriptModule\(s\) '0'.*'1' received"):
        assert first_nonfinite(model, torch.full((2, 3), -1.0)) == "1"
    root = scripted(Log())  # nothing can be hooked: the output itself is checked
    with pytest.warns(UserWarning, match="ScriptModule\\(s\\) ''"):
        assert first_nonfinite(root, torch.full((2, 3), -1.0)) == ""
    assert first_nonfinite(root, torch.ones(2, 3)) is None


def test_first_nonfinite_removes_the_hooks_registered_before_a_failing_registration():
    model = nn.Sequential(nn.Linear(4, 4), RefusesHooks(), nn.Linear(4, 2))
    before = hook_state(model)
    with pytest.raises(RuntimeError, match="no hooks here"):
        first_nonfinite(model, torch.randn(2, 4))
    assert hook_state(model) == before


def test_first_nonfinite_checks_nested_tensors_through_their_components():
    torch.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2).eval()
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[0, 3:] = True
    inputs = {"src": torch.randn(2, 5, 16), "src_key_padding_mask": mask}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "nested tensors are a prototype" warning
        ex = Explorer(enc, inputs)
        assert ex.first_nonfinite() is None
        with torch.no_grad():
            enc.layers[1].linear1.bias[0] = float("inf")
        assert ex.first_nonfinite() == "layers.1.linear1"


class SharedLog(nn.Module):
    """Calls one Log module twice: the first call gets negative inputs (NaN), the second positive ones."""

    def __init__(self) -> None:
        super().__init__()
        self.log = Log()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.log(x - 2.0).nan_to_num() + self.log(x + 2.0)


def test_summary_rows_of_a_module_called_twice_cover_both_calls():
    x = torch.tensor([[0.5, 1.0, -1.0, 1.5]])
    with Explorer(SharedLog()) as ex:
        ex.attach("", ["global_forward"], action="stats")
        ex.attach("log", "forward", action="stats")  # a second kind on the same column counts the calls once
        ex.run(x)
        (row,) = [r for r in ex.summary() if r["path"] == "log"]
    both = torch.cat([torch.log(x - 2.0), torch.log(x + 2.0)], dim=1)
    finite = both[both.isfinite()]
    assert row["act_calls"] == 2
    assert row["act_nan"] == int(both.isnan().sum()) == 4  # the NaN of the first call is not hidden by the second
    assert row["act_mean"] == pytest.approx(finite.mean().item())
    assert row["act_std"] == pytest.approx(finite.std(unbiased=False).item())
    assert row["act_norm"] == pytest.approx(torch.linalg.vector_norm(finite).item())
    assert row["act_zero_fraction"] == pytest.approx((both == 0).float().mean().item())
    assert first_nonfinite_row(ex.summary()) == "log"


def test_combined_statistics_equal_those_of_the_tensors_concatenated():
    from hookwidgets.core.capture.stats import combine_stats, tensor_stats

    torch.manual_seed(0)
    a, b = torch.randn(50) * 3 + 1, torch.cat([torch.zeros(5), torch.tensor([math.inf, math.nan]), torch.randn(20)])
    combined, whole = combine_stats(tensor_stats(a), tensor_stats(b)), tensor_stats(torch.cat([a, b]))
    assert combined.keys() == whole.keys()
    for key, value in whole.items():
        assert combined[key] == pytest.approx(value, rel=1e-5), key
    empty = combine_stats(tensor_stats(torch.tensor([math.nan])), tensor_stats(torch.tensor([math.inf])))
    assert math.isnan(empty["mean"]) and empty["nan"] == 1 and empty["inf"] == 1 and empty["numel"] == 2


def test_summary_rows_say_what_a_dtensors_statistics_cover():
    from hookwidgets.core import Record
    from hookwidgets.core.diagnostics.nonfinite import rows_of

    stats = {"mean": 1.0, "std": 0.0, "min": 1.0, "max": 1.0, "norm": 2.0, "zero_fraction": 0.0, "nan": 0, "inf": 0}
    records = [
        Record("a", "forward", 1, 0, {}, stats={**stats, "numel": 4}, scope="local shard 0 of 2"),
        Record("b", "forward", 1, 0, {}, stats={**stats, "numel": 4}),
    ]
    rows = {row["path"]: row for row in rows_of(records)}
    assert rows["a"]["act_scope"] == "local shard 0 of 2"
    assert "act_scope" not in rows["b"]  # a plain tensor's cover it whole
