"""Every hook kind against a hand-written torch hook on the same model, value by value."""

import copy
import warnings

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import GLOBAL_DICTS, hook_state


def global_state():
    state = {name: list(getattr(module_globals, name, {}).items()) for name in GLOBAL_DICTS}
    state["_global_is_full_backward_hook"] = module_globals._global_is_full_backward_hook
    return state


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))


@pytest.fixture
def x():
    return torch.randn(6, 4, generator=torch.Generator().manual_seed(2), requires_grad=True)


def by_hand(model, x, register):
    """Run forward+backward with a hand-written hook; returns what it saw."""
    seen = {}
    handle = register(seen)
    model(x).sum().backward()
    handle.remove()
    model.zero_grad(set_to_none=True)
    x.grad = None
    return seen


def test_backward_pre_matches_a_hand_written_hook(mlp, x):
    expected = by_hand(mlp, x, lambda s: mlp[2].register_full_backward_pre_hook(lambda m, go: s.update(go=go[0])))
    with Explorer(mlp) as ex:
        ex.attach("2", "backward_pre")
        ex.run(x, target=lambda out: out.sum())
        (rec,) = ex.captures["2"]["backward_pre"]
    assert list(rec.tensors) == ["grad_output.0"]
    torch.testing.assert_close(rec.tensor, expected["go"])


def test_backward_matches_a_hand_written_hook(mlp, x):
    expected = by_hand(
        mlp, x, lambda s: mlp[2].register_full_backward_hook(lambda m, gi, go: s.update(gi=gi[0], go=go[0]))
    )
    with Explorer(mlp) as ex:
        ex.attach("2", "backward")
        ex.run(x, target=lambda out: out.sum())
        (rec,) = ex.captures["2"]["backward"]
    assert list(rec.tensors) == ["grad_output.0", "grad_input.0"]
    torch.testing.assert_close(rec.tensors["grad_input.0"], expected["gi"])
    torch.testing.assert_close(rec.tensor, expected["go"])


def test_global_forward_fires_for_every_module_of_this_model_only(mlp, x):
    expected = {}
    handles = [m.register_forward_hook(lambda m, a, o, p=p: expected.setdefault(p, o)) for p, m in mlp.named_modules()]
    mlp(x)
    for h in handles:
        h.remove()
    other = nn.Sequential(nn.Linear(4, 4))
    with Explorer(mlp) as ex:
        ex.attach("", "global_forward")
        ex.run(x)
        other(torch.randn(2, 4))
        assert sorted(ex.captures) == ["", "0", "1", "2"]
        for path, out in expected.items():
            (rec,) = ex.captures[path]["global_forward"]
            torch.testing.assert_close(rec.tensor, out.detach())


def test_global_backward_kinds_match_hand_written_hooks(mlp, x):
    expected = by_hand(mlp, x, lambda s: mlp[0].register_full_backward_hook(lambda m, gi, go: s.update(gi=gi[0])))
    before = global_state()
    with Explorer(mlp) as ex:
        ex.attach("", ["global_backward_pre", "global_backward"])
        ex.run(x, target=lambda out: out.sum())
        rec = ex.captures["0"]["global_backward"][0]
        assert len(ex.captures["2"]["global_backward_pre"]) == 1
    torch.testing.assert_close(rec.tensors["grad_input.0"], expected["gi"])
    assert global_state() == before


def test_parameter_grad_and_post_accumulate_see_the_final_gradient(mlp, x):
    with Explorer(mlp) as ex:
        ex.attach("0.weight", ["grad", "post_accumulate"])
        mlp(x).sum().backward()
        grad = ex.captures["0.weight"]["grad"][0].tensor
        post = ex.captures["0.weight"]["post_accumulate"][0].tensor
    torch.testing.assert_close(grad, mlp[0].weight.grad)
    torch.testing.assert_close(post, mlp[0].weight.grad)


def test_legacy_backward_warns_and_close_lifts_its_sticky_flag(mlp, x):
    before = hook_state(mlp)
    with Explorer(mlp) as ex:
        ex.attach("2", "legacy_backward")
        with pytest.warns(FutureWarning, match="non-full backward hook"):
            ex.run(x, target=lambda out: out.sum())
        shapes = sorted(tuple(t.shape) for t in ex.captures["2"]["legacy_backward"][0].tensors.values())
    assert (3,) in shapes  # the legacy hook sees AddmmBackward0's inputs, the bias among them
    assert hook_state(mlp) == before
    with Explorer(mlp) as ex:
        ex.attach("2", "backward")  # torch would refuse this had the legacy flag stayed set


def test_stats_action_keeps_numbers_not_tensors(mlp, x):
    with Explorer(mlp) as ex:
        ex.attach("1", "forward", action="stats")
        out = ex.run(x)
        (rec,) = ex.captures["1"]["forward"]
    act = torch.tanh(mlp[0](x)).detach()
    assert rec.tensors == {} and rec.nbytes == 0
    assert rec.stats["max"] == pytest.approx(act.max().item())
    assert rec.stats["mean"] == pytest.approx(act.mean().item(), abs=1e-6)
    assert out.shape == (6, 3)


def test_print_action_writes_one_line(mlp, x, capsys):
    with Explorer(mlp) as ex:
        ex.attach("0", "forward", action="print")
        ex.run(x)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("[step 1] 0 forward call 0: output (6, 5) float32 mean=")


def test_a_user_callable_return_value_is_honoured_as_torch_would(mlp, x):
    with Explorer(mlp) as ex:
        ex.attach("2", "forward", action=lambda m, args, out: out * 0 + 7)
        assert torch.all(ex.run(x) == 7)


def test_callable_of_the_wrong_arity_is_refused_at_attach_time(mlp):
    with Explorer(mlp) as ex, pytest.raises(TypeError, match=r"torch calls it as hook\(module, args, output\)"):
        ex.attach("2", "forward", action=lambda grad: None)


def test_edits_change_the_gradient_that_flows_on(mlp, x):
    plain = by_hand(mlp, x, lambda s: mlp[0].weight.register_hook(lambda g: s.update(g=g)))
    with Explorer(mlp) as ex:
        ex.attach("1", "grad", edit=("scale", 2.0))
        mlp(x).sum().backward()
        edited = mlp[0].weight.grad.clone()
        captured = ex.captures["1"]["grad"][0].tensor
    torch.testing.assert_close(edited, 2 * plain["g"])
    assert captured.abs().sum() > 0
    with Explorer(mlp) as ex:
        ex.attach("1", "forward", edit=("zero",))
        assert torch.allclose(ex.run(x), mlp[2].bias.expand(6, 3))


def test_kind_invalid_for_the_target_lists_the_valid_kinds(mlp):
    with Explorer(mlp) as ex:
        with pytest.raises(
            ValueError, match=r"'post_accumulate' is not valid for module '0'.*valid kinds there: forward_pre"
        ):
            ex.attach("0", "post_accumulate")
        with pytest.raises(ValueError, match="attach them to path ''"):
            ex.attach("0", "global_forward")
        with pytest.raises(ValueError, match="valid kinds there: grad, post_accumulate"):
            ex.attach("0.weight", "forward")
        with pytest.raises(ValueError, match="did you mean 'backward'"):
            ex.attach("0", "bakward")
        with pytest.raises(KeyError, match="did you mean '0.weight'"):
            ex.attach("0.weigth", "grad")


def test_detaching_an_unknown_kind_names_the_closest_one(mlp):
    with Explorer(mlp) as ex:
        ex.attach("0", "forward")
        with pytest.raises(ValueError, match=r"unknown hook kind 'forwad' \(did you mean 'forward'\?\); kinds are"):
            ex.detach("0", "forwad")
        assert [h.kind for h in ex.hooks] == ["forward"]  # nothing was removed
        assert ex.detach("0", "backward") == []  # a real kind that is not attached: nothing to remove, no error
        assert [h.kind for h in ex.detach("0", "forward")] == ["forward"]


@pytest.mark.parametrize("kind", ["grad", "post_accumulate"])
def test_a_gradient_hook_on_a_frozen_parameter_says_how_to_unfreeze_it(mlp, kind):
    mlp[0].bias.requires_grad_(False)
    with Explorer(mlp) as ex:
        with pytest.raises(
            ValueError, match=r"parameter '0.bias' does not require grad \(frozen\).*requires_grad_\(\)"
        ):
            ex.attach("0.bias", kind)
        assert ex.hooks == []
    mlp[0].bias.requires_grad_(True)
    with Explorer(mlp) as ex:
        assert ex.attach("0.bias", kind).kind == kind  # trainable again: the same call works


def test_timeline_orders_forward_then_backward_firings(mlp, x):
    with Explorer(mlp) as ex:
        ex.attach("0", ["forward", "backward"])
        ex.attach("2", ["forward", "backward"])
        ex.run(x, target=lambda out: out.sum())
        events = [(e.step, e.phase, e.path, e.kind) for e in ex.timeline]
    assert events == [
        (1, "forward", "0", "forward"),
        (1, "forward", "2", "forward"),
        (1, "backward", "2", "backward"),
        (1, "backward", "0", "backward"),
    ]
    assert [e.target for e in ex.timeline] == ["0", "2", "2", "0"]  # attach()'s name for the place, as HookInfo.target


def test_keyboard_interrupt_in_a_hook_propagates_and_close_still_restores(mlp, x):
    before, globals_before = hook_state(mlp), global_state()

    def interrupt(module, args, output):
        raise KeyboardInterrupt

    ex = Explorer(mlp)
    ex.attach("1", "forward", action=interrupt)
    ex.attach("", "global_backward")
    with pytest.raises(KeyboardInterrupt):
        ex.run(x)
    ex.close()
    assert hook_state(mlp) == before and global_state() == globals_before


def test_post_accumulate_records_keep_each_steps_gradient(mlp, x):
    with Explorer(mlp) as ex:
        ex.attach("0.bias", "post_accumulate")
        mlp(x).sum().backward()
        first = mlp[0].bias.grad.clone()
        mlp(x).sum().backward()  # accumulates into the same .grad tensor in place
        records = ex.captures["0.bias"]["post_accumulate"]
    torch.testing.assert_close(records[0].tensor, first)
    torch.testing.assert_close(records[1].tensor, 2 * first)
    assert not records[0].stale


def test_an_edit_that_torch_must_ignore_says_so(mlp):
    with Explorer(mlp) as ex:
        info = ex.attach("0", "backward", edit=("zero",))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch: no inputs require gradients
            ex.run(torch.randn(2, 4), target=lambda out: out.sum())
    assert "the edit had no effect" in info.note


def test_with_kwargs_hooks_see_keyword_arguments_and_edits_keep_them():
    class Scaled(nn.Module):
        def forward(self, x, *, scale):
            return x * scale

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Scaled()

        def forward(self, x):
            return self.inner(x, scale=torch.tensor(3.0))

    outer = Outer()
    x = torch.ones(2, 2)
    with Explorer(outer) as ex:
        ex.attach("inner", "forward_pre", with_kwargs=True, edit=("scale", 2.0))
        ex.attach("inner", "forward", with_kwargs=True)
        out = ex.run(x)
        (pre,) = ex.captures["inner"]["forward_pre"]
        (fwd,) = ex.captures["inner"]["forward"]
    assert list(pre.tensors) == ["args.0", "kwargs.scale"]
    torch.testing.assert_close(pre.tensors["args.0"], 2 * x)  # the edit was applied, kwargs kept
    torch.testing.assert_close(out, 6 * x)
    torch.testing.assert_close(fwd.tensor, 6 * x)


def test_first_layer_backward_hook_explains_its_none_grad_input(mlp):
    with Explorer(mlp) as ex:
        info = ex.attach("0", "backward")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the explorer's own run does not repeat torch's warning
            ex.run(torch.randn(2, 4), target=lambda out: out.sum())
        (rec,) = ex.captures["0"]["backward"]
    assert list(rec.tensors) == ["grad_output.0"]
    assert "grad_input of '0' is all None" in info.note


def test_global_grad_records_every_modules_output_gradient_even_past_in_place_ops():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Sequential(nn.Linear(4, 2)))
    x = torch.randn(3, 4)
    expected = {}

    def keep(path):
        def hook(module, args, output):
            output.register_hook(lambda grad: expected.setdefault(path, grad))

        return hook

    handles = [m.register_forward_hook(keep(p)) for p, m in model.named_modules()]
    model(x).pow(2).sum().backward()
    for handle in handles:
        handle.remove()
    with Explorer(model) as ex:
        ex.attach("", "global_grad")  # global_backward would collide with the in-place ReLU here
        ex.attach("", "global_forward", action="stats")
        model(x).pow(2).sum().backward()
        for path, grad in expected.items():
            (record,) = ex.captures[path]["global_grad"]
            assert list(record.tensors) == ["grad_output"] and torch.equal(record.tensor, grad), path
        source = ex.code()
        assert "not generated" not in source and "register_forward_hook(hook_1, prepend=True)" in source


def test_global_grad_stats_fill_the_gradient_columns_of_the_summary():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2))
    with Explorer(model) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        model(torch.randn(3, 4)).sum().backward()
        rows = {row["path"]: row for row in ex.summary()}
        assert set(rows) == {"", "0", "1", "2"}
        assert all(row["grad_norm"] > 0 and row["act_norm"] > 0 for row in rows.values())


ALL_GLOBAL = ["global_forward_pre", "global_forward", "global_backward_pre", "global_backward", "global_grad"]


class InPlaceAttention(nn.Module):
    """A Linear, a ReLU on its output (in place by default), and self-attention whose weights the score does not use."""

    def __init__(self, inplace: bool = True) -> None:
        super().__init__()
        self.fc, self.act = nn.Linear(4, 4), nn.ReLU(inplace=inplace)
        self.attn = nn.MultiheadAttention(4, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.act(self.fc(x))
        return self.attn(h, h, h)


@pytest.mark.parametrize("inplace", [True, False])
def test_global_kinds_leave_other_models_as_without_the_explorer(mlp, x, inplace):
    torch.manual_seed(1)
    other = InPlaceAttention(inplace)
    twin = copy.deepcopy(other)
    inputs = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(3))

    def step(model: nn.Module) -> tuple[torch.Tensor, list]:
        fired = []
        out, weights = model(inputs)  # the in-place ReLU broke this forward while a global backward hook was on
        weights.register_hook(fired.append)  # unused by the score: gets no gradient (it got one, a wrapped output)
        out.pow(2).sum().backward()
        return out.detach(), fired

    expected, _ = step(twin)
    before, globals_before = hook_state(other), global_state()
    with Explorer(mlp) as ex:
        ex.attach("", ALL_GLOBAL)
        ex.run(x, target=lambda out: out.sum())
        out, fired = step(other)
        assert fired == []
        assert hook_state(other) == before and global_state() == globals_before
        assert all(path in ex.captures for path in ("", "0", "1", "2"))
        assert not any(path.startswith(("fc", "act", "attn")) for path in ex.captures)
    torch.testing.assert_close(out, expected)
    for (name, p), q in zip(other.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_global_kinds_cover_modules_added_after_attach_from_the_next_step_and_leave_those_removed(x):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    extra, fresh = nn.Linear(4, 2), hook_state(nn.Tanh())
    with Explorer(model) as ex:
        ex.attach("", ["global_forward", "global_backward"])
        model(x).sum().backward()
        model.append(extra)  # not called in this step
        model(x).sum().backward()
        assert [(r.step, r.call) for r in ex.captures["2"]["global_forward"]] == [(2, 0)]
        assert [r.step for r in ex.captures["2"]["global_backward"]] == [2]
        tanh = model[1]
        del model[1]  # the appended Linear is "1" from now on
        model(x).sum().backward()
        assert hook_state(tanh) == fresh  # its hooks went at the step's begin, and the flag they set
        assert [r.step for r in ex.captures["1"]["global_forward"]] == [1, 2, 3]
        torch.testing.assert_close(ex.captures["1"]["global_forward"][-1].tensor, model(x).detach())
        assert len(ex.captures["2"]["global_forward"]) == 1
    assert hook_state(model) == hook_state(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)))  # no hooks, no flags


def test_a_global_kind_attached_after_a_module_was_added_leaves_none_of_them_behind(mlp, x):
    with Explorer(mlp) as ex:
        ex.attach("", "global_forward")
        mlp(x)
        mlp.append(nn.Tanh())  # added between steps, and before the next kind is attached
        ex.attach("", "global_forward_pre")
        mlp(x)
        assert [r.step for r in ex.captures["3"]["global_forward"]] == [2]
        assert [r.step for r in ex.captures["3"]["global_forward_pre"]] == [2]


class Wide(nn.Tanh):
    """A Tanh too big for Python's small-object allocator: malloc hands a freed one's memory to the next one made."""

    __slots__ = tuple(f"slot{i}" for i in range(80))


def test_a_module_that_took_the_id_of_a_collected_one_gets_the_global_kinds(x):
    model = nn.Sequential(nn.Linear(4, 4), Wide(), nn.Linear(4, 2))
    with Explorer(model) as ex:
        ex.attach("", "global_forward")
        model(x)
        hooked = id(model[1])
        model[1] = nn.Identity()  # the hooked module is collected now
        others = []  # kept alive, so each try is a fresh address
        while id(new := Wide()) != hooked and len(others) < 100:
            others.append(new)
        assert id(new) == hooked, "no new module took the collected one's memory"
        model[1] = new  # a new module at the address of a hooked one: no hook of ours is on it
        model(x)
        assert [r.step for r in ex.captures["1"]["global_forward"]] == [1, 2]


def test_a_step_that_adds_no_module_places_no_hook_again(mlp, x):
    with Explorer(mlp) as ex:
        ex.attach("", ALL_GLOBAL)
        mlp(x).sum().backward()
        placed = hook_state(mlp)
        mlp(x).sum().backward()
        assert hook_state(mlp) == placed


def test_global_backward_skips_a_module_with_a_legacy_hook_and_says_so(mlp, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        theirs = mlp[2].register_backward_hook(lambda *args: None)
    with Explorer(mlp) as ex:
        info = ex.attach("", "global_backward")
        assert "not on 1 module(s)" in info.note and "'2': it has a legacy backward hook" in info.note
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            ex.run(x, target=lambda out: out.sum())
        assert sorted(path for path in ex.captures) == ["", "0", "1"]
    assert list(mlp[2]._backward_hooks) == [theirs.id] and mlp[2]._is_full_backward_hook is False


def test_a_legacy_backward_hook_beside_global_backward_is_refused_naming_both(mlp):
    with Explorer(mlp) as ex:
        ex.attach("", "global_backward")
        with pytest.raises(ValueError, match=r"module '2' has a full backward hook \(kind 'backward' or 'global_b"):
            ex.attach("2", "legacy_backward")
        assert [h.kind for h in ex.hooks] == ["global_backward"]


def test_global_kinds_run_before_the_modules_own_hooks(mlp, x):
    order = []
    mlp[0].register_forward_pre_hook(lambda m, a: order.append("own forward_pre"))
    mlp[0].register_forward_hook(lambda m, a, o: order.append("own forward"))
    mlp[0].register_full_backward_pre_hook(lambda m, g: order.append("own backward_pre"))
    mlp[0].register_full_backward_hook(lambda m, gi, go: order.append("own backward"))

    def note(kind):
        def hook(module, *args):
            if module is mlp[0]:
                order.append(kind)

        return hook

    with Explorer(mlp) as ex:
        ex.attach("0", "forward", action=lambda m, a, o: order.append("explorer forward"))
        for kind in ALL_GLOBAL[:4]:
            ex.attach("", kind, action=note(kind))
        mlp(x).sum().backward()
    assert order == [
        "global_forward_pre",
        "own forward_pre",
        "global_forward",
        "own forward",
        "explorer forward",
        "global_backward_pre",
        "own backward_pre",
        "global_backward",
        "own backward",
    ]
