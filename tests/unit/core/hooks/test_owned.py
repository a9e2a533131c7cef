"""The process-wide ledger of what hookwidgets puts on modules: backward-hook flags shared by several explorers."""

import gc
import warnings

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import hook_state


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))


@pytest.fixture
def x():
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(1))


@pytest.fixture(autouse=True)
def _global_flag():
    """Every test starts and ends with torch's global flag as a fresh process has it."""
    assert module_globals._global_is_full_backward_hook is None
    yield
    module_globals._global_is_full_backward_hook = None


def dict_keys(model: nn.Module) -> dict[str, set[str]]:
    """Every module's instance attribute names."""
    return {path: set(vars(module)) for path, module in model.named_modules()}


def assert_legacy_hooks_allowed(module: nn.Module) -> None:
    """torch refuses a legacy backward hook on a module, or process-wide, while a full one's flag stays set."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        module.register_backward_hook(lambda *args: None).remove()
        module_globals.register_module_backward_hook(lambda *args: None).remove()


def test_rerun_cell_with_the_first_explorer_dropped_unclosed_puts_every_flag_back(mlp, x):
    before, keys = hook_state(mlp), dict_keys(mlp)
    ex = None
    for _ in range(2):  # the notebook cell, run twice: the first explorer is dropped when `ex` is rebound
        ex = Explorer(mlp, example_inputs=x)
        ex.attach("0", "backward")
        ex.attach("", "global_backward")
    assert mlp[0]._is_full_backward_hook is True
    del ex
    gc.collect()
    assert hook_state(mlp) == before and dict_keys(mlp) == keys
    assert module_globals._global_is_full_backward_hook is None
    assert_legacy_hooks_allowed(mlp[0])


@pytest.mark.parametrize("order", ["attach order", "reverse order", "first dropped", "second dropped"])
def test_two_explorers_with_full_backward_hooks_on_one_module_put_the_flag_back_in_any_order(mlp, order):
    before, keys = hook_state(mlp), dict_keys(mlp)
    first, second = Explorer(mlp), Explorer(mlp)
    first.attach("0", ["backward", "backward_pre"])
    second.attach("0", "backward")
    if order == "attach order":
        first.close()
        assert mlp[0]._is_full_backward_hook is True  # the second explorer's hook still needs it
        second.close()
    elif order == "reverse order":
        second.close()
        first.close()
    else:
        explorers = [first, second] if order == "first dropped" else [second, first]
        del first, second
        explorers.pop(0)  # dropped unclosed: its finalizer removes its hooks
        gc.collect()
        assert mlp[0]._is_full_backward_hook is True
        explorers.pop().close()
    assert hook_state(mlp) == before and dict_keys(mlp) == keys
    assert_legacy_hooks_allowed(mlp[0])


@pytest.mark.parametrize("parent_first", [True, False])
def test_an_explorer_of_a_submodule_beside_one_of_its_parent_shares_the_flag(parent_first):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.Tanh()), nn.Linear(4, 2))
    before, keys = hook_state(model), dict_keys(model)
    parent, child = Explorer(model), Explorer(model[0])
    parent.attach("0.0", "backward")
    child.attach("0", "backward")
    child.attach("", "global_backward")
    (parent if parent_first else child).close()
    assert model[0][0]._is_full_backward_hook is True
    (child if parent_first else parent).close()
    assert hook_state(model) == before and dict_keys(model) == keys
    assert_legacy_hooks_allowed(model[0][0])


def test_a_full_backward_hook_someone_else_left_keeps_the_flag_as_torch_would(mlp):
    ex = Explorer(mlp)
    ex.attach("0", "backward")
    theirs = mlp[0].register_full_backward_hook(lambda *args: None)
    ex.close()
    assert mlp[0]._is_full_backward_hook is True and list(mlp[0]._backward_hooks) == [theirs.id]
    theirs.remove()
    assert mlp[0]._is_full_backward_hook is True  # torch keeps it after removal too


def test_a_flag_found_set_is_left_set(mlp):
    mlp[2].register_full_backward_hook(lambda *args: None).remove()  # torch leaves the flag True
    before = hook_state(mlp)
    with Explorer(mlp) as ex:
        ex.attach("2", "backward")
    assert hook_state(mlp) == before and mlp[2]._is_full_backward_hook is True


def test_a_refused_legacy_hook_counts_nothing(mlp):
    before, keys = hook_state(mlp), dict_keys(mlp)
    with Explorer(mlp) as ex:
        ex.attach("0", "backward")
        with pytest.raises(ValueError, match="module '0' has a full backward hook"):  # torch refuses mixing them
            ex.attach("0", "legacy_backward")
        ex.detach("0", "backward")
        assert hook_state(mlp) == before and dict_keys(mlp) == keys


def test_another_explorers_hooks_are_listed_once_each_as_its_and_its_machinery_not_at_all(mlp, x):
    def mine(module, args, output):
        return None

    mlp[2].register_forward_hook(mine)
    first = Explorer(mlp, x)
    first.attach("", ["global_forward", "global_backward"], action="stats")
    first.attach("0", "backward")
    second = Explorer(mlp, x)
    second.attach("2", "forward")
    listed = {(h.target, h.kind, h.action) for h in second.hooks if h.foreign}
    assert listed == {
        ("", "global_forward", "stats (another explorer's)"),
        ("", "global_backward", "stats (another explorer's)"),
        ("0", "backward", "capture (another explorer's)"),
        (
            "2",
            "forward",
            "test_another_explorers_hooks_are_listed_once_each_as_its_and_its_machinery_not_at_all.<locals>.mine",
        ),
    }
    assert len([h for h in second.hooks if h.foreign]) == len(listed)
    first.close()
    assert [(h.target, h.kind) for h in second.hooks if h.foreign] == [("2", "forward")]
    second.close()
