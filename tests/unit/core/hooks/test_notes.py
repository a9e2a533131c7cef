"""The pitfalls the engine recognises: in-place collisions, dict outputs, no_grad, compiled models."""

import warnings
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.hooks.notes import NOT_ARMED, STEP_NOT_ARMED
from tests.conftest import Aliased, hook_state


def inplace_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2))


def test_inplace_collision_in_a_forward_is_explained_and_the_hook_detached():
    model = inplace_model()
    before = hook_state(model)
    x = torch.randn(3, 4)
    ex = Explorer(model)
    info = ex.attach("0", "backward")
    ex.attach("2", "forward")
    collision = r"full backward hook 'backward' on '0' collides with the in-place module '1'"
    with (
        pytest.warns(UserWarning, match=collision),
        pytest.raises(RuntimeError, match="is a view and is being modified inplace"),
    ):
        model(x)
    assert "Attach 'grad' instead" in info.last_error
    assert "set model.get_submodule('1').inplace = False" in info.last_error
    assert ex.diagnostics == [info.last_error]
    assert [(h.target, h.kind) for h in ex.hooks] == [("2", "forward")]
    model(x).sum().backward()  # the next forward works
    ex.close()
    assert hook_state(model) == before


def test_only_the_full_backward_hook_the_in_place_op_broke_is_detached():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 4), nn.Tanh())
    x = torch.randn(3, 4)
    ex = Explorer(model)
    broken = ex.attach("0", "backward")  # its output is what the in-place ReLU modifies
    kept = ex.attach("2", "backward", action="stats")  # followed by an out-of-place Tanh: fine
    with pytest.warns(UserWarning, match="'backward' on '0' collides"), pytest.raises(RuntimeError):
        model(x)
    assert [(h.target, h.kind) for h in ex.hooks] == [("2", "backward")]
    assert broken.last_error is not None and kept.last_error is None and kept.active
    model(x).sum().backward()
    assert kept.fired == 1 and len(ex.captures["2"]["backward"]) == 1
    ex.close()


def test_a_collision_with_someone_elses_hook_is_explained_and_leaves_every_hook_in_place():
    model = inplace_model()
    theirs = model[0].register_full_backward_hook(lambda module, grad_input, grad_output: None)
    x = torch.randn(3, 4)
    ex = Explorer(model, example_inputs=x)
    mine = ex.attach("2", "backward", action="stats")  # not blamed at attach time: it breaks nothing
    foreign = r"the in-place module '1' \(ReLU\) modifies the output of a module with a full backward hook that the"
    with pytest.warns(UserWarning, match=foreign) as caught, pytest.raises(RuntimeError, match="modified inplace"):
        ex.run(target=0)
    (text,) = [str(w.message) for w in caught if "did not attach" in str(w.message)]
    assert "<lambda> on '0')" in text and "set model.get_submodule('1').inplace = False" in text
    assert ex.diagnostics[-1] == text and mine.active and mine.last_error is None
    assert [(h.target, h.kind, h.foreign) for h in ex.hooks] == [("2", "backward", False), ("0", "backward", True)]
    theirs.remove()  # the user's fix
    ex.run(target=0)
    assert mine.fired == 1
    ex.close()


def test_inplace_collision_is_found_at_attach_time_with_example_inputs():
    model = inplace_model()
    before = hook_state(model)
    ex = Explorer(model, example_inputs=torch.randn(3, 4))
    ex.attach("2", "forward")
    with pytest.raises(ValueError, match=r"'backward_pre' on '1' collides with the in-place module '1' \(ReLU\)"):
        ex.attach("1", "backward_pre")
    assert [(h.target, h.kind) for h in ex.hooks] == [("2", "forward")]
    assert ex.hooks[0].fired == 0  # the probe ran with the user's hooks suspended
    ex.attach("1", "grad")  # the advice works
    ex.run(target=0)
    assert len(ex.captures["1"]["grad"]) == 1
    ex.close()
    assert hook_state(model) == before


def test_a_refused_kind_takes_back_the_other_kinds_of_the_same_call():
    model = inplace_model()
    before = hook_state(model)
    ex = Explorer(model, example_inputs=torch.randn(3, 4))
    with pytest.raises(ValueError, match="collides with the in-place module"):
        ex.attach("1", ["forward", "backward", "grad"])
    assert ex.hooks == []
    assert hook_state(model) == before
    with pytest.raises(ValueError, match="not valid for module"):
        ex.attach("1", ["forward", "node"])  # refused before anything is attached
    assert ex.hooks == []
    ex.close()


class RaisesOnBatches(nn.Module):
    """Refuses batches of more than one item: the example inputs below make its forward raise."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1:
            raise ValueError("batch must be 1")
        return self.lin(x)


def test_a_backward_hook_attaches_when_the_example_forward_raises_an_error_of_the_models_own():
    model = RaisesOnBatches()
    ex = Explorer(model, example_inputs=torch.randn(2, 4))
    assert "batch must be 1" in ex.probe_error
    info = ex.attach("lin", "backward")  # the collision check cannot run; the hook is attached, no error
    assert [(h.target, h.kind) for h in ex.hooks] == [("lin", "backward")]
    ex.run(torch.randn(1, 4), target=0)
    assert info.fired == 1 and info.last_error is None
    ex.close()


class DictOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        return {"a": y * 2, "b": y.sum(dim=1)}


class UsesDict(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = DictOut()

    def forward(self, x):
        out = self.block(x)
        return out["a"].sum() + 3 * out["b"].sum()


def test_dict_output_says_why_and_records_output_gradients_with_tensor_hooks():
    model = UsesDict()
    x = torch.randn(2, 3)
    with Explorer(model) as ex:
        pre = ex.attach("block", "backward_pre")
        full = ex.attach("block", "backward")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch's own warning about the dict
            model(x).backward()
        assert "output is a dict" in pre.note and "'grad' tensor hooks" in pre.note
        assert "attach 'grad'" in full.note
        grads = {name: t for rec in ex.captures["block"]["backward_pre"] for name, t in rec.tensors.items()}
        assert "backward" not in ex.captures["block"]
    torch.testing.assert_close(grads["grad_output.a"], torch.ones(2, 3))
    torch.testing.assert_close(grads["grad_output.b"], torch.full((2,), 3.0))


def test_run_does_not_repeat_torchs_warning_about_a_dict_output_that_the_note_explains():
    model = UsesDict()
    with Explorer(model, example_inputs=torch.randn(2, 3)) as ex:
        info = ex.attach("block", "backward")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ex.run(target=lambda out: out.sum())
        assert not [w for w in caught if "module output should be a Tensor" in str(w.message)]
        assert "output is a dict" in info.note


@dataclass
class Hidden:
    state: torch.Tensor
    pooled: torch.Tensor


class DataclassOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        return Hidden(y * 2, y.sum(dim=1))


class UsesDataclass(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.block = DataclassOut()
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        out = self.block(x)
        return self.head(out.state) + out.pooled[:, None]


def test_dataclass_output_says_why_full_backward_hooks_see_nothing():
    model = UsesDataclass()
    with Explorer(model) as ex:
        full = ex.attach("block", "backward")
        pre = ex.attach("block", "backward_pre")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch's own warning about the dataclass
            ex.run(torch.randn(2, 3), target=0)
        assert full.note == (
            "output is a dataclass (Hidden): full backward hooks cannot fire on it (torch needs a Tensor or a "
            "tuple); attach 'grad' to record the output gradients"
        )
        assert pre.note.startswith("output is a dataclass (Hidden)") and "'grad' tensor hooks" in pre.note
        assert "backward" not in ex.captures["block"]
        grads = {name: t for rec in ex.captures["block"]["backward_pre"] for name, t in rec.tensors.items()}
    torch.testing.assert_close(grads["grad_output.pooled"], torch.ones(2))  # class 0's score adds each pooled once
    torch.testing.assert_close(grads["grad_output.state"], model.head.weight[0].detach().expand(2, 3))


def test_backward_hooks_under_no_grad_say_they_are_not_armed():
    model = inplace_model()
    with Explorer(model) as ex:
        info = ex.attach("2", "backward")
        with torch.no_grad():
            model(torch.randn(2, 4))
        assert info.note == NOT_ARMED
        model(torch.randn(2, 4))
        assert info.note is None


def test_compiled_model_warns_that_late_hooks_are_ignored():
    model = nn.Sequential(nn.Linear(2, 2))
    model.compile()
    with Explorer(model) as ex, pytest.warns(UserWarning, match="the model is compiled"):
        info = ex.attach("0", "forward")
    assert "skip_nnmodule_hook_guards" in info.note


def test_first_nonfinite_leaves_the_users_hooks_silent(cnn, image):
    with Explorer(cnn) as ex:
        ex.attach("features.conv", "forward")
        assert ex.first_nonfinite(image) is None
        assert ex.hooks[0].fired == 0 and ex.step == 0


class KeywordOnly(nn.Module):
    """Takes its tensor by keyword only: torch's full backward hooks leave it out of grad_input."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, *, x):
        return x * self.weight


class CallsByKeyword(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.scale = KeywordOnly()

    def forward(self, x):
        return self.scale(x=self.first(x))


@pytest.mark.parametrize("kind", ["backward", "global_backward"])
def test_a_keyword_only_call_is_named_as_why_grad_input_is_empty_not_inputs_without_grad(kind):
    model = CallsByKeyword()
    x = torch.randn(2, 4, requires_grad=True)  # every other module gets an input gradient
    with Explorer(model) as ex:
        info = ex.attach("scale" if kind == "backward" else "", kind)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch: "no inputs require gradients"
            model(x).sum().backward()
        assert model.first(x).requires_grad  # its input does require grad: torch left it out
        record = ex.captures["scale"][kind][-1]
    assert list(record.tensors) == ["grad_output.0"]
    assert info.note == (
        "grad_input of 'scale' is empty: 'scale' was called with no positional argument, and torch leaves tensors "
        "passed by keyword (module(x=t)) out of grad_input, so only grad_output is recorded; pass the tensor "
        "positionally, or attach 'grad' or 'backward_pre' to the module that produces it (its grad_output is "
        "this input's gradient)"
    )


def test_an_edit_of_a_keyword_only_calls_grad_input_says_why_it_had_no_effect():
    model = CallsByKeyword()
    with Explorer(model) as ex:
        info = ex.attach("scale", "backward", edit=("zero",))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model(torch.randn(2, 4)).sum().backward()
    assert info.note.startswith("the edit had no effect: 'scale' was called with no positional argument")
    assert info.note.endswith("or edit 'grad' or 'backward_pre' on the module that produces it")
    assert model.first.weight.grad.abs().sum() > 0  # the gradient went on unchanged


STEP_KINDS = [("", "global_backward"), ("", "global_backward_pre"), ("", "global_grad"), ("0.weight", "grad")]
STEP_KINDS += [("0.bias", "post_accumulate")]


@pytest.mark.parametrize("no_grad", [torch.no_grad, torch.inference_mode])
def test_global_and_parameter_hooks_say_they_are_not_armed_after_a_forward_without_grad(no_grad):
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
    with Explorer(model) as ex:
        infos = [ex.attach(target, kind) for target, kind in STEP_KINDS]
        with no_grad():
            model(torch.randn(2, 4))
        assert [info.note for info in infos] == [STEP_NOT_ARMED] * len(infos)
        assert [(h.kind, h.note) for h in ex.hooks] == [(k, STEP_NOT_ARMED) for _, k in STEP_KINDS]
        model(torch.randn(2, 4, requires_grad=True)).sum().backward()  # a forward that arms them clears it
        assert [info.note for info in infos] == [None] * len(infos)
        assert all(info.fired for info in infos)


def test_a_forward_with_nothing_requiring_grad_does_not_arm_them_either():
    model = nn.Sequential(nn.Linear(4, 2))
    with Explorer(model) as ex:
        info = ex.attach("", "global_grad")
        model.requires_grad_(False)
        model(torch.randn(2, 4))
        assert info.note == STEP_NOT_ARMED
        model.requires_grad_(True)
        model(torch.randn(2, 4))
        assert info.note is None


class CountsForwards(nn.Module):
    """Counts its forwards; changes its first layer's output in place once ``late`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.proj, self.head = nn.Linear(4, 4), nn.Linear(4, 2)
        self.late, self.forwards = False, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.forwards += 1
        y = self.proj(x)
        return self.head(y.relu_() if self.late else y.relu())


def test_graph_records_again_without_the_broken_hook_and_runs_no_forward_just_to_find_it():
    torch.manual_seed(0)
    model = CountsForwards()
    with Explorer(model, example_inputs=torch.randn(2, 4)) as ex:
        broken = ex.attach("proj", "backward")
        model.late, model.forwards = True, 0
        with pytest.warns(UserWarning, match=r"'backward' on 'proj' collides with the in-place module ''"):
            graph = ex.graph()
        assert "error" not in graph and not broken.active and ex.own_hooks == []
        assert model.forwards == 2  # the one that met the collision, then the whole graph's


def test_a_note_of_one_kind_never_takes_away_a_note_of_another():
    with Explorer(Aliased()) as ex:
        with pytest.warns(UserWarning, match="another path"):
            hook = ex.attach("first", "grad")
        alias = hook.note
        assert "'first' is another path to 'layers.0'" in alias
        with torch.no_grad():
            ex.model(torch.randn(2, 4))
        assert hook.note.startswith("not armed: no output tensor required grad")  # says more, so it is shown
        ex.model(torch.randn(2, 4)).sum().backward()
        assert hook.note == alias  # the not-armed note went, and only it
        hook.note = "mine"  # set by hand: replaces every other
        assert hook.note == "mine"
