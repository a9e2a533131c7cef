import copy
import gc
import threading
import warnings
import weakref
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import SharedBlock, TupleOut, hook_state


def test_forward_and_forward_pre_capture_the_module_tensors(cnn, image):
    with Explorer(cnn) as ex:
        ex.attach("features.conv", ["forward_pre", "forward"])
        out = ex.run(image)
        (pre,) = ex.captures["features.conv"]["forward_pre"]
        (fwd,) = ex.captures["features.conv"]["forward"]
    assert list(pre.tensors) == ["args.0"] and torch.equal(pre.tensor, image)
    assert list(fwd.tensors) == ["output"] and fwd.tensor.shape == (2, 4, 8, 8)
    assert (fwd.path, fwd.kind, fwd.step, fwd.call) == ("features.conv", "forward", 1, 0)
    assert not fwd.tensor.requires_grad and fwd.tensor.grad_fn is None  # detached
    assert fwd.nbytes == 2 * 4 * 8 * 8 * 4
    assert out.shape == (2, 5)


def test_grad_hook_records_the_gradient_of_the_output(cnn, image):
    cnn.eval()
    ex = Explorer(cnn)
    ex.attach("features.act", "grad")
    ex.attach("features.act", "forward")
    ex.run(image, target=[1, 3])
    (rec,) = ex.captures["features.act"]["grad"]
    act = ex.captures["features.act"]["forward"][0].tensor

    # independent computation with autograd.grad on the same forward
    captured = {}
    handle = cnn.features.act.register_forward_hook(lambda m, a, o: captured.setdefault("out", o))
    logits = cnn(image)
    handle.remove()
    expected = torch.autograd.grad(logits[0, 1] + logits[1, 3], captured["out"])[0]
    assert list(rec.tensors) == ["grad_output"]
    assert rec.step == 1 and rec.call == 0
    torch.testing.assert_close(rec.tensor, expected)
    torch.testing.assert_close(act, captured["out"].detach())
    ex.close()


def test_tuple_outputs_are_named_and_each_gets_a_grad_record():
    model = TupleOut()
    x = torch.randn(3, 2, requires_grad=True)
    with Explorer(model) as ex:
        ex.attach("split", ["forward", "grad"])
        ex.run(x, target=lambda out: out.sum())
        fwd = ex.captures["split"]["forward"][0]
        grads = ex.captures["split"]["grad"]
    assert list(fwd.tensors) == ["output.0", "output.1"]
    torch.testing.assert_close(fwd.tensors["output.1"], x.detach() + 1)
    names = sorted(name for rec in grads for name in rec.tensors)
    assert names == ["grad_output.0", "grad_output.1"]
    by_name = {name: t for rec in grads for name, t in rec.tensors.items()}
    torch.testing.assert_close(by_name["grad_output.0"], x.detach() + 1)  # d(a*b)/da = b
    torch.testing.assert_close(by_name["grad_output.1"], x.detach() * 2)


def test_a_module_called_twice_gets_call_indices_within_one_step():
    model = SharedBlock()
    with Explorer(model) as ex:
        ex.attach("lin", ["forward", "grad"])
        ex.run(torch.randn(2, 4), target=lambda out: out.sum())
        ex.run(torch.randn(2, 4))
        forwards = ex.captures["lin"]["forward"]
        grads = ex.captures["lin"]["grad"]
    assert [(r.step, r.call) for r in forwards] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert sorted((r.step, r.call) for r in grads) == [(1, 0), (1, 1)]


def test_close_puts_every_hook_dict_back_exactly_and_keeps_foreign_hooks(cnn, image):
    foreign = cnn.features.conv.register_forward_hook(lambda m, a, o: None)
    before = hook_state(cnn)
    ex = Explorer(cnn, example_inputs=image)
    ex.attach("features.conv", ["forward_pre", "forward", "grad"])
    ex.attach("", "forward")
    assert hook_state(cnn) != before
    ex.run(target=0)
    ex.close()
    assert hook_state(cnn) == before
    assert len(cnn.features.conv._forward_hooks) == 1
    ex.close()  # idempotent
    foreign.remove()


def test_attaching_the_same_target_and_kind_again_replaces_it(cnn, image):
    with Explorer(cnn) as ex:
        ex.attach("features.conv", "forward")
        ex.attach("features.conv", "forward")
        assert len(cnn.features.conv._forward_hooks) == 1
        assert [(h.target, h.kind) for h in ex.hooks] == [("features.conv", "forward")]
        ex.run(image)
        assert len(ex.captures["features.conv"]["forward"]) == 1


def test_detach_one_kind_then_all(cnn, image):
    before = hook_state(cnn)
    ex = Explorer(cnn)
    ex.attach("features.conv", ["forward", "grad"])
    ex.attach("head.fc", "forward")
    removed = ex.detach("features.conv", "forward")
    assert [(h.target, h.kind) for h in removed] == [("features.conv", "forward")]
    assert [(h.target, h.kind) for h in ex.hooks] == [("features.conv", "grad"), ("head.fc", "forward")]
    ex.detach()
    assert ex.hooks == []
    assert hook_state(cnn) == before


def test_detach_stops_grad_hooks_already_armed_on_live_tensors(cnn, image):
    ex = Explorer(cnn)
    ex.attach("features.conv", "grad")
    out = cnn(image)
    ex.detach("features.conv", "grad")
    out.sum().backward()
    assert "features.conv" not in ex.captures


def test_unknown_kind_action_and_path_name_the_fix(cnn):
    ex = Explorer(cnn)
    with pytest.raises(
        ValueError,
        match=r"hook kind 'forwards' is not valid for module 'features.conv' \(did you mean 'forward'\?\); valid kinds",
    ):
        ex.attach("features.conv", "forwards")
    with pytest.raises(ValueError, match="unknown action 'keep'"):
        ex.attach("features.conv", "forward", action="keep")
    with pytest.raises(KeyError, match="did you mean 'features.conv'"):
        ex.attach("features.cnov", "forward")
    with pytest.raises(KeyError, match="did you mean 'head.fc'"):
        ex.detach("head.fcc")


def test_grad_hook_explains_a_forward_under_no_grad(cnn, image):
    with Explorer(cnn) as ex:
        ex.attach("features.conv", "grad")
        with torch.no_grad():
            cnn(image)
        assert "torch.no_grad" in ex.hooks[0].note
        ex.run(image)
        assert ex.hooks[0].note is None


def test_capture_is_flagged_stale_after_an_in_place_change_unless_copied():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))
    x = torch.randn(8, 3)
    with Explorer(model) as ex:
        ex.attach("0", "forward")
        model(x)
        ref = ex.captures["0"]["forward"][-1]
        ex.attach("0", "forward", copy=True)
        model(x)
        copied = ex.captures["0"]["forward"][-1]
    assert ref.stale and ref.tensor.min() >= 0  # the in-place ReLU overwrote the reference
    assert not copied.stale and copied.tensor.min() < 0  # the clone kept the negatives


def test_steps_count_root_forwards_and_fired_counts_grow(cnn, image):
    with Explorer(cnn) as ex:
        ex.attach("features.conv", "forward")
        for _ in range(3):
            cnn(image)
        assert ex.step == 3
        assert ex.hooks[0].fired == 3
        assert [r.step for r in ex.captures["features.conv"]["forward"]] == [1, 2, 3]


def test_a_failing_user_hook_is_recorded_not_raised(cnn, image):
    def broken(module, args, output):
        raise RuntimeError("disk full")

    with Explorer(cnn) as ex:
        ex.attach("features.conv", "forward", action=broken)
        ex.attach("head.fc", "forward")
        with pytest.warns(UserWarning, match="hook 'forward' on 'features.conv' failed"):
            out = cnn(image)
        assert out.shape == (2, 5)
        assert "RuntimeError: disk full" in ex.hooks[0].last_error
        assert "disk full" in repr(ex.hooks[0])
        assert len(ex.captures["head.fc"]["forward"]) == 1  # the run went on
    with Explorer(cnn, on_error="raise") as ex:
        ex.attach("features.conv", "forward", action=broken)
        with pytest.raises(RuntimeError, match="disk full"):
            cnn(image)


def test_dropped_explorer_removes_its_hooks_and_frees_the_model(image):
    from tests.conftest import SmallCNN

    model = SmallCNN()
    before = hook_state(model)
    ex = Explorer(model, example_inputs=image)
    ex.attach("features.conv", ["forward", "grad"])
    model(image).sum().backward()
    model_ref = weakref.ref(model)
    del ex
    gc.collect()
    assert hook_state(model) == before
    del model
    gc.collect()
    assert model_ref() is None


def test_hooks_fired_from_worker_threads_are_all_recorded(cnn, image):
    cnn.eval()
    with Explorer(cnn, memory_budget=2**30) as ex:
        ex.attach("features.conv", ["forward", "grad"])

        def work():
            for _ in range(10):
                cnn(image).sum().backward()

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(ex.captures["features.conv"]["forward"]) == 40
        assert len(ex.captures["features.conv"]["grad"]) == 40


def test_foreign_hooks_are_listed_and_never_removed(cnn, image):
    def my_probe(module, args, output):
        return None

    theirs = [
        cnn.features.conv.register_forward_hook(my_probe),
        cnn.head.fc.weight.register_hook(lambda grad: None),
    ]
    with Explorer(cnn) as ex:
        ex.attach("features.conv", "forward")
        listed = [(h.target, h.kind, h.foreign) for h in ex.hooks]
        assert listed[0] == ("features.conv", "forward", False)
        assert ("features.conv", "forward", True) in listed
        assert ("head.fc.weight", "grad", True) in listed
        foreign = next(h for h in ex.hooks if h.foreign and h.kind == "forward")
        assert "my_probe" in repr(foreign) and "left alone" in repr(foreign)
        ex.detach()
        assert [(h.target, h.kind) for h in ex.hooks] == [("features.conv", "forward"), ("head.fc.weight", "grad")]
    assert my_probe in cnn.features.conv._forward_hooks.values()
    assert len(cnn.head.fc.weight._backward_hooks) == 1
    for handle in theirs:
        handle.remove()


def test_a_thousand_steps_stay_under_budget_with_the_newest_kept():
    model = nn.Sequential(nn.Linear(8, 8))
    x = torch.randn(4, 8)
    record_bytes = 4 * 8 * 4
    with Explorer(model, memory_budget=50 * record_bytes) as ex:
        ex.attach("0", "forward", copy=True)
        for _ in range(1000):
            model(x)
        history = ex.captures["0"]["forward"]
        assert ex.captures.nbytes <= ex.captures.memory_budget
        assert len(history) == 50 and history[-1].step == 1000 and history[0].step == 951
        assert ex.captures.evicted == 1000 - 50


def test_an_exception_inside_a_run_leaves_hooks_attached_and_close_restores(cnn, image):
    before = hook_state(cnn)
    ex = Explorer(cnn)
    ex.attach("features.conv", ["forward", "grad"])
    ex.attach("", "global_forward")
    with pytest.raises(RuntimeError):
        ex.run(torch.randn(2, 9, 8, 8), target=0)
    assert len(ex.hooks) == 3  # the user's hooks stay until detach() or close()
    assert ex.run(image, target=0).shape == (2, 5)
    ex.close()
    assert hook_state(cnn) == before


def test_the_model_is_freed_after_close_and_del():
    from tests.conftest import SmallCNN

    model = SmallCNN()
    ex = Explorer(model, example_inputs=torch.randn(1, 3, 8, 8))
    ex.attach("features.conv", ["forward", "backward", "grad"])
    ex.attach("head.fc.weight", "post_accumulate")
    ex.run(target=0)
    ref = weakref.ref(model)
    ex.close()
    del model
    gc.collect()
    assert ref() is None


class UnusedOutput(nn.Module):
    """A GRU whose sequence output is unused: with a full backward hook on the GRU, both outputs come
    from one autograd node, so the unused one's tensor hook gets a None gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(x)
        return self.fc(h[-1])


def hidden_grad(model: UnusedOutput, x: torch.Tensor) -> torch.Tensor:
    """d(logits[:, 0].sum())/dh by autograd.grad: the gradient a grad hook on the GRU sees for h."""
    kept = {}

    def keep(module: nn.Module, args: tuple, output: tuple) -> None:
        kept["h"] = output[1]

    handle = model.gru.register_forward_hook(keep)
    logits = model(x)
    handle.remove()
    return torch.autograd.grad(logits[:, 0].sum(), kept["h"])[0]


def first_class(logits: torch.Tensor) -> torch.Tensor:
    return logits[:, 0].sum()


@pytest.mark.parametrize("action", ["capture", "stats", "print"])
def test_grad_hooks_skip_the_none_gradient_of_an_unused_output(action, capsys):
    torch.manual_seed(0)
    model, x = UnusedOutput(), torch.randn(3, 7, 8)
    expected = hidden_grad(model, x)
    with Explorer(model) as ex:
        ex.attach("gru", ["backward", "grad"], action=action)
        ex.run(x, target=first_class)
        assert [(h.kind, h.fired, h.last_error) for h in ex.hooks] == [("backward", 1, None), ("grad", 2, None)]
        records = ex.captures["gru"]["grad"] if action != "print" else []
    if action == "capture":  # the None firing is a record without tensors, as a firing with none
        assert sorted(list(r.tensors) for r in records) == [[], ["grad_output.1"]]
        (real,) = [r for r in records if r.tensors]
        torch.testing.assert_close(real.tensor, expected)
        assert [r.tensor for r in records if not r.tensors] == [None]
    elif action == "stats":
        norms = sorted((r.stats["norm"] for r in records if r.stats is not None), key=float)
        assert norms == [pytest.approx(expected.norm().item(), rel=1e-5)]
        assert [r.stats for r in records].count(None) == 1
    else:
        lines = [line for line in capsys.readouterr().out.splitlines() if " gru grad " in line]
        assert sorted(line.split(": ", 1)[1].split(" (")[0] for line in lines) == [
            "grad_output.0 is None",
            "grad_output.1",
        ]


class Halves(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.split(2, dim=1)


class UsesFirstHalf(nn.Module):
    """Splits a Linear's output in two (one autograd node, two outputs) and uses the first half only."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.halves = Halves()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.halves(self.lin(x))[0].sum(dim=1)


def test_global_grad_skips_the_none_gradient_of_a_split_output_left_unused():
    model, x = UsesFirstHalf(), torch.randn(3, 4)
    with Explorer(model) as ex:
        ex.attach("", "global_grad")
        ex.run(x, target=lambda out: out.sum())
        assert ex.hooks[0].last_error is None
        halves = sorted(ex.captures["halves"]["global_grad"], key=lambda r: len(r.tensors))
        (lin,) = ex.captures["lin"]["global_grad"]
    assert [list(r.tensors) for r in halves] == [[], ["grad_output.0"]]
    torch.testing.assert_close(halves[1].tensor, torch.ones(3, 2))
    torch.testing.assert_close(lin.tensor, torch.tensor([[1.0, 1.0, 0.0, 0.0]] * 3))


@pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")
def test_an_edit_on_a_grad_hook_passes_a_none_gradient_through():
    torch.manual_seed(0)
    model, x = UnusedOutput(), torch.randn(3, 7, 8)
    plain = copy.deepcopy(model)
    first_class(plain(x)).backward()
    expected = hidden_grad(plain, x)
    with Explorer(model) as ex:
        ex.attach("gru", "backward_pre")
        ex.attach("gru", "grad", edit=("scale", 0.5))
        first_class(model(x)).backward()
        assert [h.last_error for h in ex.hooks] == [None, None]
        grads = sorted(ex.captures["gru"]["grad"], key=lambda r: len(r.tensors))
        (pre,) = ex.captures["gru"]["backward_pre"]
    assert [list(r.tensors) for r in grads] == [[], ["grad_output.1"]]
    torch.testing.assert_close(grads[1].tensor, 0.5 * expected)  # the edit is recorded
    assert list(pre.tensors) == ["grad_output.1"]  # grad_output.0 is None: left out
    # backward_pre fires first: torch wraps the output for it after the forward hook armed the grad hooks
    torch.testing.assert_close(pre.tensor, expected)
    # the scaled gradient of h is the only one reaching the GRU: its gradients halve, the head's stay
    torch.testing.assert_close(model.gru.weight_hh_l0.grad, 0.5 * plain.gru.weight_hh_l0.grad)
    torch.testing.assert_close(model.fc.weight.grad, plain.fc.weight.grad)


@pytest.mark.parametrize("action", ["capture", "print"])
def test_backward_hooks_with_a_none_grad_output_record_and_edit_the_others(action, capsys):
    torch.manual_seed(0)
    model, x = UnusedOutput(), torch.randn(3, 7, 8)
    xp, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    first_class(copy.deepcopy(model)(xp)).backward()
    with Explorer(model) as ex:
        ex.attach("gru", "backward_pre", action=action, edit=("scale", 0.5))
        ex.attach("gru", "backward", action=action)
        first_class(model(xe)).backward()
        assert [h.last_error for h in ex.hooks] == [None, None]
        captures = ex.captures["gru"] if action == "capture" else {}
    torch.testing.assert_close(xe.grad, 0.5 * xp.grad)  # the edit passed the None through and scaled h's
    if action == "capture":
        (pre,), (post,) = captures["backward_pre"], captures["backward"]
        assert list(pre.tensors) == ["grad_output.1"]
        assert list(post.tensors) == ["grad_output.1", "grad_input.0"]
        torch.testing.assert_close(post.tensors["grad_input.0"], xe.grad)
    else:
        out = capsys.readouterr().out
        assert "gru backward_pre call 0: grad_output.1 (1, 3, 16)" in out
        assert "grad_output.0" not in out


def test_captures_and_stats_under_inference_mode_are_kept_and_never_stale():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    x = torch.randn(2, 4)
    expected = model[0](x).detach()
    with Explorer(model) as ex:
        ex.attach("0", "forward")
        ex.attach("1", "forward", action="stats")
        with torch.inference_mode():
            ex.run(x)
        assert [h.last_error for h in ex.hooks] == [None, None]
        (rec,) = ex.captures["0"]["forward"]
        (stats,) = ex.captures["1"]["forward"]
    assert rec.tensor.is_inference() and not rec.stale
    torch.testing.assert_close(rec.tensor, expected)
    assert stats.stats["max"] == pytest.approx(expected.relu().max().item())
    assert stats.stats["zero_fraction"] == (expected <= 0).float().mean().item()


@dataclass
class Scores:
    """A dataclass output, as many libraries return."""

    logits: torch.Tensor
    label: str = "scores"


class ScoresHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> Scores:
        return Scores(self.fc(x))


class UsesScores(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = ScoresHead()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x).logits * 2


def test_tensors_in_dataclass_outputs_are_captured_named_and_get_grad_hooks():
    torch.manual_seed(0)
    model, x = ScoresHead(), torch.randn(2, 4)
    with Explorer(model) as ex:
        ex.attach("", ["forward", "grad"])
        ex.run(x, target=lambda out: out.logits[:, 1].sum())
        (fwd,), (grad,) = ex.captures[""]["forward"], ex.captures[""]["grad"]
        assert [(h.fired, h.note, h.last_error) for h in ex.hooks] == [(1, None, None), (1, None, None)]
    assert list(fwd.tensors) == ["output.logits"]
    torch.testing.assert_close(fwd.tensor, model.fc(x).detach())
    assert list(grad.tensors) == ["grad_output.logits"]
    torch.testing.assert_close(grad.tensor, torch.tensor([[0.0, 1.0, 0.0]] * 2))


def test_backward_pre_on_a_dataclass_output_falls_back_to_tensor_hooks():
    model, x = UsesScores(), torch.randn(2, 4)
    with Explorer(model) as ex:
        info = ex.attach("head", "backward_pre")
        ex.run(x, target=lambda out: out.sum())  # torch's warning about the output is left to the note
        assert "output is a dataclass (Scores)" in info.note
        (pre,) = ex.captures["head"]["backward_pre"]
    assert list(pre.tensors) == ["grad_output.logits"]
    torch.testing.assert_close(pre.tensor, torch.full((2, 3), 2.0))  # d(2 * logits).sum() / d logits


def test_an_edit_on_a_dataclass_output_rebuilds_it():
    torch.manual_seed(0)
    model, x = UsesScores(), torch.randn(2, 4)
    expected = model(x).detach()
    with Explorer(model) as ex:
        ex.attach("head", "forward", edit=("scale", 0.5))
        out = model(x)
        (fwd,) = ex.captures["head"]["forward"]
    torch.testing.assert_close(out, 0.5 * expected)
    torch.testing.assert_close(fwd.tensors["output.logits"], 0.25 * expected)


class TwoHeads(nn.Module):
    """Attention whose out_proj never runs as a module, and two heads of which the input picks one."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 3), "b": nn.Linear(8, 3)})

    def forward(self, x: torch.Tensor, head: str = "a") -> torch.Tensor:
        return self.heads[head](self.attn(x, x, x, need_weights=False)[0])


def test_module_hooks_on_a_module_the_example_forward_never_runs_say_why_until_it_runs():
    torch.manual_seed(0)
    model, x = TwoHeads(), torch.randn(2, 5, 8)
    with Explorer(model, example_inputs=(x,)) as ex:
        out_proj = ex.attach("attn.out_proj", "forward")
        head_b, head_a = ex.attach("heads.b", "forward"), ex.attach("heads.a", "forward")
        assert "'attn.out_proj' (NonDynamicallyQuantizableLinear) did not run in the example forward" in out_proj.note
        assert "as MultiheadAttention does with out_proj" in out_proj.note and "kind 'grad'" in out_proj.note
        assert "did not run in the example forward" in head_b.note and head_a.note is None
        assert ex.attach("attn.out_proj.weight", "grad").note is None  # the advice: its parameters do get gradients
        ex.run((x, "b"))
        assert head_b.fired == 1 and head_b.note is None  # it ran after all: the note goes
        assert out_proj.fired == 0 and "did not run" in out_proj.note
    with Explorer(model) as ex:  # without example inputs nothing is known, so nothing is said
        assert ex.attach("attn.out_proj", "forward").note is None


@pytest.mark.parametrize("kind", ["backward_pre", "backward", "legacy_backward"])
@pytest.mark.parametrize("how", ["detach", "close"])
def test_a_backward_hook_removed_between_forward_and_backward_neither_records_nor_edits(kind, how):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    model(x).sum().backward()
    reference = model[0].weight.grad.clone()
    model.zero_grad(set_to_none=True)
    ex = Explorer(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy hook's deprecation
        info = ex.attach("1", kind, edit=None if kind == "legacy_backward" else ("scale", 100.0))
        loss = model(x).sum()  # torch hands this forward's backward hooks to its graph
        ex.detach() if how == "detach" else ex.close()
        loss.backward()
    assert torch.allclose(model[0].weight.grad, reference)  # no edit
    assert info.fired == 0 and not ex.captures.snapshot()[0]  # no firing, no record
    ex.close()
