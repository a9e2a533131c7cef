import math

import pytest
import torch

import hookwidgets.core.capture.stats as stats_path
from hookwidgets.core.capture.stats import STAT_KEYS, StatsMemo, stats_of, tensor_stats


@pytest.fixture(autouse=True, params=["fused kernel", "torch reductions"])
def reduction_path(request, monkeypatch):
    """Every test here runs on both paths: the C kernel (CPU float32/64) and the torch reductions it replaces."""
    if request.param == "torch reductions":
        monkeypatch.setattr(stats_path, "fused_sums", lambda x: None)
    return request.param


def reference(t: torch.Tensor) -> dict[str, float]:
    """The statistics computed the slow, obvious way in float64."""
    d = t.detach().to(torch.float64).reshape(-1)
    finite = d[torch.isfinite(d)]
    n = finite.numel()
    if n:
        mean = finite.sum() / n
        std = torch.sqrt(((finite - mean) ** 2).sum() / n)
        moments = {"mean": mean.item(), "std": std.item(), "min": finite.min().item(), "max": finite.max().item()}
    else:
        moments = dict.fromkeys(("mean", "std", "min", "max"), math.nan)
    return {
        **moments,
        "norm": torch.sqrt((finite**2).sum()).item(),
        "zero_fraction": (d == 0).sum().item() / d.numel() if d.numel() else 0.0,
        "nan": int(torch.isnan(d).sum()),
        "inf": int(torch.isinf(d).sum()),
        "numel": d.numel(),
    }


def assert_stats_close(got: dict, want: dict, rel: float) -> None:
    assert tuple(got) == STAT_KEYS
    for key, value in want.items():
        if math.isnan(value):
            assert math.isnan(got[key]), key
        elif key == "std" and want["mean"] and value < 1e-3 * abs(want["mean"]):
            assert got[key] == pytest.approx(value, abs=rel * abs(want["mean"])), key
        else:
            assert got[key] == pytest.approx(value, rel=rel, abs=1e-12), key


@pytest.mark.parametrize(
    ("shape", "offset"),
    [
        ((7,), 0.0),
        ((4, 3, 5), 0.5),
        ((3 * 4096 + 7,), 0.0),
        ((8, 4096), 3.0),
        ((50_000,), 40.0),
        ((2, 3, 64, 64), -1.0),
        ((2**18,), 3.0),  # the longest one flat dot sums
        ((2**18 + 5,), 3.0),  # the shortest one summed by rows
        ((2**22,), 3.0),
    ],
)
def test_float32_matches_a_float64_reference(shape, offset):
    torch.manual_seed(0)
    t = torch.randn(shape) * 2 + offset
    assert_stats_close(tensor_stats(t), reference(t), rel=1e-5)


def test_float64_input_is_computed_in_float64():
    torch.manual_seed(1)
    t = torch.randn(10_000, dtype=torch.float64) + 1e3  # large offset: the variance needs the second pass
    assert_stats_close(tensor_stats(t), reference(t), rel=1e-10)


def test_non_contiguous_tensor():
    torch.manual_seed(2)
    t = torch.randn(300, 70).t()[:, ::3]
    assert not t.is_contiguous()
    assert_stats_close(tensor_stats(t), reference(t), rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(dtype):
    torch.manual_seed(3)
    t = (torch.randn(5000) * 100).to(dtype)
    t[:10] = 0
    got = tensor_stats(t)
    assert_stats_close(got, reference(t), rel=1e-5)
    assert got["zero_fraction"] >= 10 / 5000


def test_nan_and_inf_are_counted_and_left_out_of_the_moments():
    t = torch.tensor([1.0, math.nan, math.inf, -math.inf, 0.0, 3.0])
    got = tensor_stats(t)
    assert got["nan"] == 1
    assert got["inf"] == 2
    assert got["numel"] == 6
    assert got["mean"] == pytest.approx(4 / 3)
    assert got["std"] == pytest.approx(math.sqrt(14 / 9))
    assert (got["min"], got["max"]) == (0.0, 3.0)
    assert got["norm"] == pytest.approx(math.sqrt(10))
    assert got["zero_fraction"] == pytest.approx(1 / 6)


def test_large_tensor_with_a_few_non_finite_values():
    torch.manual_seed(4)
    t = torch.randn(20_000)
    t[[5, 700, 19_999]] = torch.tensor([math.nan, math.inf, math.nan])
    got = tensor_stats(t)
    assert (got["nan"], got["inf"]) == (2, 1)
    assert_stats_close(got, reference(t), rel=1e-5)


def test_all_non_finite():
    got = tensor_stats(torch.tensor([math.nan, math.inf, math.nan]))
    assert all(math.isnan(got[k]) for k in ("mean", "std", "min", "max"))
    assert (got["norm"], got["zero_fraction"], got["nan"], got["inf"], got["numel"]) == (0.0, 0.0, 2, 1, 3)


def test_all_zero():
    got = tensor_stats(torch.zeros(3, 4))
    assert got == {
        "mean": 0.0,
        "std": 0.0,
        "min": 0.0,
        "max": 0.0,
        "norm": 0.0,
        "zero_fraction": 1.0,
        "nan": 0,
        "inf": 0,
        "numel": 12,
    }


def test_constant_tensor_has_zero_std():
    got = tensor_stats(torch.full((10_000,), 3.1))
    assert got["std"] == 0.0
    assert got["mean"] == pytest.approx(3.1)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 5)])
def test_empty_tensor(shape):
    got = tensor_stats(torch.empty(shape))
    assert tuple(got) == STAT_KEYS
    assert all(math.isnan(got[k]) for k in ("mean", "std", "min", "max"))
    assert (got["norm"], got["zero_fraction"], got["nan"], got["inf"], got["numel"]) == (0.0, 0.0, 0, 0, 0)


def test_integer_tensor():
    got = tensor_stats(torch.tensor([[1, 2], [3, -4], [0, 0]]))
    assert got["mean"] == pytest.approx(1 / 3)
    assert got["std"] == pytest.approx(math.sqrt(30 / 6 - 1 / 9))
    assert (got["min"], got["max"]) == (-4.0, 3.0)
    assert got["norm"] == pytest.approx(math.sqrt(30))
    assert got["zero_fraction"] == pytest.approx(1 / 3)
    assert (got["nan"], got["inf"], got["numel"]) == (0, 0, 6)


def test_bool_tensor():
    got = tensor_stats(torch.tensor([True, False, False, True]))
    assert (got["mean"], got["std"], got["min"], got["max"]) == (0.5, 0.5, 0.0, 1.0)
    assert got["norm"] == pytest.approx(math.sqrt(2))
    assert got["zero_fraction"] == 0.5


def test_complex_tensor_uses_magnitudes():
    got = tensor_stats(torch.tensor([3 + 4j, 0j]))
    assert (got["mean"], got["max"], got["zero_fraction"]) == (2.5, 5.0, 0.5)


def test_a_tensor_that_requires_grad_is_read_without_graph_or_change():
    x = torch.randn(6, requires_grad=True)
    y = x * 2
    before = y.detach().clone()
    got = tensor_stats(y)
    assert all(isinstance(v, (int, float)) for v in got.values())
    assert got["mean"] == pytest.approx((before.double().mean()).item(), abs=1e-6)
    assert torch.equal(y.detach(), before)
    assert y._version == 0


def test_values_are_python_numbers_with_int_counts():
    got = tensor_stats(torch.randn(10))
    assert all(type(got[k]) is float for k in ("mean", "std", "min", "max", "norm", "zero_fraction"))
    assert all(type(got[k]) is int for k in ("nan", "inf", "numel"))


def test_stats_of_names_each_tensor():
    got = stats_of({"output": torch.ones(2), "output.1": torch.zeros(3)})
    assert list(got) == ["output", "output.1"]
    assert got["output"]["mean"] == 1.0
    assert got["output.1"]["zero_fraction"] == 1.0
    assert stats_of({}) == {}


def test_stats_memo_reduces_one_tensor_once_until_it_changes_in_place(monkeypatch):
    import hookwidgets.core.capture.stats as stats_module

    calls = []
    real = stats_module.tensor_stats
    monkeypatch.setattr(stats_module, "tensor_stats", lambda t: calls.append(1) or real(t))
    memo = stats_module.StatsMemo()
    t = torch.arange(6.0)
    first = memo.stats(t)
    assert memo.stats(t) is first and len(calls) == 1
    assert memo.stats(t.clone()) == first and len(calls) == 2  # same values, another tensor
    t.mul_(2)
    assert memo.stats(t)["max"] == 10.0 and len(calls) == 3  # changed in place: reduced again
    memo.clear()
    memo.stats(t)
    assert len(calls) == 4


def test_a_container_and_its_last_child_share_one_reduction_per_step(monkeypatch):
    import hookwidgets.core.capture.stats as stats_module
    from hookwidgets.core import Explorer

    calls = []
    real = stats_module.tensor_stats
    monkeypatch.setattr(stats_module, "tensor_stats", lambda t: calls.append(1) or real(t))
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(4, 2)))
    with Explorer(model) as ex:
        ex.attach("", "global_forward", action="stats")
        for _ in range(2):
            model(torch.randn(5, 3))
        # per step: outputs of 0, 1.0, 1.1 (= the output of 1 and of the model): three reductions, five records
        assert len(calls) == 6
        rows = {(r["step"], r["path"]): r for r in ex.summary()}
        assert rows[(2, "")]["act_norm"] == rows[(2, "1.1")]["act_norm"] == rows[(2, "1")]["act_norm"]
        assert rows[(1, "")]["act_norm"] != rows[(2, "")]["act_norm"]


@pytest.mark.parametrize("numel", [1000, 2**24 + 3])
def test_zero_fraction_is_an_exact_count_below_and_above_float32_integers(numel):
    x = torch.ones(numel)
    x[::3] = 0.0
    x[1::7] = -0.0  # negative zero is a zero too
    zeros = int((x == 0).sum())
    assert tensor_stats(x)["zero_fraction"] == zeros / numel


def test_the_memo_recomputes_inference_tensors_which_have_no_version_counter():
    memo = StatsMemo()
    with torch.inference_mode():
        t = torch.ones(4)
        assert memo.stats(t)["mean"] == 1.0
        t.add_(1)  # an in-place change the memo could not see: it must not return the old statistics
        assert memo.stats(t)["mean"] == 2.0
    plain = torch.ones(4)
    assert memo.stats(plain) is memo.stats(plain)  # ordinary tensors are still remembered


@pytest.mark.parametrize(
    "values",
    [
        torch.randn(1000) * 1e20,  # finite float32 whose squares overflow float32
        torch.cat([torch.randn(1000) * 1e20, torch.tensor([math.nan, -math.inf])]),  # and with non-finite ones
        torch.randn(300, dtype=torch.float64) * 1e200,  # finite float64 whose squares overflow float64
    ],
)
def test_large_finite_values_keep_a_finite_norm_and_std(values):
    got = tensor_stats(values)
    finite = values[values.isfinite()].to(torch.float64)
    scale = finite.abs().max()
    assert got["inf"] == int(values.isinf().sum()) and got["nan"] == int(values.isnan().sum())
    assert got["norm"] == pytest.approx((torch.linalg.vector_norm(finite / scale) * scale).item(), rel=1e-5)
    assert got["std"] == pytest.approx((finite / scale).std(unbiased=False).item() * scale.item(), rel=1e-5)
    assert got["mean"] == pytest.approx(
        (finite / scale).mean().item() * scale.item(), rel=1e-4, abs=1e-6 * scale.item()
    )
