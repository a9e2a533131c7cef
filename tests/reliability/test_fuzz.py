"""Fuzzing: random architectures through tree, graph, every hook kind, runs and close.

Each case checks the rules of DESIGN.md: no exception except the promised in-place collision
(a ValueError at attach, or a warning and a detach at run time); graph op counts equal to a plain
walk; explorer runs leave parameters, ``.grad`` and buffers as found; hooks change no value in the
user's own forward and backward; ``close()`` restores every hook dict and backward-hook flag.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
from hypothesis import given, note
from hypothesis import strategies as st
from torch import nn

from hookwidgets.core.diagnostics import is_inplace_collision
from hookwidgets.core.explorer import Explorer
from hookwidgets.core.kinds import GLOBAL_KINDS, MODULE_KINDS

from ._archs import architectures, build_model, example_input, score
from ._profiles import SETTINGS
from ._state import all_hook_state, assert_same_values, diff_keys, model_values
from ._walk import graph_counts, op_counts

FULL_KINDS = ("backward", "backward_pre")
COLLISION = "collides with"


def attach_or_collide(ex: Explorer, target: str, kind: str, action: str) -> bool:
    """Attach one hook; False when the promised in-place collision ValueError refused it."""
    try:
        ex.attach(target, kind, action)
    except ValueError as exc:
        if COLLISION not in str(exc) or "full backward hook" not in str(exc):
            raise
        return False
    return True


def user_step(model: nn.Module, x: torch.Tensor, seed: int) -> tuple[Any, torch.Tensor]:
    """The user's own forward and backward, seeded (dropout), on a fresh copy of the input."""
    torch.manual_seed(seed)
    xi = x.detach().clone().requires_grad_(x.requires_grad)
    out = model(xi)
    score(out).backward()
    return out, xi.grad


def user_step_allowing_collision(model: nn.Module, x: torch.Tensor, seed: int) -> tuple[Any, torch.Tensor]:
    """A user step; a run-time collision must come with its warning, and the next forward must work."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return user_step(model, x, seed)
        except RuntimeError as exc:
            if not is_inplace_collision(exc):
                raise
    assert any(COLLISION in str(w.message) for w in caught), "a run-time collision was not explained"
    model.zero_grad(set_to_none=True)
    return user_step(model, x, seed)


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


@SETTINGS
@given(arch=architectures(), data=st.data())
def test_fuzzed_model_round_trip(arch: dict[str, Any], data: st.DataObject) -> None:
    model = build_model(arch)
    x = example_input(arch)
    note(f"model:\n{model}")
    reference = copy.deepcopy(model)  # hook-free twin: the user's steps must give the same numbers
    plant_grads(model)
    plant_grads(reference)  # deepcopy does not copy a Parameter's .grad
    hooks_before = all_hook_state(model)
    values_before = model_values(model)
    action = data.draw(st.sampled_from(["capture", "stats"]), label="action")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # legacy hooks, first-layer and dict-output warnings are expected here
        ex = Explorer(model, x)
        try:
            exercise(ex, model, reference, x, values_before, action, data)
        finally:
            ex.close()  # also on failure: an unclosed explorer's finalizer would run during a later case
    after = all_hook_state(model)
    assert after == hooks_before, f"not restored: {diff_keys(hooks_before, after)}"
    out, _ = user_step(model, x, seed=4)
    ref_out, _ = user_step(reference, x, seed=4)
    assert_same_output(out, ref_out, "after close")


def exercise(
    ex: Explorer,
    model: nn.Module,
    reference: nn.Module,
    x: torch.Tensor,
    values_before: dict[str, Any],
    action: str,
    data: st.DataObject,
) -> None:
    """Tree, graph, attach everything, an explorer run, and a user step compared with the hook-free twin."""
    assert ex.probe_error is None, ex.probe_error
    assert_same_values(values_before, model_values(model), "probe")

    reference.eval()
    expected_ops = op_counts(reference(x))
    reference.train()
    graph = ex.graph()
    assert graph_counts(graph) == expected_ops
    assert_same_values(values_before, model_values(model), "graph recording")

    attached = attach_everything(ex, model, graph, action, data)
    note(f"attached: {sorted(attached)}")
    assert_same_values(values_before, model_values(model), "attach-time probes")

    ex.run(x, target=score)
    assert graph_counts(ex.graph(x)) == expected_ops, "hooks changed the recorded graph"
    assert_same_values(values_before, model_values(model), "ex.run")

    out, xgrad = user_step_allowing_collision(model, x, seed=3)
    ref_out, ref_xgrad = user_step(reference, x, seed=3)
    assert_same_output(out, ref_out, "user step")
    assert_same_grads(model, reference, "user step")
    if xgrad is not None:
        torch.testing.assert_close(xgrad, ref_xgrad)
    for info in ex.hooks:
        assert info.foreign or info.last_error is None, f"{info}: {info.last_error}"
        if info.kind in ("forward", "forward_pre", "global_forward") and info.target in attached:
            assert info.fired > 0, f"{info} never fired"
    assert ex.captures.nbytes <= ex.captures.memory_budget


def attach_everything(ex: Explorer, model: nn.Module, graph: dict, action: str, data: st.DataObject) -> set[str]:
    """Every kind valid for each target (torch refuses legacy and full backward hooks on one module:
    each module gets one of the two), global kinds on "", parameter kinds, node kinds on a few ids."""
    attached: set[str] = set()
    legacy = data.draw(st.sets(st.sampled_from([p for p, _ in model.named_modules()]), max_size=2), label="legacy")
    for path, _ in model.named_modules():
        for kind in MODULE_KINDS:
            if (kind == "legacy_backward") != (path in legacy) and kind in (*FULL_KINDS, "legacy_backward"):
                continue
            if attach_or_collide(ex, path, kind, action):
                attached.add(path)
    for kind in GLOBAL_KINDS:
        attach_or_collide(ex, "", kind, action)
    for name, _ in model.named_parameters():
        ex.attach(name, ["grad", "post_accumulate"], action)
    ids = [n["id"] for n in graph["nodes"]]
    for node in data.draw(st.lists(st.sampled_from(ids), max_size=3, unique=True), label="node ids"):
        ex.attach(node, ["node_pre", "node"], action)
    return attached
