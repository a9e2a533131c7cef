"""hook_code: the generated plain-torch code records what the explorer records, on a copy of the model."""

import copy
import functools
import math
import warnings

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn

from hookwidgets.core import Explorer, HookInfo
from hookwidgets.core.codegen.generate import hook_code
from hookwidgets.core.hooks.tensor_edits import apply_edits
from tests.conftest import GLOBAL_DICTS, HOOK_DICTS, TupleOut
from tests.unit.core.graph.test_scoping import CASES as SCOPING_CASES
from tests.unit.core.graph.test_scoping import Outer
from tests.unit.core.hooks.test_hooks import Scores, ScoresHead, UnusedOutput
from tests.unit.core.hooks.test_notes import UsesDataclass, UsesDict

# The first conv's input needs no grad, which torch mentions for every full backward hook there.
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")


def hook_dicts(model: nn.Module) -> dict:
    """Every module's and parameter's hook dicts, and the global ones (not the private backward flags)."""
    state = {(path, name): list(getattr(m, name).items()) for path, m in model.named_modules() for name in HOOK_DICTS}
    for name, p in model.named_parameters():
        state[(name, "tensor")] = list((p._backward_hooks or {}).items())
        state[(name, "post")] = list((p._post_accumulate_grad_hooks or {}).items())
    state.update({name: list(getattr(module_globals, name, {}).items()) for name in GLOBAL_DICTS})
    return state


@pytest.fixture
def generated():
    """exec(hook_code(...)) with ``model`` bound; removes the generated hooks and global flag afterwards."""
    namespaces = []
    global_flag = module_globals._global_is_full_backward_hook

    def run(source: str, model: nn.Module) -> dict:
        namespace = {"torch": torch, "model": model}
        namespaces.append(namespace)
        exec(compile(source, "<hook_code>", "exec"), namespace)
        return namespace

    yield run
    for namespace in namespaces:
        for handle in namespace.get("handles", []):
            handle.remove()
    module_globals._global_is_full_backward_hook = global_flag


class Net(nn.Module):
    """Conv, BatchNorm (train mode), ReLU and a Linear head; the first conv's input needs no grad."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU()
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv2(self.act(self.bn(self.conv(x)))).flatten(1))


def forward_backward(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x)
    out[:, 3].sum().backward()
    return out.detach()


def twin_run(model: nn.Module, attach, x: torch.Tensor, generated, steps: int = 2):
    """Attach with an explorer on ``model`` and the generated code on a copy; run both ``steps`` times."""
    twin = copy.deepcopy(model)
    ex = Explorer(model)
    attach(ex)
    namespace = generated(hook_code(ex.hooks), twin)
    for _ in range(steps):
        expected, got = forward_backward(model, x), forward_backward(twin, x)
        assert torch.equal(expected, got)
    return ex, namespace, twin


def assert_same_records(ex: Explorer, captures: dict, target: str, kind: str) -> None:
    records = ex.captures[target][kind]
    mine = captures[(target, kind)]
    assert len(mine) == len(records) > 0
    for record, entry in zip(records, mine, strict=True):
        if record.stats is not None:
            assert entry.keys() == record.stats.keys()
            for key, value in record.stats.items():
                assert entry[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), key
        else:
            assert list(entry) == list(record.tensors)
            for name, t in record.tensors.items():
                assert torch.equal(entry[name], t), name
                assert not entry[name].requires_grad


@pytest.fixture
def net() -> Net:
    torch.manual_seed(0)
    return Net()


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(1))


def test_module_kinds_capture_the_same_tensors(net, x, generated):
    def attach(ex):
        ex.attach("conv", ["forward_pre", "forward", "backward", "backward_pre", "grad"])
        ex.attach("bn", ["backward", "backward_pre"])
        ex.attach("fc", ["forward_pre", "forward", "backward"])
        ex.attach("act", "grad", copy=True)

    ex, ns, _ = twin_run(net, attach, x, generated)
    pairs = [(h.target, h.kind) for h in ex.hooks]
    assert len(pairs) == 11
    for target, kind in pairs:
        assert_same_records(ex, ns["captures"], target, kind)
    # the first conv's input needs no grad: only output-side gradients are recorded
    assert list(ns["captures"][("conv", "backward")][0]) == ["grad_output.0"]
    assert list(ns["captures"][("bn", "backward")][0]) == ["grad_output.0", "grad_input.0"]
    ex.close()


def test_parameter_kinds_capture_the_same_gradients(net, x, generated):
    def attach(ex):
        ex.attach("fc.weight", "grad")
        ex.attach("conv.bias", ["grad", "post_accumulate"])

    ex, ns, twin = twin_run(net, attach, x, generated, steps=1)
    for target, kind in [("fc.weight", "grad"), ("conv.bias", "grad"), ("conv.bias", "post_accumulate")]:
        assert_same_records(ex, ns["captures"], target, kind)
    assert torch.equal(ns["captures"][("conv.bias", "post_accumulate")][0]["grad"], twin.conv.bias.grad)
    ex.close()


def test_global_forward_and_backward_cover_the_models_modules_only(net, x, generated):
    other = nn.Sequential(nn.Linear(2, 2), nn.ReLU(inplace=True))  # a process-wide backward hook breaks its forward
    globals_before = [list(getattr(module_globals, name, {}).items()) for name in GLOBAL_DICTS]

    def attach(ex):
        ex.attach("", ["global_forward_pre", "global_forward", "global_backward_pre", "global_backward"])

    ex, ns, _ = twin_run(net, attach, x, generated, steps=1)
    other(torch.randn(1, 2, requires_grad=True)).sum().backward()
    assert [list(getattr(module_globals, name, {}).items()) for name in GLOBAL_DICTS] == globals_before
    assert module_globals._global_is_full_backward_hook is None
    assert {t for t, _ in ns["captures"]} == {"", "act", "bn", "conv", "conv2", "fc"}
    for kind in ("global_forward_pre", "global_forward", "global_backward_pre", "global_backward"):
        paths = sorted({t for t, k in ns["captures"] if k == kind})
        assert paths == sorted(t for t in ex.captures if kind in ex.captures[t])
        for path in paths:
            assert_same_records(ex, ns["captures"], path, kind)
    assert sorted(t for t, k in ns["captures"] if k == "global_forward") == ["", "act", "bn", "conv", "conv2", "fc"]
    ex.close()


def test_global_grad_arms_tensor_hooks_on_the_models_outputs_only(net, x, generated):
    other = nn.Linear(2, 2)

    def attach(ex):
        ex.attach("", "global_grad")

    ex, ns, _ = twin_run(net, attach, x, generated, steps=2)
    other(torch.randn(1, 2, requires_grad=True)).sum().backward()  # another model's outputs are not armed
    paths = sorted({t for t, k in ns["captures"] if k == "global_grad"})
    assert paths == sorted(t for t in ex.captures if "global_grad" in ex.captures[t])
    assert paths == ["", "act", "bn", "conv", "conv2", "fc"]
    for path in paths:
        assert_same_records(ex, ns["captures"], path, "global_grad")
    ex.close()


def test_global_grad_stats_and_edits_match_the_engine(net, x, generated):
    def attach(ex):
        ex.attach("", "global_grad", action="stats", edit=("scale", 0.5))

    ex, ns, twin = twin_run(net, attach, x, generated, steps=1)
    for path in ("conv", "act", "fc"):
        assert_same_records(ex, ns["captures"], path, "global_grad")
    torch.testing.assert_close(twin.conv.weight.grad, net.conv.weight.grad)
    ex.close()


def test_accumulate_grad_node_hooks_follow_every_forward_like_the_engine(net, x, generated):
    def attach(ex):
        ex.attach("fc/AccumulateGrad#weight", "node_pre")
        ex.attach("conv/AccumulateGrad#bias", "node", action="stats")

    ex, ns, _ = twin_run(net, attach, x, generated, steps=2)
    assert_same_records(ex, ns["captures"], "fc/AccumulateGrad#weight", "node_pre")
    assert_same_records(ex, ns["captures"], "conv/AccumulateGrad#bias", "node")
    assert len(ns["captures"][("fc/AccumulateGrad#weight", "node_pre")]) == 2  # one per backward
    assert len(ns["kept"]) == 2
    ex.close()


class Block(nn.Module):
    """A residual block: its own add, a Linear and an in-place-free ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin(x) + x)


class Twice(nn.Module):
    """Calls ``b1`` twice (its nodes get ordinals 0 and 1) and makes ops of its own (root scope)."""

    def __init__(self) -> None:
        super().__init__()
        self.b1, self.b2, self.fc = Block(), Block(), nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.b1(x) * 2
        return self.fc(self.b2(self.b1(h))).softmax(-1)


def test_op_node_hooks_are_placed_on_every_forward_like_the_engine(generated):
    torch.manual_seed(0)
    model, x = Twice(), torch.randn(5, 4)
    plain = copy.deepcopy(model)

    def attach(ex):
        ex.attach("b1/AddBackward0#1", "node_pre")  # the residual add of b1's second call
        ex.attach("/MulBackward0#0", "node", action="stats")  # an op of the model's own forward
        ex.attach("fc/AddmmBackward0#0", ["node_pre", "node"], edit=("scale", 0.5))  # two hooks on one node
        ex.attach("b2", "backward")  # its BackwardHookFunction nodes must not shift the ordinals

    ex, ns, twin = twin_run(model, attach, x, generated, steps=2)
    assert 'node_hooks.append(("b1", "AddBackward0", 1, "register_prehook", hook_1))' in ex.code()
    for target, kind in [("b1/AddBackward0#1", "node_pre"), ("/MulBackward0#0", "node"), ("b2", "backward")]:
        assert_same_records(ex, ns["captures"], target, kind)
    assert_same_records(ex, ns["captures"], "fc/AddmmBackward0#0", "node")
    assert len(ns["captures"][("b1/AddBackward0#1", "node_pre")]) == 2  # one per backward, on a new graph each
    forward_backward(plain, x)
    forward_backward(plain, x)
    # both edits scale the gradient through fc's addmm by 0.5: upstream gradients are a quarter of plain ones
    torch.testing.assert_close(twin.b1.lin.weight.grad, 0.25 * plain.b1.lin.weight.grad)
    torch.testing.assert_close(twin.b1.lin.weight.grad, model.b1.lin.weight.grad)
    ex.close()


def test_op_node_hook_code_warns_when_the_address_is_not_in_the_graph_and_removes_cleanly(generated):
    model, x = Twice(), torch.randn(5, 4)
    before = hook_dicts(model)
    ns = generated(hook_code([HookInfo("b2/AddBackward0#3", "node_pre")]), model)
    with pytest.warns(UserWarning, match=r"node b2/AddBackward0#3 is not in this forward's graph"):
        model(x).sum().backward()
    assert not ns["captures"]
    for handle in ns["handles"]:
        handle.remove()
    assert hook_dicts(model) == before


def test_stats_action_gives_the_same_statistics(net, x, generated):
    def attach(ex):
        ex.attach("bn", ["forward", "backward"], action="stats")
        ex.attach("act", ["forward", "grad"], action="stats")  # ReLU output: a zero fraction above 0
        ex.attach("fc.weight", "post_accumulate", action="stats")
        ex.attach("", "global_forward", action="stats")

    ex, ns, _ = twin_run(net, attach, x, generated)
    for target, kind in [("bn", "forward"), ("bn", "backward"), ("act", "forward"), ("act", "grad")]:
        assert_same_records(ex, ns["captures"], target, kind)
    assert_same_records(ex, ns["captures"], "fc.weight", "post_accumulate")
    assert_same_records(ex, ns["captures"], "conv2", "global_forward")
    assert 0 < ns["captures"][("act", "forward")][0]["zero_fraction"] < 1
    ex.close()


def test_stats_helper_counts_nan_and_inf_like_the_engine(generated):
    from hookwidgets.core.capture.stats import tensor_stats

    ns = generated(hook_code([HookInfo("", "forward", "stats")]), nn.Identity())
    for t in [
        torch.tensor([1.0, float("nan"), -float("inf"), 0.0, 3.0]),
        torch.tensor([float("nan")]),
        torch.zeros(0),
        torch.full((5,), 2.0, dtype=torch.float64),
        torch.tensor([1 + 1j, 3 - 4j]),
        torch.tensor([3e20, -1e20, float("inf"), 0.0]),  # finite squares overflow float32
        torch.tensor([3e38, 3e38]),  # so does their sum
        torch.tensor([1e300, -2e300], dtype=torch.float64),
    ]:
        mine, engine = ns["_stats"](t), tensor_stats(t)
        assert mine.keys() == engine.keys()
        for key in engine:
            assert mine[key] == pytest.approx(engine[key], rel=1e-6, nan_ok=True), (t, key)


def test_stats_of_huge_finite_activations_stay_finite_like_the_engine(generated):
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(4, 4)), torch.randn(2, 4)
    with torch.no_grad():
        model[0].weight.mul_(1e20)  # outputs ~1e20: a diverging run, when statistics are read
    twin = copy.deepcopy(model)
    ex = Explorer(model)
    ex.attach("0", "forward", action="stats")
    ns = generated(hook_code(ex.hooks), twin)
    model(x), twin(x)
    assert_same_records(ex, ns["captures"], "0", "forward")
    mine = ns["captures"][("0", "forward")][0]
    assert math.isfinite(mine["norm"]) and math.isfinite(mine["std"]) and mine["inf"] == 0
    ex.close()


def test_scale_edit_on_a_module_grad_changes_upstream_grads_like_the_explorer(net, x, generated):
    plain = copy.deepcopy(net)
    ex, ns, twin = twin_run(net, lambda ex: ex.attach("act", "grad", edit=("scale", 2.0)), x, generated, steps=1)
    forward_backward(plain, x)
    assert torch.equal(twin.conv.weight.grad, net.conv.weight.grad)
    torch.testing.assert_close(twin.conv.weight.grad, 2 * plain.conv.weight.grad)
    assert torch.equal(twin.fc.weight.grad, plain.fc.weight.grad)  # downstream of the edit: unchanged
    assert_same_records(ex, ns["captures"], "act", "grad")  # the edited gradient is recorded
    ex.close()


def test_edits_of_every_kind_and_value_match_the_engine(net, x, generated):
    def attach(ex):
        ex.attach("conv", "forward_pre", edit=("scale", 0.5))
        ex.attach("bn", "forward", edit=[("clip", 0.5), ("ablate", [1, 3])])
        ex.attach("conv2", "backward_pre", edit=("clip_norm", 0.01))
        ex.attach("bn", "backward", edit=("scale", -1.0))
        ex.attach("fc.bias", "grad", edit=("zero",))

    ex, ns, twin = twin_run(net, attach, x, generated, steps=1)
    for name, p in net.named_parameters():
        assert torch.equal(dict(twin.named_parameters())[name].grad, p.grad), name
    assert not twin.fc.bias.grad.any()
    for h in ex.hooks:
        assert_same_records(ex, ns["captures"], h.target, h.kind)
    edits = (("clip_norm", 1.0), ("clip", float("inf")), ("zero",), ("scale", 3.0), ("ablate", (0, 2)))
    value = (torch.randn(2, 3, 4), [torch.tensor([3.0, 4.0, 1.0]), {"k": torch.arange(3)}], None)
    ns = generated(hook_code([HookInfo("", "forward", edit=edits)]), nn.Identity())
    mine, engine = ns["_edit"](value, edits), apply_edits(value, edits)
    assert type(mine[1][1]) is dict and mine[2] is None and torch.equal(mine[1][1]["k"], torch.arange(3))
    assert torch.equal(mine[0], engine[0]) and torch.equal(mine[1][0], engine[1][0])


@pytest.mark.parametrize(
    ("model_type", "names"),
    [(UsesDict, {"grad_output.a", "grad_output.b"}), (UsesDataclass, {"grad_output.state", "grad_output.pooled"})],
)
@pytest.mark.filterwarnings("ignore:For backward hooks to be called:UserWarning")  # torch's, about the dict
def test_backward_pre_on_a_dict_or_dataclass_output_falls_back_to_tensor_hooks_like_the_engine(
    model_type, names, generated
):
    torch.manual_seed(0)
    model, x = model_type(), torch.randn(2, 3)
    twin, plain = copy.deepcopy(model), copy.deepcopy(model)
    ex = Explorer(model)
    ex.attach("block", "backward_pre", edit=("scale", 10.0))
    ex.attach("block.lin", "backward_pre", action="stats")  # a Tensor output: torch's pre-hook fires, not both
    ns = generated(hook_code(ex.hooks), twin)
    for net in (model, twin, plain):
        for _ in range(2):
            net(x).sum().backward()
    assert_same_records(ex, ns["captures"], "block", "backward_pre")
    assert {name for entry in ns["captures"][("block", "backward_pre")] for name in entry} == names
    assert_same_records(ex, ns["captures"], "block.lin", "backward_pre")
    assert len(ns["captures"][("block.lin", "backward_pre")]) == 2  # one per backward
    assert torch.equal(twin.block.lin.weight.grad, model.block.lin.weight.grad)
    torch.testing.assert_close(twin.block.lin.weight.grad, 10 * plain.block.lin.weight.grad)
    ex.close()


@pytest.mark.filterwarnings("ignore:For backward hooks to be called:UserWarning")
def test_a_backward_hook_on_a_dict_output_says_in_the_code_that_it_never_fires(generated):
    torch.manual_seed(0)
    model, x = UsesDict(), torch.randn(2, 3)
    twin = copy.deepcopy(model)
    ex = Explorer(model)
    ex.attach("block", "backward", action="stats")
    ex.attach("block.lin", "backward", action="stats")
    assert "never fires" not in ex.code()  # nothing is known before a forward
    model(x).sum().backward()
    source = ex.code()
    (line,) = [line for line in source.splitlines() if "never fires" in line]
    assert line.startswith("# this hook never fires: output is a dict: full backward hooks cannot fire on it")
    assert line.endswith("attach 'grad' to record the output gradients")
    assert source.index(line) > source.index('get_submodule("block").register_full_backward_hook')
    ns = generated(source, twin)
    twin(x).sum().backward()
    assert ("block", "backward") not in ns["captures"] and len(ns["captures"][("block.lin", "backward")]) == 1
    assert [h.fired for h in ex.hooks] == [0, 1]
    ex.close()


@pytest.mark.filterwarnings("ignore:For backward hooks to be called:UserWarning")
def test_a_backward_pre_callable_on_a_dict_output_gets_torchs_tuple_like_the_engine(generated):
    def double(module, grad_output):
        return (grad_output[0] * 2,)

    torch.manual_seed(0)
    model, x = UsesDict(), torch.randn(2, 3)
    twin, plain = copy.deepcopy(model), copy.deepcopy(model)
    ex = Explorer(model)
    ex.attach("block", "backward_pre", action=double)
    source = hook_code(ex.hooks)
    placeholder = "    # so this placeholder with torch's signature does nothing.\n    return None"
    source = source.replace(placeholder, "    return (grad_output[0] * 2,)")  # filled in, as its user would
    generated(source, twin)
    for net in (model, twin, plain):
        net(x).backward()
    assert torch.equal(twin.block.lin.weight.grad, model.block.lin.weight.grad)
    torch.testing.assert_close(twin.block.lin.weight.grad, 2 * plain.block.lin.weight.grad)
    assert "_on_dict_output(double, as_tuple=True)" in source
    ex.close()


def test_print_action_prints_one_line_per_firing(net, x, generated, capsys):
    ex, _, _ = twin_run(net, lambda ex: ex.attach("fc", "forward", action="print"), x, generated, steps=1)
    engine_line, my_line = capsys.readouterr().out.splitlines()
    assert my_line.startswith("fc forward: output (2, 5) float32 mean=")
    assert my_line.split(": ", 1)[1] == engine_line.split(": ", 1)[1]
    ex.close()


def test_tuple_outputs_and_a_with_kwargs_pre_hook(generated):
    class Scaled(nn.Module):
        def forward(self, x, *, scale):
            return x * scale

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.split, self.scaled = TupleOut().split, Scaled()

        def forward(self, x):
            a, b = self.split(x)
            return self.scaled(a * b, scale=torch.full((1,), 3.0))

    x = torch.randn(3, 2, requires_grad=True)
    model = Outer()
    twin = copy.deepcopy(model)
    ex = Explorer(model)
    ex.attach("split", ["forward", "grad"])
    ex.attach("scaled", "forward_pre", with_kwargs=True, edit=("scale", 2.0))
    ns = generated(hook_code(ex.hooks), twin)
    assert "with_kwargs=True" in hook_code(ex.hooks)
    assert torch.equal(model(x), twin(x))
    model(x).sum().backward()
    twin(x).sum().backward()
    for target, kind in [("split", "forward"), ("split", "grad"), ("scaled", "forward_pre")]:
        assert_same_records(ex, ns["captures"], target, kind)
    assert list(ns["captures"][("scaled", "forward_pre")][0]) == ["args.0", "kwargs.scale"]
    ex.close()


def test_a_forward_pre_capture_of_a_module_called_with_keywords_records_them_in_the_code_too(generated):
    class Scaled(nn.Module):
        def forward(self, x, scale):
            return x * scale

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scaled = Scaled()

        def forward(self, x):
            return self.scaled(x=x, scale=torch.full((1,), 3.0))

    x = torch.randn(3, 2)
    model = Outer()
    twin = copy.deepcopy(model)
    ex = Explorer(model)
    ex.attach("scaled", "forward_pre")
    ex.attach("", "global_forward_pre", edit=("scale", 2.0))  # edits the positional arguments, keeps the keywords
    ns = generated(hook_code(ex.hooks), twin)
    assert torch.equal(model(x), twin(x))
    for kind in ("forward_pre", "global_forward_pre"):
        assert_same_records(ex, ns["captures"], "scaled", kind)
        assert list(ns["captures"][("scaled", kind)][0]) == ["kwargs.x", "kwargs.scale"]
    assert_same_records(ex, ns["captures"], "", "global_forward_pre")
    ex.close()


@pytest.mark.filterwarnings("ignore:Using a non-full backward hook:FutureWarning")
def test_legacy_backward_matches_and_says_why_it_is_discouraged(net, x, generated):
    ex, ns, _ = twin_run(net, lambda ex: ex.attach("fc", "legacy_backward"), x, generated, steps=1)
    assert_same_records(ex, ns["captures"], "fc", "legacy_backward")
    source = hook_code(ex.hooks)
    assert "register_backward_hook is deprecated" in source and ".register_backward_hook(hook_1)" in source
    ex.close()


def test_removing_the_handles_restores_the_hook_dicts(net, x, generated):
    before = hook_dicts(net)
    twin = copy.deepcopy(net)
    with Explorer(net) as ex:
        ex.attach("conv", ["forward_pre", "forward", "backward", "backward_pre", "grad"])
        ex.attach("fc.weight", ["grad", "post_accumulate"])
        ex.attach("", ["global_forward", "global_backward"])
        ns = generated(hook_code(ex.hooks), twin)
    assert hook_dicts(twin) != before
    forward_backward(twin, x)
    for handle in ns["handles"]:
        handle.remove()
    assert hook_dicts(twin) == before
    assert len(ns["handles"]) == 8 + 2 * 6  # backward_pre adds a forward hook for a dict output; globals: 6 modules


def test_odd_names_are_emitted_safely(generated):
    odd = 'it\'s "odd"\nname\\ # ) \u2028'
    model = nn.Sequential()
    model.add_module(odd, nn.Linear(3, 2))
    twin = copy.deepcopy(model)
    ex = Explorer(model)
    ex.attach(odd, ["forward", "grad"])
    ex.attach(odd + ".weight", "grad")
    source = hook_code(ex.hooks)
    ns = generated(source, twin)
    assert ns["model"] is twin
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["import dataclasses", "from collections import defaultdict", "import torch"]  # no hookwidgets
    x = torch.randn(4, 3)
    model(x).sum().backward()
    twin(x).sum().backward()
    for target, kind in [(odd, "forward"), (odd, "grad"), (odd + ".weight", "grad")]:
        assert_same_records(ex, ns["captures"], target, kind)
    ex.close()


def test_a_callable_becomes_a_placeholder_with_torchs_signature(net, x, generated):
    def my_hook(module, args, output):
        return output * 0

    def on_grad(grad):
        return grad * 0

    weird = lambda module, grad_input, grad_output: None  # noqa: E731
    weird.__name__ = "bad\nname"
    with Explorer(net) as ex:
        ex.attach("fc", "forward", action=my_hook)
        ex.attach("act", "grad", action=on_grad)
        ex.attach("", "global_backward", action=weird)
        source = hook_code(ex.hooks)
    assert "# replace with your hook `my_hook`" in source and "def my_hook(module, args, output):" in source
    assert "# replace with your hook `on_grad`" in source and "def on_grad(grad):" in source
    assert "# replace with your hook `bad\\nname`" in source
    assert "cannot turn arbitrary Python code into source" in source
    ns = generated(source, net)
    out = net(x)
    out.sum().backward()
    assert out.abs().sum() > 0  # the placeholders do nothing
    assert net.conv.weight.grad.abs().sum() > 0 and not ns["captures"]


def test_foreign_and_unknown_hooks_are_left_out(net, generated):
    foreign = net.fc.register_forward_hook(lambda m, a, o: None)
    with Explorer(net) as ex:
        ex.attach("conv", "forward")
        assert [h.foreign for h in ex.hooks] == [False, True]
        source = hook_code(ex.hooks)
    foreign.remove()
    assert "# Left out: 1 hook(s)" in source and 'get_submodule("fc")' not in source
    source = hook_code([HookInfo("conv", "made_up_kind")])
    assert "no plain-torch code for kind 'made_up_kind'" in source
    generated(source, net)


def test_grad_on_a_hand_built_hook_needs_the_model_to_tell_parameter_from_module(net, generated):
    hooks = [HookInfo("fc.weight", "grad"), HookInfo("fc", "grad")]
    with pytest.raises(ValueError, match="pass model= to hook_code"):
        hook_code(hooks)
    source = hook_code(hooks, model=net)
    assert 'model.get_parameter("fc.weight").register_hook(hook_1)' in source
    assert 'model.get_submodule("fc").register_forward_hook(hook_2)' in source


def test_the_model_variable_name_is_configurable_and_checked(net, x, generated):
    source = hook_code([HookInfo("conv", "forward"), HookInfo("", "global_forward", "stats")], model_name="net")
    assert "model." not in source and "net.get_submodule" in source and "net.named_modules" in source
    namespace = {"net": net}
    exec(compile(source, "<hook_code>", "exec"), namespace)
    try:
        net(x)
    finally:
        for handle in namespace["handles"]:
            handle.remove()
    assert namespace["captures"][("conv", "forward")][0]["output"].shape == (2, 4, 6, 6)
    assert not math.isnan(namespace["captures"][("", "global_forward")][0]["mean"])
    for bad in ("my model", "class", "captures", "torch"):
        with pytest.raises(ValueError, match="must be a Python identifier"):
            hook_code([], model_name=bad)
    compile(hook_code([]), "<hook_code>", "exec")


def test_explorer_code_reproduces_its_captures(cnn, image):
    twin = copy.deepcopy(cnn)
    with Explorer(cnn) as ex:
        ex.attach("features.conv", ["forward", "grad"])
        ex.attach("head.fc.weight", "grad")
        source = ex.code()
        ex.run(image, target=0)
        expected = ex.captures["features.conv"]["forward"][0].tensor
        expected_grad = ex.captures["head.fc.weight"]["grad"][0].tensor
    namespace = {"model": twin}
    exec(compile(source, "<ex.code()>", "exec"), namespace)
    twin.eval()
    twin(image)[:, 0].sum().backward()
    torch.testing.assert_close(namespace["captures"][("features.conv", "forward")][0]["output"], expected)
    torch.testing.assert_close(namespace["captures"][("head.fc.weight", "grad")][0]["grad"], expected_grad)


def hook_every_op_node(
    model: nn.Module, x: torch.Tensor, kind: str, generated, before_exec=None, attach=None
) -> tuple[list, dict]:
    """Hook every op node of ``model`` by id in the explorer and in its generated code on a twin; both record alike.

    ``attach(ex)`` attaches other hooks first; ``before_exec`` runs after the code is generated and before it
    runs. Returns the ids and the code's namespace.
    """
    twin = copy.deepcopy(model)
    ex = Explorer(model, example_inputs=x)
    if attach is not None:
        attach(ex)
    ids = [n["id"] for n in ex.graph()["nodes"] if n["op"] != "AccumulateGrad"]
    for node_id in ids:
        ex.attach(node_id, kind)
    source = hook_code(ex.hooks, model=model)
    if before_exec is not None:
        before_exec()
    ns = generated(source, twin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an id the code could not find would warn
        for net in (model, twin):
            net(x).pow(2).sum().backward()
    for node_id in ids:
        assert_same_records(ex, ns["captures"], node_id, kind)
    ex.close()
    return ids, ns


@pytest.mark.parametrize("case", [*SCOPING_CASES, "stashed"])
def test_generated_code_finds_every_op_node_the_explorer_addresses(case, generated):
    """Every op node of the issue's scoping models, hooked by id: the code hooks the same node as the explorer."""
    torch.manual_seed(0)
    model_type, make_input = SCOPING_CASES.get(case, (Outer, lambda: torch.randn(3, 4)))
    ids, _ = hook_every_op_node(model_type(), make_input(), "node_pre", generated)
    assert len(ids) >= 5


def test_op_node_code_works_without_torchs_private_sequence_reader(generated, monkeypatch):
    """Without ``torch._C._autograd._get_sequence_nr`` the code numbers nodes by making one: same nodes hooked."""
    torch.manual_seed(0)
    hide_reader = functools.partial(monkeypatch.delattr, torch._C._autograd, "_get_sequence_nr")
    _, ns = hook_every_op_node(Twice(), torch.randn(5, 4), "node", generated, before_exec=hide_reader)
    assert ns["_next_sequence_nr"] is ns["_probe_sequence_nr"]


def test_forward_edits_take_no_op_node_address_in_the_code_either(generated):
    """An edit's nodes are hidden from the explorer's ordinals (hidden_ops): the code hooks the same nodes."""

    def attach(ex):
        ex.attach("b1", "forward", edit=("scale", 2.0))  # made after b1 returns: in the root's scope
        ex.attach("fc", "forward_pre", edit=("scale", 0.5))  # inside fc's scope
        ex.attach("", "global_forward_pre", edit=("scale", 1.5))  # a MulBackward0 in every scope, the root's first

    torch.manual_seed(0)
    ids, ns = hook_every_op_node(Twice(), torch.randn(5, 4), "node_pre", generated, attach=attach)
    assert "/MulBackward0#0" in ids and "fc/AddmmBackward0#0" in ids  # recorded alike by the helper
    assert not any("/MulBackward0#" in i and not i.startswith("/") for i in ids)  # no edit's node has an id
    assert "_edit_hidden" in ns


@pytest.mark.parametrize("action", ["capture", "stats", "print"])
@pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")
def test_generated_grad_hooks_skip_a_none_gradient_like_the_engine(action, generated, capsys):
    torch.manual_seed(0)
    model, x = UnusedOutput(), torch.randn(3, 7, 8)
    twin = copy.deepcopy(model)
    ex = Explorer(model)
    ex.attach("gru", ["backward", "grad"], action=action)
    ns = generated(hook_code(ex.hooks), twin)
    for net in (model, twin):
        net(x)[:, 0].sum().backward()
    assert [h.last_error for h in ex.hooks] == [None, None]
    records, mine = ex.captures["gru"]["grad"] if action != "print" else [], ns["captures"][("gru", "grad")]
    if action == "capture":  # one firing per output: the unused one's gradient is None, so nothing is kept
        assert [list(entry) for entry in mine] == [list(r.tensors) for r in records] == [[], ["grad_output.1"]]
        assert_same_records(ex, ns["captures"], "gru", "grad")
    elif action == "stats":
        assert [r.stats is None for r in records] == [entry is None for entry in mine] == [True, False]
        assert mine[1]["norm"] == pytest.approx(records[1].stats["norm"], rel=1e-5)
    else:
        assert capsys.readouterr().out.count("grad call 0: grad_output.0 is None") == 1  # the engine's line
    ex.close()


def test_generated_code_walks_dataclass_outputs_like_the_engine(generated):
    torch.manual_seed(0)
    model, x = ScoresHead(), torch.randn(2, 4)
    twin = copy.deepcopy(model)
    ex = Explorer(model, example_inputs=x)
    ex.attach("", "forward", edit=("scale", 2.0))
    ex.attach("", "grad")
    ex.attach("fc/AddmmBackward0#0", "node_pre")
    ns = generated(hook_code(ex.hooks, model=model), twin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a node the code could not find would warn
        outs = [net(x) for net in (model, twin)]
        for out in outs:
            out.logits[:, 1].sum().backward()
    assert all(type(out) is Scores for out in outs)
    torch.testing.assert_close(outs[1].logits, outs[0].logits)
    torch.testing.assert_close(outs[0].logits, 2 * model.fc(x))  # the edit rebuilt the dataclass
    assert [h.note for h in ex.hooks if not h.foreign] == [None, None, None]  # every node found
    for kind in ("forward", "grad"):
        assert_same_records(ex, ns["captures"], "", kind)
    assert list(ns["captures"][("", "grad")][0]) == ["grad_output.logits"]
    assert_same_records(ex, ns["captures"], "fc/AddmmBackward0#0", "node_pre")
    torch.testing.assert_close(twin.fc.weight.grad, model.fc.weight.grad)
    ex.close()


def test_a_node_hook_on_an_input_leaf_is_described_not_generated_as_a_parameter():
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    x = torch.randn(2, 4, requires_grad=True)
    ex = Explorer(model, example_inputs=x)
    leaf = next(n["id"] for n in ex.graph()["nodes"] if n["id"].endswith("#leaf0"))
    ex.attach(leaf, "node_pre")
    code = ex.code()
    assert 'get_parameter("leaf0")' not in code
    assert f"# {leaf!r} is the AccumulateGrad node of an input that requires grad" in code
    exec(code, {"model": nn.Sequential(nn.Linear(4, 4), nn.Tanh())})  # runs: the rest of the code is unaffected
    ex.close()


def test_generated_global_hooks_go_first_and_skip_a_module_with_a_legacy_hook(net, x, generated):
    twin, seen, namespace = copy.deepcopy(net), [], {}
    # the twin's own forward hook sees the global_forward record already made, as torch's global hooks run first
    twin.conv2.register_forward_hook(
        lambda m, a, o: seen.append(len(namespace["captures"][("conv2", "global_forward")]))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        twin.fc.register_backward_hook(lambda *args: None)  # torch refuses a full backward hook beside it
    with Explorer(net) as ex:
        ex.attach("", ["global_forward", "global_backward"])
        namespace.update(generated(hook_code(ex.hooks), twin))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        forward_backward(twin, x)
    assert seen == [1]
    assert ("fc", "global_backward") not in namespace["captures"] and ("conv2", "global_backward") in namespace[
        "captures"
    ]
