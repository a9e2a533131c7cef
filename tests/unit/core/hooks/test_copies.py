"""Copies and saved models carry none of the explorer's hooks: deepcopy, copy, pickle and torch.save work."""

import copy
import io
import pickle
import subprocess
import sys
import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import hook_state


def pickled(model: nn.Module) -> nn.Module:
    return pickle.loads(pickle.dumps(model))


def saved(model: nn.Module) -> nn.Module:
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


COPIES = {"deepcopy": copy.deepcopy, "copy": copy.copy, "pickle": pickled, "torch.save": saved}


def make_model() -> nn.Sequential:
    """A Linear whose output an in-place ReLU changes: a full backward hook on the Linear breaks a forward."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Sequential(nn.Linear(4, 2)))


@pytest.fixture
def x():
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(1), requires_grad=True)


def attach_every_kind(ex: Explorer, x: torch.Tensor) -> None:
    """Node hooks, module kinds (the full backward ones on the Linear before the in-place ReLU), every global
    kind and parameter kinds; the graph is recorded first, since its forward would meet the collision."""
    node = next(n["id"] for n in ex.graph(x)["nodes"] if n["op"] == "AddmmBackward0")
    ex.attach(node, ["node_pre", "node"])
    ex.attach("0", ["forward_pre", "forward", "backward_pre", "backward", "grad"])
    ex.attach("2.0", ["forward", "backward"], action="stats")
    ex.attach("", ["global_forward_pre", "global_forward", "global_backward_pre", "global_backward", "global_grad"])
    ex.attach("2.0.weight", ["grad", "post_accumulate"])
    assert len(ex.hooks) == 16


def user_step(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    xi = x.detach().clone().requires_grad_()
    out = model(xi)
    out.pow(2).sum().backward()
    return out.detach(), [xi.grad, *(p.grad for p in model.parameters())]


def param_hooks(model: nn.Module) -> list:
    return [(p._backward_hooks or {}, p._post_accumulate_grad_hooks or {}) for p in model.parameters()]


@pytest.mark.parametrize("how", COPIES)
def test_a_copy_taken_with_every_kind_attached_is_a_hook_free_copy(x, how):
    model = make_model()
    twin, before = copy.deepcopy(model), hook_state(model)
    ex = Explorer(model)
    attach_every_kind(ex, x)
    step, timeline, records = ex.step, len(ex.timeline), len(ex.captures.snapshot()[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch.save warns of hooks it drops: there must be none of ours
        clone = COPIES[how](model)
    if how == "copy":  # a shallow copy shares the submodules (and their hooks): its own dicts are the copy's
        assert {k: v for k, v in hook_state(clone).items() if k[0] == ""} == {
            k: v for k, v in before.items() if k[0] == ""
        }
        assert "__reduce_ex__" not in vars(clone)
        ex.close()
        assert hook_state(model) == before
        return
    assert hook_state(clone) == before  # hook dicts and backward flags as before the explorer
    assert all("__reduce_ex__" not in vars(module) for module in clone.modules())
    assert param_hooks(clone) == [({}, {})] * len(param_hooks(clone))
    out, grads = user_step(clone, x)  # the in-place ReLU after the Linear works: no full backward hook there
    expected, expected_grads = user_step(twin, x)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grads, expected_grads)
    assert (ex.step, len(ex.timeline), len(ex.captures.snapshot()[0])) == (step, timeline, records)  # not ours
    ex.close()
    assert hook_state(model) == before


def test_copies_keep_hooks_someone_else_attached_and_the_flag_they_need(x):
    model = make_model()
    model[2][0].register_forward_hook(print_nothing)
    theirs = model[2][0].register_full_backward_hook(print_nothing)
    before = hook_state(model)
    with Explorer(model) as ex:
        ex.attach("2.0", ["forward", "backward"])
        clone = copy.deepcopy(model)
        loaded = pickled(model)
    for copied in (clone, loaded):
        assert hook_state(copied) == before  # the same hook objects: functions copy as themselves
        assert list(copied[2][0]._backward_hooks) == [theirs.id] and copied[2][0]._is_full_backward_hook is True


def print_nothing(*args: object) -> None:
    """A module-level hook someone else attached: picklable by reference."""


def test_two_explorers_install_the_copy_helper_once_and_the_last_one_removes_it(x):
    model = make_model()
    keys = {path: set(vars(m)) for path, m in model.named_modules()}
    first, second = Explorer(model), Explorer(model)
    first.attach("0", "forward")
    helper = vars(model[0])["__reduce_ex__"]
    second.attach("", "global_forward")
    assert vars(model[0])["__reduce_ex__"] is helper
    first.close()
    assert vars(model[0])["__reduce_ex__"] is helper  # the second explorer's global hook is still on it
    copy.deepcopy(model)
    second.close()
    assert {path: set(vars(m)) for path, m in model.named_modules()} == keys


def test_detach_and_close_leave_every_modules_attributes_as_found(x):
    model = make_model()
    keys = {path: set(vars(m)) for path, m in model.named_modules()}
    ex = Explorer(model)
    attach_every_kind(ex, x)
    assert all("__reduce_ex__" in vars(m) for m in model.modules())
    ex.detach()
    assert {path: set(vars(m)) for path, m in model.named_modules()} == keys
    ex.attach("0", "backward")
    ex.close()
    assert {path: set(vars(m)) for path, m in model.named_modules()} == keys


def test_parameter_hooks_never_reach_a_copy_in_torch(x):
    """torch drops tensor and post-accumulate hooks of parameters itself (Parameter.__deepcopy__ and __reduce_ex__)."""
    model = make_model()
    model[0].weight.register_hook(lambda grad: None)  # someone else's: dropped too
    with Explorer(model) as ex:
        ex.attach("0.weight", ["grad", "post_accumulate"])
        for clone in (copy.deepcopy(model), pickled(model), saved(model)):
            assert param_hooks(clone) == [({}, {})] * 4


LOAD = """
import pickle, sys
sys.modules["hookwidgets"] = None  # import hookwidgets fails from here on
import torch
with open(sys.argv[1], "rb") as f:
    model = pickle.load(f) if sys.argv[2] == "pickle" else torch.load(f, weights_only=False)
print(model(torch.ones(1, 4)).shape, sorted(vars(model[0])).count("__reduce_ex__"))
"""


@pytest.mark.parametrize("how", ["pickle", "torch.save"])
def test_a_saved_model_loads_where_hookwidgets_cannot_be_imported(x, how, tmp_path):
    model = make_model()
    with Explorer(model) as ex:
        attach_every_kind(ex, x)
        path = tmp_path / "model.pt"
        if how == "pickle":
            path.write_bytes(pickle.dumps(model))
        else:
            torch.save(model, path)
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(path), how], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch.Size([1,", "2])", "0"]


class CopiesItsDict(nn.Module):
    """A class with its own ``__deepcopy__`` that copies ``__dict__`` as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)

    def __deepcopy__(self, memo: dict) -> "CopiesItsDict":
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new


def test_a_copy_made_by_a_class_of_its_own_pickles_as_itself(x):
    model = nn.Sequential(CopiesItsDict())
    with Explorer(model) as ex:
        ex.attach("0", "forward")
        clone = copy.deepcopy(model)  # the class copies the explorer's hook functions as they are
        with torch.no_grad():
            clone[0].fc.weight.fill_(7.0)
        loaded = pickled(clone)
    assert torch.equal(loaded[0].fc.weight, torch.full((2, 4), 7.0))  # the copy's weights, not the original's
    assert list(loaded[0]._forward_hooks) == []
