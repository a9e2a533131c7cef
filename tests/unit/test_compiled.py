"""Explorers on torch.compile'd models: hooks run eagerly beside the compiled code, and close() restores all."""

import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.capture import CaptureStore
from hookwidgets.core.hooks import HookRegistry
from hookwidgets.core.kinds import GLOBAL_KINDS, KINDS

from ..conftest import hook_state

# The explorer warns that hooks added after compiling are ignored by default; torch warns that global
# hooks fire once more for the wrapper. Both are expected here.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def compiled_mlp() -> tuple[nn.Sequential, nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 3))
    return net, torch.compile(net, backend="eager"), torch.randn(2, 4)


def test_global_hooks_on_a_compiled_model_run_eagerly_and_record_the_real_values():
    net, compiled, x = compiled_mlp()
    before = hook_state(compiled)
    ex = Explorer(compiled, x)
    ex.attach("", "global_forward")
    out = ex.run(x)
    torch.testing.assert_close(out, net(x))
    torch.testing.assert_close(ex.captures["_orig_mod.0"]["global_forward"][-1].tensor, net[0](x))
    torch.testing.assert_close(ex.captures["_orig_mod.2"]["global_forward"][-1].tensor, net(x))
    assert ex.hooks[0].last_error is None
    ex.close()
    assert hook_state(compiled) == before


def test_every_global_kind_attaches_to_a_compiled_model_and_fires():
    _, compiled, x = compiled_mlp()
    with Explorer(compiled, x) as ex:
        infos = ex.attach("", list(GLOBAL_KINDS), action="stats")
        ex.run(x, target=0)
        assert all(info.last_error is None for info in infos)
        assert {info.kind for info in infos if info.fired} >= {"global_forward_pre", "global_forward", "global_grad"}
        grad = ex.captures["_orig_mod.2"]["global_grad"][-1].stats
        assert grad["max"] == pytest.approx(1.0) and grad["numel"] == 6  # d(sum of class 0)/d(logits)


def test_close_puts_back_the_backward_flag_of_the_module_a_compile_wrapper_writes_to():
    net, compiled, _ = compiled_mlp()
    before = hook_state(compiled)
    # Explorer.attach refuses backward hooks on the wrapper (they never fire); the engine room takes them
    registry = HookRegistry(compiled, CaptureStore())
    registry.attach("", compiled, KINDS["backward"], "backward")  # the wrapper forwards the flag's write
    registry.attach("_orig_mod", net, KINDS["backward"], "backward")
    assert net._is_full_backward_hook is True
    registry.close()
    assert hook_state(compiled) == before and net._is_full_backward_hook is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        net.register_backward_hook(lambda *args: None)  # torch refuses this while the flag says "full"


@pytest.mark.parametrize("kind", ["backward", "backward_pre", "legacy_backward"])
def test_backward_hooks_on_the_compile_wrapper_itself_are_refused_with_the_module_to_use(kind):
    _, compiled, x = compiled_mlp()
    before = hook_state(compiled)
    with Explorer(compiled, x) as ex:
        with pytest.raises(ValueError, match=r"torch never fires backward hooks registered on the wrapper itself; "):
            ex.attach("", kind)
        assert ex.hooks == [] and hook_state(compiled) == before
        info = ex.attach("_orig_mod", "backward")  # the advice works
        ex.run(x, target=0)
        assert info.fired == 1
