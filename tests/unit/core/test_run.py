import collections
import dataclasses

import numpy as np
import pytest
import torch

from hookwidgets.core import Explorer
from hookwidgets.core.model.scores import backward_score, class_scores, resolve_score


def test_run_with_a_target_leaves_grads_buffers_rng_and_mode_as_found(cnn, image):
    cnn.train()
    ex = Explorer(cnn, example_inputs=image)
    ex.attach("features.conv", "grad")
    bn = cnn.features.bn
    stats_before = (bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone())
    torch.manual_seed(7)
    rng_before = torch.get_rng_state()

    out = ex.run(target="top")

    assert out.shape == (2, 5) and not out.requires_grad
    assert all(p.grad is None for p in cnn.parameters())
    assert torch.equal(bn.running_mean, stats_before[0]) and torch.equal(bn.running_var, stats_before[1])
    assert torch.equal(bn.num_batches_tracked, stats_before[2])
    assert torch.equal(torch.get_rng_state(), rng_before)
    assert all(m.training for m in cnn.modules())
    assert len(ex.captures["features.conv"]["grad"]) == 1
    ex.close()


def test_run_keeps_existing_grads_and_restores_state_when_forward_raises(cnn, image):
    cnn.head.fc.weight.grad = torch.full_like(cnn.head.fc.weight, 3.0)
    kept = cnn.head.fc.weight.grad
    ex = Explorer(cnn)
    ex.run(image, target=0)
    assert cnn.head.fc.weight.grad is kept and torch.all(kept == 3.0)
    cnn.train()
    with pytest.raises(RuntimeError):
        ex.run(torch.randn(2, 7, 8, 8), target=0)
    assert all(m.training for m in cnn.modules())


def test_run_without_inputs_or_example_inputs_says_how_to_fix(cnn):
    with pytest.raises(ValueError, match="pass them, or give HookExplorer example_inputs="):
        Explorer(cnn).run()


def test_backward_score_targets():
    logits = torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], requires_grad=True)
    assert backward_score(logits, 2).item() == 5.0
    assert backward_score(logits, [1, 0]).item() == 12.0
    assert backward_score(logits, "top").item() == 12.0
    assert backward_score(logits, lambda out: out[:, 0].mean()).item() == 4.0


@pytest.mark.parametrize(
    ("output", "target", "message"),
    [
        (torch.zeros(2, 3), 3, r"target class 3 is out of range: the output has 3 classes \(0 to 2\)"),
        (torch.zeros(2, 3), [0], "target has 1 class indices but the batch has 2 items"),
        (torch.zeros(2, 3, 4, 5), 0, r"needs scores of shape \(batch, classes\), or .* got \(2, 3, 4, 5\)"),
        (torch.zeros(2, 3), lambda out: out, "a callable target must return a scalar tensor"),
    ],
)
def test_backward_score_rejects_bad_targets(output, target, message):
    with pytest.raises(ValueError, match=message):
        backward_score(output, target)


def test_integer_tensors_and_numpy_integers_are_class_targets():
    logits = torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], requires_grad=True)
    assert backward_score(logits, torch.tensor(2)).item() == 5.0
    assert backward_score(logits, logits.argmax(1)).item() == 12.0  # a prediction is a fine target
    assert backward_score(logits, np.int64(0)).item() == 8.0
    assert backward_score(logits, (np.int32(1), 0)).item() == 12.0


@pytest.mark.parametrize("target", ["best", 1.0, True, [True, False], torch.tensor(1.0), torch.tensor([[1]]), None])
def test_what_is_no_class_target_is_refused_with_the_forms_that_are(target):
    with pytest.raises(ValueError, match=r"is not a score target; pass \"top\", a class index \(3\), one index per"):
        backward_score(torch.zeros(2, 3, requires_grad=True), target)


def test_constructor_rejects_a_non_module():
    with pytest.raises(TypeError, match="needs a torch.nn.Module, got function"):
        Explorer(lambda x: x)


class NoParams(torch.nn.Module):
    """Softmax scores with nothing to train: with an input that needs no grad there is no graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.softmax(-1)


def test_a_target_with_nothing_to_backpropagate_says_why_and_how_to_fix():
    x = torch.randn(2, 3)
    with Explorer(NoParams()) as ex:
        with pytest.raises(ValueError, match=r"nothing to backpropagate: nothing in NoParams's forward requires grad"):
            ex.run(x, target=0)
        assert ex.run(x.requires_grad_(), target=0).shape == (2, 3)  # the advice works
    inference = pytest.raises(ValueError, match=r"ran under torch.inference_mode\(\), so autograd recorded nothing")
    with Explorer(torch.nn.Linear(3, 2)) as ex, torch.inference_mode(), inference:
        ex.run(torch.randn(2, 3), target=0)


def test_run_returns_a_dataclass_output_detached_and_rebuilt():
    from dataclasses import dataclass

    @dataclass
    class Out:
        logits: torch.Tensor
        label: str

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(3, 2)

        def forward(self, x: torch.Tensor) -> Out:
            return Out(self.fc(x), "scores")

    with Explorer(Model()) as ex:
        out = ex.run(torch.randn(4, 3), target=lambda o: o.logits.sum())
    assert isinstance(out, Out) and out.label == "scores"
    assert out.logits.shape == (4, 2) and not out.logits.requires_grad and out.logits.grad_fn is None


@dataclasses.dataclass
class Out:
    features: torch.Tensor
    logits: torch.Tensor


@dataclasses.dataclass
class Unnamed:
    features: torch.Tensor
    scores: torch.Tensor


Pair = collections.namedtuple("Pair", "features logits")


def test_class_scores_are_found_in_dicts_dataclasses_and_namedtuples():
    scores = torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], requires_grad=True)
    feats = torch.ones(2, 4, 3, 3)
    ids = torch.zeros(2, 6, dtype=torch.long)  # 2-D but integer: token ids are no class scores
    outputs = [
        scores,
        (scores, feats),
        {"hidden": torch.ones(2, 9), "logits": scores},  # the logits key wins over an earlier 2-D tensor
        {"ids": ids, "feat": feats, "scores": scores},  # no logits key: the first 2-D floating-point tensor
        Out(feats, scores),
        Unnamed(feats, scores),
        Pair(feats, scores),
    ]
    for output in outputs:
        assert class_scores(output) is scores
        assert backward_score(output, "top").item() == 12.0
        assert resolve_score(output, [2, 0], per_item=True)[0].item() == 9.0  # attribution finds the same scores


@pytest.mark.parametrize(
    ("output", "got"),
    [
        ({"feat": torch.ones(2, 4, 3, 3), "n": 3}, r"got dict \{feat: Tensor\(2, 4, 3, 3\), n: int\}"),
        (
            Out(torch.ones(2, 4, 3, 3), torch.ones(2, 7, 5, 5)),
            r"got Out \{features: Tensor\(2, 4, 3, 3\), logits: Tensor\(2, 7, 5, 5\)\}",
        ),
        ((torch.ones(2, 4, 3, 3), torch.ones(5)), r"got tuple \(Tensor\(2, 4, 3, 3\), Tensor\(5\)\)"),
    ],
)
def test_an_output_without_class_scores_is_named_with_the_callable_fix(output, got):
    with pytest.raises(ValueError, match=got + r"; pass target=callable\(output\) returning a scalar instead"):
        backward_score(output, 0)
    with pytest.raises(ValueError, match=got + r"; pass target=callable\(output\) returning one score per item"):
        resolve_score(output, 0, per_item=True)


class StepCounter(torch.nn.Module):
    """Counts its calls in a buffer it replaces (``self.calls = self.calls + 1``), as step counters and caches do."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls = self.calls + 1
        return x


def test_a_buffer_the_forward_replaces_is_put_back_after_every_explorer_run():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), StepCounter(), torch.nn.Flatten(), torch.nn.LazyLinear(2)
    )
    x = torch.randn(2, 3, 6, 6)
    model(x)  # materializes the lazy layer; the counter reads 1 from here on
    counter = model[1].calls
    ex = Explorer(model, example_inputs=x)
    ex.run(target=0)
    ex.gradcam("0", target=0)
    ex.first_nonfinite()
    ex.graph(x)
    assert model[1].calls is counter and counter.item() == 1  # the same object, with its value
    assert list(model[1]._buffers) == ["calls"]


def test_train_mode_runs_see_dropout_and_batch_statistics_and_leave_the_mode_as_found():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Dropout(0.5), torch.nn.BatchNorm1d(64)).eval()
    x = torch.randn(8, 64)
    ex = Explorer(model, example_inputs=x)
    ex.attach("1", "forward")
    ex.run()
    assert ex.captures["1"]["forward"][-1].tensor.eq(0).float().mean() < 0.1  # eval: Dropout passes all through
    ex.run(train=True)
    assert 0.3 < ex.captures["1"]["forward"][-1].tensor.eq(0).float().mean() < 0.7
    assert not any(m.training for m in model.modules())
    assert torch.equal(model[2].running_mean, torch.zeros(64))  # batch statistics used, running ones kept


def test_first_nonfinite_in_train_mode_finds_what_batch_statistics_make():
    class Standardize(torch.nn.Module):
        """Divides by the batch's standard deviation in training, by a fixed scale otherwise."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x - x.mean(0)) / x.std(0) if self.training else x / 2

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Standardize())
    constant = torch.ones(3, 4)  # the same row three times: batch deviation 0, and 0/0 in training
    ex = Explorer(model, example_inputs=constant)
    assert ex.first_nonfinite() is None  # eval
    assert ex.first_nonfinite(train=True) == "1"
    assert all(m.training for m in model.modules())  # a fresh model trains; left so


class ShiftsItsInput(torch.nn.Module):
    """Changes its input in place, as some preprocessing modules do."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2.0)
        return self.head(self.conv(x).mean((2, 3)))


def test_the_explorers_own_runs_leave_the_example_inputs_as_given(cnn, image):
    x = torch.randn(2, 3, 6, 6)
    before = x.clone()
    ex = Explorer(ShiftsItsInput(), example_inputs=x)  # its probe runs the model once
    ex.attach("conv", "forward_pre")
    first = ex.run(target=0)
    again = ex.run(target=0)
    ex.first_nonfinite()
    ex.graph(None)
    ex.gradcam("conv", target=0)
    assert torch.equal(x, before)
    assert torch.equal(first, again)  # each run starts from the same values
    assert torch.equal(ex.captures["conv"]["forward_pre"][-1].tensor, before * 2)

    wants_grad = image.clone().requires_grad_(True)  # an input that requires grad gets no .grad from these runs
    Explorer(cnn, example_inputs=wants_grad).run(target=0)
    assert wants_grad.grad is None
