"""``attach()`` in full: what a place refuses before any hook is attached, what the example inputs check by running
(an edit that does not fit, a full backward hook an in-place op breaks), and the notes on hooks that cannot fire."""

from __future__ import annotations

import contextlib
import difflib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from ..._warnings import AliasWarning, CompiledModelWarning
from .._torch import COMPILED_INNER, is_compile_wrapper
from ..display import display_name, quoted
from ..graph.stops import Stops
from ..kind_table import KINDS, Kind, has, user_names
from ..model.attention_sources import hidden_probabilities_note
from ..model.graph_calls import never_called
from ..model.inputs import Inputs, call_model
from ..model.lazy import unmaterialized_param
from ..model.nested import tensors_in
from ..model.packed import holds_packed
from ..model.paths import alias_note, first_name, resolve_path, without_compiled_steps
from ..model.tree import SCRIPTED_ROOT, ProbeResult
from . import notes, sharded_params
from .collisions import is_inplace_collision
from .info import HookInfo
from .kinds import resolve_kind
from .notes import (
    COMPILED,
    NoteKind,
    compiled_note,
    graph_skips_global_note,
    graph_skips_note,
    meta_param_note,
    not_run_note,
    unchecked_note,
)
from .registry import HookRegistry
from .runner import COLLISION_CHECK, FORWARD_CHECK, STOP_CHECK, Runner
from .stop_notes import note_stopped, stopped_notes
from .tensor_edits import check_edits_fit


def attach(
    registry: HookRegistry,
    runner: Runner,
    model: nn.Module,
    path: str,
    kinds: Sequence[str],
    action: str | Callable[..., Any],
    edit: Any,
    copy: bool,
    with_kwargs: bool,
    *,
    probed: ProbeResult | None,
    example: Callable[[], Inputs] | None,
    check_node: Callable[[str], None],
) -> list[HookInfo]:
    """Attach a hook of each of ``kinds`` at ``path``, all or none, as ``Explorer.attach`` documents; ``probed``:
    what the shape probe saw; ``example()``: a fresh copy of the example inputs (None without them);
    ``check_node(id)``: a KeyError when the recorded graph lacks that node."""
    if isinstance(model, torch.jit.ScriptModule):  # torch refuses even get_submodule on one
        raise ValueError(SCRIPTED_ROOT)
    family, obj = resolve_path(model, path)
    given, path = path, first_name(model, family, obj) or path  # one name per module or parameter
    specs = [resolve_kind(k, path, family) for k in kinds]  # all validated before any is attached
    _refuse(path, obj, family, specs)
    if family == "param" and isinstance(obj, torch.Tensor):
        refused = sharded_params.refusal(model, path, obj, specs)
        if refused is not None:
            raise ValueError(refused)
    skips = runner.skips
    if family == "node":
        check_node(path)
    forward = forward_probe(runner, model, example)
    infos: list[HookInfo] = []
    try:  # all or nothing: a kind refused halfway takes back the kinds of this call attached before it
        for k, spec in zip(kinds, specs, strict=True):
            infos.append(registry.attach(path, obj, spec, k, action, edit, copy, with_kwargs, forward))
        _check_edits_fit(infos, probed)
        _check_collisions(runner, model, example, [i for i in infos if has(i.spec, full_backward=True)])
    except BaseException:
        for info in infos:
            registry.detach(info.path, info.kind)
        raise
    _note(model, infos, specs, obj, given, probed, "forward" in kinds)
    _note_stopped_gradients(runner, model, example, infos)
    if runner.skips != skips:  # a check ran no forward: the model is sharded across ranks (runner.py)
        for info in infos:
            notes.add(info, unchecked_note(list(runner.skipped.values())[-1]), NoteKind.UNCHECKED)
    return infos


def check_kind_name(kind: str) -> None:
    """A ValueError with the closest kind when ``kind`` is no hook kind (``detach()`` takes any kind's name)."""
    if kind not in KINDS:
        close = difflib.get_close_matches(str(kind), list(KINDS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown hook kind {kind!r}{hint}; kinds are {', '.join(user_names())}")


def forward_probe(runner: Runner, model: nn.Module, example: Callable[[], Inputs] | None) -> Callable[[], None] | None:
    """One forward of the example inputs as an own run (hooks silent, model left as found, no grad), for what
    attach() checks by running; None without example inputs, or where a forward would materialize lazy modules."""
    if example is None or runner.would_skip(FORWARD_CHECK, model):
        return None
    return lambda: runner.run(FORWARD_CHECK, model, lambda: call_model(model, example()))


def _refuse(path: str, obj: Any, family: str, specs: list[Kind]) -> None:
    """A ValueError for a kind the place cannot take, before any hook is attached."""
    if isinstance(obj, torch.jit.ScriptModule) and any(s.family == "module" for s in specs):
        raise ValueError(
            f"module {quoted(path)} is a torch.jit.script module ({display_name(type(obj).__name__)}): "
            "ScriptModules take no hooks; hook a module around it, or its parameters (kind 'grad'), or explore it "
            "before scripting"
        )
    if is_compile_wrapper(obj) and any(s.module_backward for s in specs):
        inner = f"{path}.{COMPILED_INNER}" if path else COMPILED_INNER
        raise ValueError(
            f"module {quoted(path)} is torch.compile's wrapper (OptimizedModule): torch never fires backward "
            f"hooks registered on the wrapper itself; attach them to {quoted(inner)}, the module it compiles"
        )
    if family == "param" and is_lazy(obj):
        raise ValueError(unmaterialized_param(path))
    if family == "param" and not obj.requires_grad and any(s.gradient for s in specs):
        raise ValueError(
            f"parameter {quoted(path)} does not require grad (frozen), so it gets no gradient to hook; unfreeze "
            f"it with model.get_parameter({quoted(path)}).requires_grad_() or hook a parameter that trains"
        )


def _check_edits_fit(infos: list[HookInfo], probed: ProbeResult | None) -> None:
    """With example inputs, refuse at attach a forward edit that does not fit the output shape the probe saw."""
    shapes = probed.shapes if probed is not None else {}
    for info in infos:
        shape = shapes.get(info.path)
        if info.edit and info.spec == "forward" and shape and all(isinstance(n, int) for n in shape):
            check_edits_fit(info.edit, tuple(shape), info.path)


def _check_collisions(
    runner: Runner, model: nn.Module, example: Callable[[], Inputs] | None, infos: list[HookInfo]
) -> None:
    """With example inputs, find at attach time a full backward hook of ``infos`` that an in-place op breaks: a
    ValueError saying why. (A lazy model is not checked: the check would materialize it; the run explains it.)"""
    if not infos or example is None:
        return

    def check() -> None:
        try:
            call_model(model, example())
        except Exception as exc:
            if is_inplace_collision(exc):
                raise
            # any other failure of the example inputs (the model's own errors) was reported by the probe

    with contextlib.suppress(RuntimeError):  # another hook's collision: left to the run that meets it
        runner.run(COLLISION_CHECK, model, check, attaching=infos)


def _note_stopped_gradients(
    runner: Runner, model: nn.Module, example: Callable[[], Inputs] | None, infos: list[HookInfo]
) -> None:
    """With example inputs, on a model that keeps packed weights (a quantized one), say on each hook that waits
    for a gradient which cannot come why (``stop_notes.py``), from one forward of the example inputs."""
    if example is None or not holds_packed(model):
        return

    def check() -> None:
        with Stops(model, True) as stops:
            output = call_model(model, example())
            roots = [t.grad_fn for t in tensors_in(output) if t.grad_fn is not None]
            note_stopped(stopped_notes(infos, model, stops, roots))

    with contextlib.suppress(Exception):  # the example inputs fail: the probe said so, and the run says it again
        runner.run(STOP_CHECK, model, check)


def _note(
    model: nn.Module,
    infos: list[HookInfo],
    specs: list[Kind],
    obj: Any,
    given: str,
    probed: ProbeResult | None,
    forward: bool,
) -> None:
    """The notes of hooks just attached that cannot fire, may not, or sit under another name than ``given``."""
    path = infos[0].path
    skipped = never_called(model)
    for info, spec in zip(infos, specs, strict=True):
        if spec.family == "global" and skipped:
            notes.add(info, graph_skips_global_note(skipped), NoteKind.CANNOT_FIRE)
        elif spec.family == "param" and obj.is_meta:  # gradient hooks: a meta tensor takes part in no backward
            swapped = probed is not None and path in probed.swapped
            notes.add(info, meta_param_note(path, swapped), NoteKind.CANNOT_FIRE)
        elif spec.family == "param" and sharded_params.fsdp2_state(model, obj) is not None:
            fsdp = sharded_params.FSDP2_GRAD_NOTE if spec.name == "param_grad" else sharded_params.FSDP2_POST_NOTE
            notes.add(info, fsdp, NoteKind.FSDP_PARAM)  # which gradient it sees, and when
        elif spec.family != "module":
            continue
        elif path in skipped:  # found in the graph: it can never fire, not only in the example forward
            notes.add(info, graph_skips_note(path, obj, skipped[path]), NoteKind.CANNOT_FIRE)
        elif probed is not None and id(obj) not in probed.called:
            notes.add(info, not_run_note(path, obj), NoteKind.NOT_RUN)
    note = compiled_note(model)
    if note:
        warnings.warn(COMPILED, CompiledModelWarning, stacklevel=4)
        for info in infos:  # until each fires: a hook attached before the model's first compiled call does
            notes.add(info, note, NoteKind.COMPILED)
    note = hidden_probabilities_note(model, path, obj) if forward else None
    if note:  # sdpa or flash attention: the hook sees None where the probabilities would be
        for info in infos:
            if info.kind == "forward":
                notes.add(info, note, NoteKind.HIDDEN_PROBABILITIES)
    if path != given and without_compiled_steps(path) != given:  # not merely inside torch.compile's wrapper
        note = alias_note(given, path)
        warnings.warn(note, AliasWarning, stacklevel=4)
        for info in infos:
            notes.add(info, note, NoteKind.ALIAS)
