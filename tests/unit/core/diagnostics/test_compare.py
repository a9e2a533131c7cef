import threading
import warnings
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer, compare_backward
from tests.conftest import SharedBlock, hook_state


def shapes(grads):
    return tuple(None if g is None else tuple(g.shape) for g in grads)


@pytest.fixture
def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 2), nn.Tanh())


def test_linear_on_a_2d_input_shows_the_legacy_hook_reporting_addmm_grads(mlp):
    x = torch.randn(4, 3, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compare_backward(mlp, "0", x)

    assert not caught  # torch's FutureWarning is kept out of the caller's way ...
    assert any("non-full backward hook" in note for note in result.notes)  # ... and kept in the notes
    assert result.legacy_node == "AddmmBackward0"
    assert result.legacy_slots == ["bias", "input", "weight.T"]
    assert shapes(result.legacy_grad_input) == ((2,), (4, 3), (3, 2))
    assert shapes(result.full_grad_input) == ((4, 3),)
    assert shapes(result.legacy_grad_output) == shapes(result.full_grad_output) == ((4, 2),)
    assert result.matches is False
    assert "AddmmBackward0's inputs: bias (2,), input (4, 3), weight.T (3, 2)" in result.notes[0]

    (x_grad,) = torch.autograd.grad(mlp(x).sum(), x)
    assert torch.allclose(result.full_grad_input[0], x_grad)
    assert torch.allclose(result.legacy_grad_input[1], x_grad)  # the input grad is there, in another slot
    assert x.grad is None and all(p.grad is None for p in mlp.parameters())

    assert result.table() == [
        {"slot": "grad_input[0]", "legacy_shape": (2,), "full_shape": (4, 3), "max_abs_diff": None},
        {"slot": "grad_input[1]", "legacy_shape": (4, 3), "full_shape": None, "max_abs_diff": None},
        {"slot": "grad_input[2]", "legacy_shape": (3, 2), "full_shape": None, "max_abs_diff": None},
        {"slot": "grad_output[0]", "legacy_shape": (4, 2), "full_shape": (4, 2), "max_abs_diff": 0.0},
    ]


def test_linear_on_a_3d_input_attaches_the_legacy_hook_to_the_output_view(mlp):
    result = compare_backward(mlp, "0", torch.randn(5, 4, 3, requires_grad=True))
    assert result.legacy_node == "ViewBackward0"
    assert result.legacy_slots == ["AddmmBackward0 output"]
    assert shapes(result.legacy_grad_input) == ((20, 2),)
    assert shapes(result.full_grad_input) == ((5, 4, 3),)
    assert result.matches is False


def test_the_hooks_agree_on_tanh_and_equal_a_hand_computed_gradient(mlp):
    x = torch.randn(4, 3, requires_grad=True)
    result = compare_backward(mlp, "1", x, target=lambda out: (out[:, 0] * 3).sum())

    hidden = mlp[0](x)
    (expected,) = torch.autograd.grad((mlp[1](hidden)[:, 0] * 3).sum(), hidden)
    assert result.matches is True
    assert result.legacy_node == "TanhBackward0" and result.legacy_slots == ["input"]
    assert torch.equal(result.legacy_grad_input[0], expected)
    assert torch.equal(result.full_grad_input[0], expected)
    assert torch.equal(result.full_grad_output[0], torch.tensor([[3.0, 0.0]]).expand(4, 2))
    assert [row["max_abs_diff"] for row in result.table()] == [0.0, 0.0]
    assert "here the same as the module's input gradient" in result.notes[0]
    assert not any("non-full" in note for note in result.notes)  # one autograd node: torch does not warn


def test_a_first_layer_fed_a_plain_tensor_gets_none_from_the_full_hook(mlp):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compare_backward(mlp, "0", torch.randn(4, 3))
    assert not caught
    assert result.full_grad_input == (None,)
    assert shapes(result.legacy_grad_input) == ((2,), None, (3, 2))
    assert result.legacy_slots[1] == "(a tensor that needs no grad)"
    p6 = next(note for note in result.notes if "grad_input=(None,)" in note)
    assert "no inputs require gradients" in p6 and "requires_grad=True" in p6


def test_the_users_model_and_inputs_are_left_exactly_as_found(cnn, image):
    cnn.train()
    ex = Explorer(cnn)
    ex.attach("features.conv", ["forward", "backward"])
    ex.attach("head.fc", "legacy_backward")
    fired = []
    cnn.features.act.register_forward_hook(lambda m, a, o: fired.append("user"))
    kept = torch.full_like(cnn.head.fc.weight, 3.0)
    cnn.head.fc.weight.grad = kept
    bn = cnn.features.bn
    stats = [b.clone() for b in cnn.buffers()]
    before = hook_state(cnn)
    x = image.clone().requires_grad_()
    rng = torch.get_rng_state()

    for target in ("head.fc", "features.conv", "features.act", "features.drop"):
        compare_backward(cnn, target, x)

    assert hook_state(cnn) == before
    assert cnn.head.fc.weight.grad is kept and torch.all(kept == 3.0)
    assert all(p.grad is None for name, p in cnn.named_parameters() if name != "head.fc.weight")
    assert all(torch.equal(b, s) for b, s in zip(cnn.buffers(), stats, strict=True))
    assert bn.num_batches_tracked.item() == 0
    assert all(m.training for m in cnn.modules())
    assert torch.equal(torch.get_rng_state(), rng)
    assert x.grad is None and x.requires_grad
    assert fired == [] and len(ex.captures) == 0  # neither the user's hooks nor the explorer's ran
    ex.close()


class Locked:
    """A hook owner that copy.deepcopy can't copy (a lock), as a registry of hooks often is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0

    def hook(self, *args):
        self.calls += 1


def test_hooks_the_user_attached_neither_break_nor_change_the_comparison(mlp):
    x = torch.randn(4, 3, requires_grad=True)
    clean = compare_backward(mlp, "1", x)
    owner = Locked()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        mlp[1].register_backward_hook(owner.hook)  # the sticky legacy flag would refuse a full hook
    mlp[1].register_forward_hook(lambda m, a, out: out * 100)  # would change the grads if it ran
    mlp[0].register_forward_pre_hook(owner.hook)

    result = compare_backward(mlp, "1", x)

    assert result.matches is True
    assert torch.equal(result.full_grad_input[0], clean.full_grad_input[0])
    assert owner.calls == 0
    assert mlp[1]._is_full_backward_hook is False and len(mlp[1]._backward_hooks) == 1


def test_hooks_the_user_attached_beside_the_explorers_on_one_module_are_left_out_of_the_copies(mlp):
    x = torch.randn(4, 3, requires_grad=True)
    clean = compare_backward(mlp, "1", x)
    owner = Locked()
    mlp[1].register_forward_hook(owner.hook)  # in the dict that holds the explorer's hook too
    with Explorer(mlp) as ex:
        ex.attach("1", "forward")
        result = ex.compare_backward("1", x)
        assert ex.captures.snapshot()[1]["records"] == 0  # the copies' forwards are not the explorer's
    assert result.matches is True and owner.calls == 0
    assert torch.equal(result.full_grad_input[0], clean.full_grad_input[0])


def test_a_module_called_twice_is_compared_on_the_call_that_fires_first():
    torch.manual_seed(0)
    block = SharedBlock()
    result = compare_backward(block, "lin", torch.randn(2, 4, requires_grad=True))
    assert result.legacy_node == "AddmmBackward0"
    assert shapes(result.full_grad_input) == ((2, 4),)
    assert any("ran 2 times" in note for note in result.notes)


class KwargsModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        warnings.warn("a warning of the model's own", UserWarning, stacklevel=2)
        return self.act(x) * scale, x


def test_dict_inputs_and_tuple_outputs_and_other_warnings_pass_through():
    x = torch.tensor([[-1.0, 2.0]], requires_grad=True)
    with pytest.warns(UserWarning, match="a warning of the model's own"):
        result = compare_backward(KwargsModel(), "act", {"x": x, "scale": 2.0})
    assert result.matches is True
    assert torch.equal(result.full_grad_input[0], torch.tensor([[0.0, 2.0]]))


class DictOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"y": self.lin(x)}


class Unused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.spare = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def test_errors_name_the_target_and_the_fix():
    with pytest.raises(KeyError, match="did you mean '0'"):
        compare_backward(nn.Sequential(nn.Linear(2, 2)), "00", torch.randn(1, 2))
    with pytest.raises(ValueError, match="returns a dict; backward hooks can't fire"):
        compare_backward(nn.Sequential(DictOut()), "0", torch.randn(1, 2))
    with pytest.raises(ValueError, match="did not run in the forward"):
        compare_backward(Unused(), "spare", torch.randn(1, 3))
    with pytest.raises(ValueError, match="pass inputs with requires_grad=True"):
        compare_backward(nn.Tanh(), "", torch.randn(2))
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(inplace=True))
    before = hook_state(model)
    message = r"cannot run on '0': the in-place module '1' modifies its output, .* \(inplace=False\)"
    with pytest.raises(ValueError, match=message) as caught:
        compare_backward(model, "0", torch.randn(1, 2))
    assert "modified inplace" in str(caught.value.__cause__)  # torch's own error, kept as the cause
    assert hook_state(model) == before


def test_torchs_own_weight_computing_pre_hooks_stay_on_the_copies():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model = nn.Sequential(nn.utils.spectral_norm(nn.Linear(3, 2)))
    result = compare_backward(model, "0", torch.randn(4, 3, requires_grad=True))
    # stripped, the pre-hook would leave a stale weight that needs no grad and the weight slot would be None
    assert result.legacy_slots == ["bias", "input", "TBackward0 output"]
    assert shapes(result.legacy_grad_input) == ((2,), (4, 3), (3, 2))


def test_explorer_compare_backward_shows_the_linear_discrepancy():
    model = nn.Sequential(nn.Linear(3, 2))
    with Explorer(model, example_inputs=torch.randn(4, 3, requires_grad=True)) as ex:
        result = ex.compare_backward("0")
    assert result.legacy_node == "AddmmBackward0" and not result.matches
    rows = {row["slot"]: row for row in result.table()}
    assert rows["grad_input[0]"]["legacy_shape"] == (2,) and rows["grad_input[0]"]["full_shape"] == (4, 3)
    assert rows["grad_output[0]"]["max_abs_diff"] == 0.0


def _same_comparison(a, b) -> None:
    assert a.layer == b.layer and a.legacy_node == b.legacy_node and a.notes == b.notes
    for name in ("legacy_grad_input", "full_grad_input", "legacy_grad_output", "full_grad_output"):
        assert all(torch.equal(x, y) for x, y in zip(getattr(a, name), getattr(b, name), strict=True)), name


def test_layer_is_the_module_and_target_the_score(mlp):
    x = torch.randn(4, 3, requires_grad=True)
    score = lambda out: (out[:, 0] * 3).sum()  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the names warn about nothing
        expected = compare_backward(mlp, layer="1", inputs=x, target=score)
        with Explorer(mlp, example_inputs=x) as ex:
            _same_comparison(ex.compare_backward(layer="1", target=score), expected)
    assert expected.layer == "1" and torch.equal(expected.full_grad_output[0], torch.tensor([[3.0, 0.0]]).expand(4, 2))
    with pytest.raises(TypeError, match="layer"):  # a score that names no module is not taken for the layer
        compare_backward(mlp, inputs=x, target="top")


def test_a_module_path_as_target_with_no_layer_is_refused_naming_layer(mlp):
    x = torch.randn(4, 3, requires_grad=True)
    said = r"got target='1', a module path, and no layer: target= is the score; pass the module as layer='1'$"
    with pytest.raises(TypeError, match=r"^compare_backward\(\) " + said):
        compare_backward(mlp, target="1", inputs=x)
    with (
        Explorer(mlp, example_inputs=x) as ex,
        pytest.raises(TypeError, match=r"^Explorer.compare_backward\(\) " + said),
    ):
        ex.compare_backward(target="1")
    assert not hasattr(compare_backward(mlp, "1", x), "target")  # the result names the module .layer only


@dataclass
class Prediction:
    loss: torch.Tensor | None
    logits: torch.Tensor


class TanhHead(nn.Module):
    """Linear then Tanh, returning the logits as they are or in a dataclass behind a None field."""

    def __init__(self, wrap: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.act = nn.Tanh()
        self.wrap = wrap

    def forward(self, x: torch.Tensor) -> torch.Tensor | Prediction:
        y = self.act(self.fc(x))
        return Prediction(None, y) if self.wrap else y


def test_a_dataclass_output_is_scored_by_its_first_tensor_like_a_plain_output():
    x = torch.randn(4, 3, requires_grad=True)
    results = []
    for wrap in (False, True):
        torch.manual_seed(0)
        results.append(compare_backward(TanhHead(wrap), "act", x))
    plain, wrapped = results
    assert plain.matches and wrapped.matches
    for name in ("legacy_grad_input", "full_grad_input", "legacy_grad_output", "full_grad_output"):
        torch.testing.assert_close(getattr(wrapped, name), getattr(plain, name), rtol=0, atol=0)
    torch.testing.assert_close(wrapped.full_grad_output[0], torch.ones(4, 2))  # the default score sums the logits
