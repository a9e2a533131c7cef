"""Fuzzing: random architectures through tree, graph, every hook kind, runs, detach and close.

Each case checks the explorer's promises against independent oracles (a hook-free twin of the model
observed through plain torch hooks, and a plain walk of ``grad_fn``): no exception except the
promised in-place collision (a ValueError at attach, or a warning and a detach at run time); tree
paths and probe shapes; graph op counts and persistent node ids; explorer runs leave parameters,
``.grad`` and buffers as found; hooks change no value in the user's own forward and backward; every
hook fires where torch can fire it (or says why not) and a capture shows what the twin saw unless
flagged stale; ``detach()`` and ``close()`` restore every hook dict and backward-hook flag. A second
explorer (on the same model, a submodule or a model holding it) may share the modules, ended before or
after the first, each closed or dropped unclosed; a deep copy taken mid-run carries no hook of either and
runs as a hook-free copy does.
"""

from __future__ import annotations

import copy
import gc
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from torch import nn

from hookwidgets.core import GLOBAL_KINDS, KINDS, MODULE_KINDS, NODE_KINDS, Explorer
from hookwidgets.core.hooks.collisions import is_inplace_collision

from ._archs import WIDTH, architectures, build_model, example_input, score
from ._oracle import Observed, observe
from ._profiles import SETTINGS
from ._state import GLOBAL_DICTS, all_hook_state, assert_same_values, diff_keys, model_values
from ._walk import graph_counts, op_counts

NO_CUDA = "no CUDA device: torch.cuda.is_available() is False (the CPU-only machines of this project have none)"
FULL_KINDS = ("backward", "backward_pre")
COLLISION = "collides with"
ALWAYS_FIRE = ("forward_pre", "forward", "global_forward_pre", "global_forward", *NODE_KINDS)
"""Kinds that fire in every step here: every module is called, and every graph node leads to the score."""
SECOND_KINDS = (
    "forward_pre",
    "forward",
    "grad",
    "backward",
    "backward_pre",
    "global_forward",
    "global_grad",
    "global_backward",
    "global_backward_pre",
)
"""What the second explorer attaches from (full backward kinds only where no in-place op could collide)."""
INPLACE_BLOCKS = {"linear_relu_inplace", "residual_inplace"}
SETS_FLAG = {"backward", "global_backward"}  # torch then refuses the first explorer's legacy_backward there


def attach_or_collide(ex: Explorer, target: str, kind: str, action: str | Callable) -> bool:
    """Attach one hook; False when the promised in-place collision ValueError refused it."""
    try:
        ex.attach(target, kind, action)
    except ValueError as exc:
        if COLLISION not in str(exc) or "full backward hook" not in str(exc):
            raise
        event("outcome: in-place collision refused at attach")
        return False
    return True


def explained_collision(run: Callable[[], Any], ex: Explorer) -> Any:
    """``run()``; each run-time collision must come with its warning and detach the hooks it broke (a model
    with two in-place ops can take two runs), and then ``run()`` works."""
    for _ in range(len(ex.hooks) + 1):
        before = len(ex.hooks)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return run()
            except RuntimeError as exc:
                if not is_inplace_collision(exc):
                    raise
        event("outcome: in-place collision explained at run time")
        assert any(COLLISION in str(w.message) for w in caught), "a run-time collision was not explained"
        assert ex.diagnostics and COLLISION in ex.diagnostics[-1]
        assert len(ex.hooks) < before, "a run-time collision detached no hook"
    raise AssertionError("run() still collides after every hook it could blame was detached")


def blocks(spec: tuple) -> set[str]:
    """The block names a spec uses, nested ones included."""
    name, *args = spec
    found = {name}
    for arg in args:
        for child in arg if isinstance(arg, list) else [arg]:
            found |= blocks(child)
    return found


def user_step(model: nn.Module, x: torch.Tensor, seed: int) -> tuple[Any, torch.Tensor]:
    """The user's own forward and backward, seeded (dropout), on a fresh copy of the input."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    xi = x.detach().clone().requires_grad_(x.requires_grad)
    out = model(xi)
    score(out).backward()
    return out, xi.grad


def plant_grads(model: nn.Module) -> None:
    """Give every parameter a ``.grad`` so an explorer run that touched it would show."""
    for param in model.parameters():
        param.grad = torch.full_like(param, 0.5)


def assert_same_grads(model: nn.Module, reference: nn.Module, what: str) -> None:
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), f"{what}: .grad of {name} is {p.grad} vs {q.grad}"
        if p.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, msg=f"{what}: .grad of {name} differs")


def assert_same_output(out: Any, ref: Any, what: str) -> None:
    if isinstance(out, dict):
        out, ref = list(out.values()), list(ref.values())
    torch.testing.assert_close(out, ref, msg=f"{what}: output differs")


def spy(kind: str, calls: list[tuple[str, int]]) -> Callable:
    """A user callable for ``kind`` that notes how many arguments torch passed it and changes nothing."""

    def hook(*args: Any) -> None:
        calls.append((kind, len(args)))

    return hook


@SETTINGS
@given(arch=architectures(), data=st.data())
def test_fuzzed_model_round_trip(arch: dict[str, Any], data: st.DataObject) -> None:
    round_trip(arch, data, "cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 4))
@given(arch=architectures(), data=st.data())
def test_fuzzed_model_round_trip_on_cuda(arch: dict[str, Any], data: st.DataObject) -> None:
    round_trip(arch, data, "cuda")  # backward hooks run on the autograd engine's device threads there


def round_trip(arch: dict[str, Any], data: st.DataObject, device: str) -> None:
    """One case: build, explore (with a second explorer beside), attach everything, run, detach/close or drop,
    and compare with the twin."""
    model = build_model(arch).to(device)
    x = example_input(arch).detach().to(device).requires_grad_(arch["input_grad"])
    note(f"model:\n{model}")
    for block in sorted(blocks(arch["body"])):
        event(f"block: {block}")  # --hypothesis-show-statistics: how often each structure was covered
    event(f"root output: {arch['output']}")
    reference = copy.deepcopy(model)  # hook-free twin: the user's steps must give the same numbers
    plant_grads(model)
    hooks_before = all_hook_state(model)
    values_before = model_values(model)
    case = {
        "action": data.draw(st.sampled_from(["capture", "stats", "callable"]), label="action"),
        "example_inputs": data.draw(st.booleans(), label="example_inputs"),
        "record_graph": data.draw(st.booleans(), label="record_graph"),
        "detach_first": data.draw(st.booleans(), label="detach() before close()"),
        "second": data.draw(st.sampled_from(["none", "same model", "submodule", "parent"]), label="second explorer"),
        "order": data.draw(st.sampled_from(["second ends first", "first ends first"]), label="end order"),
        "first_ends": data.draw(st.sampled_from(["closed", "dropped"]), label="first explorer"),
        "second_ends": data.draw(st.sampled_from(["closed", "dropped"]), label="second explorer ends"),
        "deepcopy": data.draw(st.sampled_from([None, "after attach", "after user step"]), label="deep copy"),
    }
    event(f"second explorer: {case['second']}")
    event(f"deep copy: {case['deepcopy'] or 'none'}")
    explorers: dict[str, Explorer] = {}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # legacy hooks, first-layer and dict-output warnings are expected here
        try:
            second, flagged = second_explorer(model, arch, case["second"], data)
            if second is not None:
                explorers["second"] = second
                del second
            case["legacy_ok"] = not flagged
            explorers["first"] = Explorer(model, x if case["example_inputs"] else None)
            exercise(explorers["first"], model, reference, x, values_before, case, data, hooks_before)
            if case["detach_first"]:
                explorers["first"].detach()
                if "second" not in explorers:
                    after = all_hook_state(model)
                    assert after == hooks_before, f"detach() did not restore: {diff_keys(hooks_before, after)}"
            order = ["second", "first"] if case["order"] == "second ends first" else ["first", "second"]
            for name in order:
                if name in explorers:
                    end(explorers, name, case[f"{name}_ends"])
        finally:
            for explorer in explorers.values():  # on failure: a finalizer would run during a later case
                explorer.close()
    after = all_hook_state(model)
    assert after == hooks_before, f"close() did not restore: {diff_keys(hooks_before, after)}"
    out, _ = user_step(model, x, seed=4)
    ref_out, _ = user_step(reference, x, seed=4)
    assert_same_output(out, ref_out, "after close")


def second_explorer(
    model: nn.Module, arch: dict[str, Any], where: str, data: st.DataObject
) -> tuple[Explorer | None, bool]:
    """An explorer of the model, of its body, or of a Sequential holding it, with one to three hooks; and
    whether one of them set a module's full-backward flag."""
    if where == "none":
        return None, False
    root = {"same model": model, "submodule": model.body, "parent": nn.Sequential(model)}[where]
    full_ok = not blocks(arch["body"]) & INPLACE_BLOCKS  # its full backward hooks would meet the in-place op
    kinds = [k for k in SECOND_KINDS if full_ok or k not in (*FULL_KINDS, "global_backward", "global_backward_pre")]
    chosen = data.draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3, unique=True), label="second's kinds")
    paths = [path for path, _ in root.named_modules()]
    explorer = Explorer(root)
    for kind in chosen:
        target = "" if kind.startswith("global_") else data.draw(st.sampled_from(paths), label=f"second's {kind}")
        explorer.attach(target, kind)
    return explorer, bool(SETS_FLAG & set(chosen))


def end(explorers: dict[str, Explorer], name: str, how: str) -> None:
    """Close one explorer, or drop it unclosed: its finalizer removes its hooks once it is collected."""
    explorer = explorers.pop(name)
    event(f"{name} explorer {how}")
    if how == "closed":
        explorer.close()
        return
    collected = weakref.ref(explorer)
    del explorer
    if collected() is not None:  # only a reference cycle keeps it: a full collection (~0.1 s) finds it
        gc.collect()
    assert collected() is None, f"the {name} explorer outlived its last reference: its finalizer has not run"


def check_deepcopy(model: nn.Module, reference: nn.Module, x: torch.Tensor, hooks_before: dict, ex: Explorer) -> None:
    """A deep copy taken now carries no hook, flag or attribute of any explorer, and runs as a copy of the
    hook-free twin does; its forward is no step of the explorer's."""
    clone, twin = copy.deepcopy(model), copy.deepcopy(reference)
    copied = all_hook_state(clone)
    # torch's global hook dicts and flag as before; the graph recorder's wrapper of Module.__call__ may be in place
    global_keys = [*GLOBAL_DICTS, "_global_is_full_backward_hook"]
    copied["globals"] = {k: copied["globals"][k] for k in global_keys}
    expected = hooks_before | {"globals": {k: hooks_before["globals"][k] for k in global_keys}}
    assert copied == expected, f"the deep copy is not hook-free: {diff_keys(expected, copied)}"
    step = ex.step
    out, xgrad = user_step(clone, x, seed=5)
    ref_out, ref_xgrad = user_step(twin, x, seed=5)
    assert_same_output(out, ref_out, "deep copy")
    assert_same_grads(clone, twin, "deep copy")
    if xgrad is not None:
        torch.testing.assert_close(xgrad, ref_xgrad)
    assert ex.step == step, "the copy's forward counted as a step of the explorer"


def exercise(
    ex: Explorer,
    model: nn.Module,
    reference: nn.Module,
    x: torch.Tensor,
    values_before: dict[str, Any],
    case: dict[str, Any],
    data: st.DataObject,
    hooks_before: dict[Any, Any],
) -> None:
    """Tree, graph, attach everything, an explorer run, and a user step compared with the hook-free twin;
    a deep copy checked after the run or the user step, when the case asks for one."""
    assert ex.probe_error is None, ex.probe_error
    check_tree(ex.tree, model, arch_batch=x.shape[0] if case["example_inputs"] else None)
    assert_same_values(values_before, model_values(model), "probe")

    reference.eval()
    expected_ops = op_counts(reference(x))
    reference.train()
    graph = ex.graph() if case["example_inputs"] else ex.graph(x)
    assert graph_counts(graph) == expected_ops
    ids = sorted(n["id"] for n in graph["nodes"])
    assert len(set(ids)) == len(ids), "node ids are not unique"
    assert_same_values(values_before, model_values(model), "graph recording")

    calls: list[tuple[str, int]] = []
    attached = attach_everything(ex, model, graph, case["action"], calls, data, case["legacy_ok"])
    note(f"attached: {sorted(attached)}")
    assert_same_values(values_before, model_values(model), "attach-time probes")

    explained_collision(lambda: ex.run(x, target=score, record_graph=case["record_graph"]), ex)
    assert_same_values(values_before, model_values(model), "ex.run")
    recorded = ex.graph(x)
    assert graph_counts(recorded) == expected_ops, "hooks changed the recorded graph"
    assert sorted(n["id"] for n in recorded["nodes"]) == ids, "hooks changed the node ids"
    assert_same_values(values_before, model_values(model), "ex.graph(x)")
    if case["deepcopy"] == "after attach":
        check_deepcopy(model, reference, x, hooks_before, ex)

    out, xgrad = explained_collision(lambda: user_step(model, x, seed=3), ex)
    (ref_out, ref_xgrad), seen = observe(reference, lambda: user_step(reference, x, seed=3))
    assert_same_output(out, ref_out, "user step")
    assert_same_grads(model, reference, "user step")
    if xgrad is not None:
        torch.testing.assert_close(xgrad, ref_xgrad)
    check_firings(ex, seen)
    for kind, arity in calls:
        assert arity == KINDS[kind].arity, f"a {kind!r} callable got {arity} arguments, not {KINDS[kind].arity}"
    if case["action"] == "capture":
        check_captures(ex, seen)
    assert ex.captures.nbytes <= ex.captures.memory_budget
    if case["deepcopy"] == "after user step":
        check_deepcopy(model, reference, x, hooks_before, ex)


def check_tree(tree: dict[str, Any], model: nn.Module, arch_batch: int | None) -> None:
    """Every module once, by path; with example inputs, every module's probed shape (all blocks keep it)."""
    found: list[dict[str, Any]] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(node["children"])
    assert sorted(n["path"] for n in found) == sorted(p for p, _ in model.named_modules())
    for node in found:
        module = model.get_submodule(node["path"])
        assert node["cls"] == type(module).__name__
        assert node["trainable"] == sum(p.numel() for p in module.parameters())
        expected = [arch_batch, WIDTH] if arch_batch is not None else None
        assert node["shape"] == expected, f"{node['path']}: shape {node['shape']}, expected {expected}"


def check_firings(ex: Explorer, seen: Observed) -> None:
    """Every hook fired where torch can fire it, and one that cannot fire says why on its note."""
    for info in ex.hooks:
        assert info.foreign or info.last_error is None, f"{info}: {info.last_error}"
        if info.foreign:
            continue
        if info.kind in ALWAYS_FIRE:
            assert info.fired > 0, f"{info} never fired"
        if info.spec in ("param_grad", "post_accumulate"):
            reached = info.target in seen.params_in_graph
            assert (info.fired > 0) == reached, f"{info}: fired {info.fired}, parameter in the graph: {reached}"
        if info.spec == "grad":
            armed = seen.requires_grad[info.target]
            assert (info.fired > 0) == armed, f"{info}: fired {info.fired}, an output required grad: {armed}"
        if info.spec in (*FULL_KINDS, "grad") and info.fired == 0:
            assert info.note, f"{info} never fired and does not say why"


def check_captures(ex: Explorer, seen: Observed) -> None:
    """The last step's forward, forward_pre and grad captures equal what the twin saw, unless flagged stale."""
    step, compared = ex.step, 0
    sources = {"forward": seen.outputs, "global_forward": seen.outputs, "forward_pre": seen.args}
    sources |= {"global_forward_pre": seen.args, "grad": seen.grads, "global_grad": seen.grads}
    modules = {path for path, _ in ex.model.named_modules()}
    for target in ex.captures:
        for kind, records in ex.captures[target].items():
            if kind not in sources or target not in modules:  # "grad" on a parameter: checked through .grad
                continue
            for record in records:
                if record.step != step or record.stale:
                    continue
                expected = sources[kind].get((record.path, record.call))
                assert expected is not None, f"{kind} record of {target!r} call {record.call}: the twin saw no call"
                # one record per output tensor for tensor hooks (grad kinds), one with all of them otherwise
                names = set(record.tensors)
                assert names <= set(expected) if "grad" in kind else names == set(expected), (
                    f"{kind} {target!r}: {names}"
                )
                for name, tensor in record.tensors.items():
                    torch.testing.assert_close(tensor, expected[name], msg=f"{kind} {name} on {target!r} differs")
                    compared += 1
    assert compared > 0, "no capture of the last step was compared"


def attach_everything(
    ex: Explorer, model: nn.Module, graph: dict, action: str, calls: list, data: st.DataObject, legacy_ok: bool = True
) -> set[str]:
    """Every kind valid for each target (torch refuses legacy and full backward hooks on one module:
    each module gets one of the two; none legacy when another explorer's full hooks hold the flag), global
    kinds on "", parameter kinds, node kinds on every graph id."""

    def act(kind: str) -> str | Callable:
        return spy(kind, calls) if action == "callable" else action

    attached: set[str] = set()
    paths = [p for p, _ in model.named_modules()]
    legacy = data.draw(st.sets(st.sampled_from(paths), max_size=2), label="legacy") if legacy_ok else set()
    for path, _ in model.named_modules():
        for kind in MODULE_KINDS:
            if (kind == "legacy_backward") != (path in legacy) and kind in (*FULL_KINDS, "legacy_backward"):
                continue
            if attach_or_collide(ex, path, kind, act(kind)):
                attached.add(path)
    for kind in GLOBAL_KINDS:
        attach_or_collide(ex, "", kind, act(kind))
    for name, _ in model.named_parameters():
        ex.attach(name, "grad", act("param_grad"))
        ex.attach(name, "post_accumulate", act("post_accumulate"))
    for node in graph["nodes"]:
        for kind in NODE_KINDS:
            ex.attach(node["id"], kind, act(kind))
    return attached
