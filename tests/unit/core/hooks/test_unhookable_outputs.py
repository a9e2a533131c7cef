"""A full backward hook on a module whose output torch cannot hook (a dict, a ModelOutput): said once on the hook,
not by torch at every forward of the user's own loop."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import hook_state

TORCH_SAYS = "For backward hooks to be called"


class Switch(nn.Module):
    """A Linear whose output comes as a dict or as a tuple, as asked per call."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor, as_dict: bool = True):
        y = self.fc(x)
        return {"y": y} if as_dict else (y,)


def _torch_warnings(loop) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop()
    return sum(TORCH_SAYS in str(w.message) for w in caught)


def _train(model: nn.Module, ids: torch.Tensor, steps: int = 5) -> None:
    for _ in range(steps):
        model(ids).logits.sum().backward()


@pytest.mark.parametrize("kind", ["backward", "backward_pre"])
def test_a_gpt2_root_hook_says_it_once_and_the_users_loop_gets_no_warning(kind):
    model, ids = tm.gpt2(), tm.token_ids(2, 5)
    with Explorer(model, example_inputs=ids) as ex:
        info = ex.attach("", kind)
        assert info.note.startswith("output is a dict: full backward hooks cannot fire on it")
        assert _torch_warnings(lambda: _train(model, ids)) == 0
        assert info.note.startswith("output is a dict")
        if kind == "backward_pre":  # recorded through tensor hooks on the output instead
            assert len(ex.captures[""]["backward_pre"]) == 5


def test_without_example_inputs_the_root_hook_says_it_at_the_first_forward_and_torch_never_warns():
    # the model's own full backward hooks are the explorer's (hooks/root_backward.py), not torch's: no torch warning
    model, ids = tm.gpt2(), tm.token_ids(2, 5)
    with Explorer(model) as ex:
        info = ex.attach("", "backward")
        assert info.note is None
        assert _torch_warnings(lambda: _train(model, ids)) == 0
        assert info.note.startswith("output is a dict")


def test_without_example_inputs_torch_says_it_at_the_first_forward_only():
    model, ids = tm.gpt2(), tm.token_ids(2, 5)
    with Explorer(model) as ex:
        info = ex.attach("transformer", "backward")
        assert _torch_warnings(lambda: _train(model, ids)) == 1
        assert info.note.startswith("output is a dict")


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # the embeddings' integer inputs
def test_global_backward_hooks_give_no_warning_for_the_modules_with_dict_outputs():
    model, ids = tm.gpt2(), tm.token_ids(2, 5)
    with Explorer(model, example_inputs=ids) as ex:
        ex.attach("", "global_backward", "stats")
        _train(model, ids, steps=1)  # the first forward: torch's own word, once per dict-output module
        assert _torch_warnings(lambda: _train(model, ids)) == 0
        assert ex.captures["transformer.h.0.mlp"]["global_backward"]  # the others still fire


@pytest.mark.filterwarnings(f"ignore:{TORCH_SAYS}")  # the first dict call after the hook came back
def test_a_hook_set_aside_comes_back_when_the_output_becomes_a_tuple_and_detaching_restores_the_model():
    torch.manual_seed(0)
    model, x = Switch(), torch.randn(2, 3, requires_grad=True)
    before = hook_state(model)
    with Explorer(model) as ex:
        ex.attach("", "backward")
        model(x)["y"].sum().backward()  # the dict call sets the hook aside
        assert not model._backward_hooks
        assert _torch_warnings(lambda: model(x)["y"].sum().backward()) == 0
        model(x, as_dict=False)[0].sum().backward()  # puts it back for the next call
        model(x, as_dict=False)[0].sum().backward()
        (record,) = ex.captures[""]["backward"]
        assert record.tensors["grad_output.0"].shape == (2, 3)
        model(x)  # aside again
        ex.detach()
        model(x, as_dict=False)  # a detached hook never comes back
    assert hook_state(model) == before
