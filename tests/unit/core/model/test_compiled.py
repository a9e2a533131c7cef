"""Explorers on torch.compile'd models: hooks run eagerly beside the compiled code, and close() restores all."""

import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import GLOBAL_KINDS, KINDS, CaptureStore, Explorer, HookRegistry
from hookwidgets.widget.payloads import hooks_payload
from tests.conftest import hook_state

# The explorer warns that hooks added after compiling are ignored by default; torch warns that global
# hooks fire once more for the wrapper. Both are expected here.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch, and leaves no compiled code behind for the next."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Net(nn.Module):
    """Two Linear layers in a forward of its own (``module.compile()`` on a Sequential compiles nothing)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def compile_net(how: str) -> tuple[Net, nn.Module, str]:
    """``(net, what the user calls, the prefix of net's modules in the explorer)`` for ``torch.compile(net)``
    or ``net.compile()``, with the aot_eager backend (inductor takes minutes here)."""
    net = Net()
    if how == "torch.compile":
        return net, torch.compile(net, backend="aot_eager"), "_orig_mod."
    net.compile(backend="aot_eager")
    return net, net, ""


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


@pytest.mark.parametrize("how", ["torch.compile", "module.compile"])
def test_only_a_hook_that_has_not_fired_since_attach_says_the_compiled_model_may_skip_it(how):
    net, model, prefix = compile_net(how)
    x = torch.randn(2, 4)
    with Explorer(model, x) as ex:
        before = ex.attach(prefix + "fc1", "forward")  # before the model's first compiled call
        assert before.note.startswith("not fired since it was attached, and the model is compiled")
        model(x)
        assert before.fired == 1 and before.note is None  # it fired: the note was no longer true
        after = ex.attach(prefix + "fc2", "forward")  # the compiled code does not run it (torch 2.3's does)
        model(x)
        assert before.fired == 2
        if after.fired == 0:
            assert after.note.startswith("not fired since it was attached, and the model is compiled")
        else:
            assert after.note is None
        assert [hook["note"] for hook in hooks_payload(ex.hooks)] == [None, after.note]  # what the widget shows
        torch.testing.assert_close(ex.captures[prefix + "fc1"]["forward"][-1].tensor, net.fc1(x))


def user_calls(model: nn.Module, mode: str, x: torch.Tensor) -> None:
    """Two calls of the user's own loop: inference (eval, no grad) or training (train mode, backward)."""
    for _ in range(2):
        if mode == "inference":
            model.eval()
            with torch.no_grad():
                model(x)
        else:
            model.train()
            model(x).sum().backward()


def compiled_so_far() -> tuple[int, int]:
    """(graphs compiled, graph breaks) since the counters were last cleared."""
    counters = torch._dynamo.utils.counters
    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


@pytest.mark.skipif(
    not hasattr(torch.compiler, "set_stance"),
    reason="torch < 2.6 has no stance to run own runs eagerly; test_torch_apis.py checks what the explorer does then",
)
@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("how", ["torch.compile", "module.compile"])
def test_the_explorers_own_runs_leave_the_users_compiled_code_as_it_was(how, mode):
    x = torch.randn(2, 4)

    def session(explore_at: int | None, run: bool = False) -> tuple[tuple[int, int], tuple[int, int], str | None]:
        """The user's calls in two turns, the explorer used before the first (0) or the second (1): (graphs
        compiled and graph breaks in all, those of the last turn's calls, what first_nonfinite found)."""
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        net, model, prefix = compile_net(how)
        with torch.no_grad():
            net.fc2.weight[0, 0] = float("nan")
        found, last = None, (0, 0)
        for turn in range(2):
            if turn == explore_at:
                with Explorer(model, x) as ex:  # the shape probe runs the model
                    ex.attach(prefix + "fc1", "backward")  # checked for in-place collisions by a run
                    found = ex.first_nonfinite()
                    ex.graph()
                    if run:
                        ex.run()  # the model as compiled: the run itself may compile for its modes
                    ex.detach()
            last = compiled_so_far()
            user_calls(model, mode, x)
        total = compiled_so_far()
        return total, (total[0] - last[0], total[1] - last[1]), found

    alone, alone_last, _ = session(None)
    assert alone[0] >= 1  # the user's model really is compiled
    for explore_at in (0, 1):
        compiled, _, found = session(explore_at)
        assert found == ("_orig_mod.fc2" if how == "torch.compile" else "fc2")  # the explorer's name for it
        assert compiled == alone, f"explored at turn {explore_at}"
    _, last, _ = session(1, run=True)
    assert last == alone_last  # after ex.run() too, the user's next calls compile and break as before


def test_paths_inside_a_compile_wrapper_may_leave_out_its_orig_mod_step():
    _, compiled, prefix = compile_net("torch.compile")
    x = torch.randn(2, 4)
    with warnings.catch_warnings(record=True) as caught, Explorer(compiled, x) as ex:
        warnings.simplefilter("always")
        module_hook = ex.attach("fc2", "forward")
        param_hook = ex.attach("fc1.weight", "grad")
        assert (module_hook.target, param_hook.target) == (prefix + "fc2", prefix + "fc1.weight")
        assert not any("another path" in str(w.message) for w in caught)  # not an alias of a module named twice
        ex.run(x, target=0)
        assert ex.captures[prefix + "fc2"]["forward"][-1].tensor.shape == (2, 3)
        assert ex.captures[prefix + "fc1.weight"]["grad"][-1].tensor.shape == (4, 4)
        assert [info.target for info in ex.detach("fc2")] == [prefix + "fc2"]
        with pytest.raises(KeyError, match=r"'fc9' in OptimizedModule — did you mean '_orig_mod.fc\d'"):
            ex.attach("fc9", "forward")


def test_attention_attributions_and_the_lens_of_a_compiled_transformers_model_equal_the_uncompiled_ones():
    from tests import transformer_models as tm  # here: transformers is optional, and only this test needs it

    model, ids = tm.gpt2(layers=1), tm.token_ids(2, 6)
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        compiled(ids)  # the user's model has compiled
    torch._dynamo.utils.counters.clear()
    before = hook_state(compiled)
    with Explorer(compiled, ids) as ex:
        attention, lens = ex.attention(), ex.logit_lens(top_k=3)
        scores = ex.attribute(method="integrated_gradients", n_steps=4)
    if hasattr(torch.compiler, "set_stance"):  # the explorer's own runs ran eagerly: nothing compiled for them
        assert compiled_so_far() == (0, 0)
    assert hook_state(compiled) == before
    assert list(attention) == ["_orig_mod.transformer.h.0.attn"] and scores.layer == "_orig_mod.transformer.wte"
    assert lens["layers"] == ["_orig_mod.transformer.h.0", "output"]
    with Explorer(model, ids) as ex:
        assert torch.equal(next(iter(ex.attention().values())), attention["_orig_mod.transformer.h.0.attn"])
        assert torch.equal(ex.logit_lens(top_k=3)["ids"], lens["ids"])
        assert torch.equal(ex.attribute(method="integrated_gradients", n_steps=4), scores)
