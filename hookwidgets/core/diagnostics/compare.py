"""Legacy and full module backward hooks side by side, run on hook-free copies of the model.

torch refuses both kinds on one module and keeps the legacy flag after the hook is removed,
so each kind gets its own ``copy.deepcopy`` of the model; the user's model is only read.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
from torch import nn
from torch.nn.utils.prune import BasePruningMethod
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm

from .._torch import global_module_hooks, set_full_backward_flag
from ..hooks.collisions import inplace_culprit, is_inplace_collision
from ..kind_table import names
from ..model.hook_dicts import HOOK_DICTS
from ..model.inputs import Inputs, Target, call_model
from ..model.nested import first_tensor, map_tensors
from ..model.paths import describe_path, resolve_module, submodule_or_none
from ..model.scores import resolve_score

Grads = tuple[torch.Tensor | None, ...]

# torch's own pre-hooks that compute a weight before each forward; without them the copy would run a stale weight
_WEIGHT_PRE_HOOKS = (BasePruningMethod, SpectralNorm, WeightNorm)
_RTOL, _ATOL = 1e-5, 1e-6
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class BackwardComparison:
    """What the legacy and the full backward hook of one module saw in the same backward.

    ``matches`` is True when both hooks fired and their grad_input and grad_output agree in count,
    shapes and values (within tolerance).
    """

    layer: str
    """The module's path."""
    legacy_grad_input: Grads | None
    """What the legacy hook saw as grad_input (a tuple of tensors or None), or None when it did not fire."""
    full_grad_input: Grads | None
    """What the full backward hook saw as grad_input (a tuple of tensors or None), or None when it did not fire."""
    legacy_grad_output: Grads | None
    """What the legacy hook saw as grad_output (a tuple of tensors or None), or None when it did not fire."""
    full_grad_output: Grads | None
    """What the full backward hook saw as grad_output (a tuple of tensors or None), or None when it did not fire."""
    legacy_node: str | None
    """The autograd node the legacy hook really hooked, e.g. ``AddmmBackward0``."""
    matches: bool
    """Both fired and agree in count, shapes and values."""
    notes: list[str] = field(default_factory=list)
    """Explanations, and torch's warnings."""
    legacy_slots: list[str] = field(default_factory=list)
    """What each legacy grad_input slot is the gradient of, e.g. ``["bias", "input", "weight.T"]``."""

    def table(self) -> list[dict[str, Any]]:
        """One row per grad_input slot, then per grad_output slot: ``slot``, ``legacy_shape``, ``full_shape``,
        ``max_abs_diff``."""
        rows = []
        for kind, legacy, full in (
            ("grad_input", self.legacy_grad_input, self.full_grad_input),
            ("grad_output", self.legacy_grad_output, self.full_grad_output),
        ):
            legacy, full = legacy or (), full or ()
            for i in range(max(len(legacy), len(full))):
                a = legacy[i] if i < len(legacy) else None
                b = full[i] if i < len(full) else None
                rows.append(
                    {
                        "slot": f"{kind}[{i}]",
                        "legacy_shape": _shape(a),
                        "full_shape": _shape(b),
                        "max_abs_diff": _max_abs_diff(a, b),
                    }
                )
        return rows


def path_as_target_refused(function: F) -> F:
    """Refuse ``function(owner, target=<a module path>)`` (owner: a model or an explorer) with no layer: the module
    goes in ``layer=``, ``target=`` is the score (a TypeError saying so, where Python's would only miss ``layer``)."""

    @functools.wraps(function)
    def call(owner: Any, *args: Any, **kwargs: Any) -> Any:
        path = kwargs.get("target")
        if not args and "layer" not in kwargs and isinstance(path, str):
            model = owner if isinstance(owner, nn.Module) else getattr(owner, "model", None)
            if isinstance(model, nn.Module) and submodule_or_none(model, path) is not None:
                raise TypeError(
                    f"{function.__qualname__}() got target={path!r}, a module path, and no layer: target= is the "
                    f"score; pass the module as layer={path!r}"
                )
        return function(owner, *args, **kwargs)

    return call  # type: ignore[return-value]


@path_as_target_refused
def compare_backward(
    model: nn.Module, layer: str, inputs: Inputs, target: Target = None, *, position: int | None = None
) -> BackwardComparison:
    """Run the legacy and the full backward hook of ``model``'s module at ``layer`` on the same backward.

    ``target`` (and ``position``) is the score backpropagated, as in ``Explorer.run`` (default: the sum of the
    output, or of its first tensor). Each run needs a deep copy of the model in memory.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"compare_backward needs a torch.nn.Module, got {type(model).__name__}")
    resolve_module(model, layer)
    devices = _cuda_devices(model, inputs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        legacy = _run(_hookless_copy(model), layer, inputs, (target, position), devices, legacy=True)
        full = _run(_hookless_copy(model), layer, inputs, (target, position), devices, legacy=False)
    torch_warnings = _sort_warnings(caught)

    legacy_gi, legacy_go = legacy.grads[0] if legacy.grads else (None, None)
    full_gi, full_go = full.grads[0] if full.grads else (None, None)
    matches = legacy_gi is not None and full_gi is not None
    matches = matches and _same(legacy_gi, full_gi) and _same(legacy_go, full_go)
    result = BackwardComparison(
        layer=layer,
        legacy_grad_input=legacy_gi,
        full_grad_input=full_gi,
        legacy_grad_output=legacy_go,
        full_grad_output=full_go,
        legacy_node=legacy.node,
        matches=matches,
        legacy_slots=legacy.slots,
    )
    result.notes = _notes(result, legacy, full, torch_warnings)
    return result


@dataclass
class _Seen:
    """What one copy's hooks recorded: forward calls of the layer, backward grads, the legacy node."""

    calls: int = 0
    bad_output: type | None = None
    grads: list[tuple[Grads, Grads]] = field(default_factory=list)
    node: str | None = None
    slots: list[str] = field(default_factory=list)


def _run(
    model: nn.Module, layer: str, inputs: Inputs, target: tuple[Any, Any], devices: list[int], *, legacy: bool
) -> _Seen:
    """One forward and backward of a hook-free copy with one kind of backward hook on ``layer``."""
    module = model.get_submodule(layer)
    seen = _Seen()

    def on_forward(mod: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        seen.calls += 1
        if not _hookable(output):
            seen.bad_output = type(output)
        elif legacy:
            node = _legacy_node(output)
            seen.node = None if node is None else node.name()
            seen.slots = [] if node is None else [_describe_edge(fn, mod, model, args) for fn, _ in node.next_functions]

    def on_backward(mod: nn.Module, grad_input: Grads, grad_output: Grads) -> None:
        seen.grads.append((_detached(grad_input), _detached(grad_output)))

    handles = [module.register_forward_hook(on_forward)]
    try:
        handles.append(
            module.register_backward_hook(on_backward) if legacy else module.register_full_backward_hook(on_backward)
        )
        model.eval()
        # fork_rng gives both copies the caller's RNG state and hands it back unchanged afterwards
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            try:
                output = call_model(model, _fresh(inputs))
            except RuntimeError as exc:
                if legacy or not is_inplace_collision(exc):
                    raise
                # the comparison's own full backward hook met an in-place op: torch's error names neither
                where = inplace_culprit(exc, model)
                what = f"the in-place module {describe_path(where)}" if where is not None else "an in-place op"
                raise ValueError(
                    f"the full backward hook cannot run on {describe_path(layer)}: {what} modifies its output, and "
                    "torch forbids modifying in place the view it wraps a hooked output in. Compare on a module "
                    "whose output nothing modifies in place, or make that op out of place (inplace=False)"
                ) from exc
            if seen.calls == 0:
                raise ValueError(f"module {describe_path(layer)} did not run in the forward with these inputs")
            if seen.bad_output is not None:
                raise ValueError(
                    f"module {describe_path(layer)} returns a {seen.bad_output.__name__}; backward hooks can't fire "
                    "on a module whose output is not a tensor or a tuple of tensors, so there is nothing to compare "
                    "— pick one of its submodules instead"
                )
            loss = _score(output, *target, model)
            if not loss.requires_grad:
                raise ValueError(
                    "the score does not require grad, so no backward can run: no parameter before it requires grad "
                    "and neither do the inputs — pass inputs with requires_grad=True"
                )
            loss.backward()  # type: ignore[no-untyped-call]  # torch: Tensor.backward is unannotated
    finally:
        for handle in handles:
            handle.remove()
    return seen


def _hookless_copy(model: nn.Module) -> nn.Module:
    """A deep copy of ``model`` with no module hooks (torch's weight-computing pre-hooks aside) and no legacy flag.

    Hook objects are never copied (deepcopy would otherwise copy them, closures, registries and all: torch
    copies a module's hooks with it): the memo swaps each hook dict for a fresh one, and maps each hook to
    itself for the dicts that hold hooks of hookwidgets too (those reach the copy filtered into new dicts,
    which the memo cannot know).
    """
    memo: dict[int, Any] = {}
    for module in model.modules():
        for name in HOOK_DICTS:
            hooks = module.__dict__.get(name)
            if hooks is not None:
                memo[id(hooks)] = OrderedDict()
                memo.update((id(hook), hook) for hook in hooks.values() if not isinstance(hook, nn.Module))
    try:
        clone = copy.deepcopy(model, memo)
    except Exception as exc:
        raise RuntimeError(
            f"compare_backward runs on copies of the model, and copy.deepcopy of {type(model).__name__} failed: {exc}"
        ) from exc
    for original, module in zip(model.modules(), clone.modules(), strict=True):
        for name in HOOK_DICTS:
            if name in module.__dict__:
                kept = [(k, h) for k, h in getattr(original, name).items() if isinstance(h, _WEIGHT_PRE_HOOKS)]
                module.__dict__[name] = OrderedDict(kept if name == "_forward_pre_hooks" else [])
        set_full_backward_flag(module, None)
    return clone


def _notes(result: BackwardComparison, legacy: _Seen, full: _Seen, torch_warnings: dict[str, list[str]]) -> list[str]:
    """Plain sentences explaining what each hook reported and what torch warned about."""
    notes = []
    layer = describe_path(result.layer)
    if result.legacy_grad_input is None and result.full_grad_input is None:
        notes.append(
            f"neither hook fired: the output of {layer} does not require grad with these inputs, "
            "so no gradient flows through it"
        )
    if result.legacy_grad_input is not None:
        slots = _describe_grads(result.legacy_grad_input, legacy.slots)
        verdict = (
            "here the same as the module's input gradient"
            if result.matches
            else "not the module's input gradient: torch attaches a legacy hook to the last autograd op of the "
            "module's forward, so it sees the gradients of that op's inputs"
        )
        notes.append(f"the legacy hook reports the grads of {result.legacy_node}'s inputs: {slots} — {verdict}")
    if result.full_grad_input is not None:
        n = len(result.full_grad_input)
        inputs = _describe_grads(result.full_grad_input, ["input" if n == 1 else f"input[{i}]" for i in range(n)])
        notes.append(f"the full hook reports the gradient of each positional input of {layer}: {inputs or 'none'}")
        if result.full_grad_input and all(g is None for g in result.full_grad_input):
            said = torch_warnings["no_input_grad"]
            notes.append(
                f"no input of {layer} requires grad (as for a first layer fed a plain tensor), so the full hook "
                "fires with grad_input=(None,)"
                + (f"; torch warns: {said[0]!r}" if said else "")
                + "; pass the input with requires_grad=True to see its gradient"
            )
    notes.extend(f"torch warns about the legacy hook (suppressed here): {text!r}" for text in torch_warnings["legacy"])
    if len(legacy.grads) > 1 or len(full.grads) > 1:
        notes.append(
            f"{layer} ran {full.calls} times in the forward, so each hook fired per call; shown is the first to fire "
            "in backward, which belongs to the last call"
        )
    hooks = global_module_hooks()
    if any(hooks.get(kind) for kind in names(family="global", full_backward=True)):
        notes.append(
            "process-wide backward hooks (register_module_full_backward_hook) are registered and also run on the "
            "copies; they wrap module outputs, which can change the node the legacy hook attaches to"
        )
    return notes


def _sort_warnings(caught: list[warnings.WarningMessage]) -> dict[str, list[str]]:
    """The texts of torch's hook warnings by kind; any other warning is emitted again as if never caught."""
    found: dict[str, list[str]] = {"legacy": [], "no_input_grad": []}
    for w in caught:
        text = str(w.message)
        if issubclass(w.category, FutureWarning) and "non-full backward hook" in text:
            kind = "legacy"
        elif "no inputs require gradients" in text:
            kind = "no_input_grad"
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
            continue
        if text not in found[kind]:
            found[kind].append(text)
    return found


def _describe_grads(grads: Grads, labels: list[str]) -> str:
    """``"bias (3,), input (4, 3)"``: each slot's label and shape, or ``None`` where no grad came."""
    return ", ".join(f"{label} {_shape(g)}" for label, g in zip(labels, grads, strict=False))


def _legacy_node(output: Any) -> Any:
    """The node torch's legacy hook attaches to (``Module._call_impl``): the grad_fn of ``output[0][0]…``."""
    while isinstance(output, tuple) and output:
        output = output[0]
    return output.grad_fn if isinstance(output, torch.Tensor) else None


def _describe_edge(fn: Any, module: nn.Module, model: nn.Module, args: tuple[Any, ...]) -> str:
    """What a legacy grad_input slot is the gradient of: a parameter, the module input, or another node's output."""
    if fn is None:
        return "(a tensor that needs no grad)"
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    for i, arg in enumerate(inputs):
        if (arg.grad_fn is not None and fn is arg.grad_fn) or getattr(fn, "variable", None) is arg:
            return "input" if len(inputs) == 1 else f"input[{i}]"
    param = _param_name(getattr(fn, "variable", None), module, model)
    if param is not None:
        return param
    nexts = [n for n, _ in fn.next_functions if n is not None]
    if len(nexts) == 1:
        param = _param_name(getattr(nexts[0], "variable", None), module, model)
        if param is not None:
            return f"{param}.T" if fn.name() == "TBackward0" else f"{param} through {fn.name()}"
    return f"{fn.name()} output"


def _param_name(tensor: torch.Tensor | None, module: nn.Module, model: nn.Module) -> str | None:
    """The parameter's name relative to ``module``, else its path in ``model``."""
    if tensor is None:
        return None
    for owner in (module, model):
        for name, param in owner.named_parameters():
            if param is tensor:
                return name
    return None


def _score(output: Any, target: Any, position: int | None, model: nn.Module) -> torch.Tensor:
    """The scalar to backpropagate: ``target`` as in ``Explorer.run``, by default the sum of the first tensor
    (at any depth of tuples, lists, mappings and dataclasses)."""
    if target is not None:
        return resolve_score(output, target, position, model=model)[0]
    if position is not None:
        raise ValueError(f"position={position} picks where a target reads the output: pass target= as well")
    first = first_tensor(output)
    if first is None:
        raise ValueError(
            f"the model returned a {type(output).__name__} with no tensor to sum; "
            "pass target=lambda out: ... returning a scalar tensor"
        )
    return first.sum()


def _hookable(output: Any) -> bool:
    """Whether full backward hooks can fire on this output: a tensor or a tuple holding one (torch skips others)."""
    return isinstance(output, torch.Tensor) or (
        isinstance(output, tuple) and any(isinstance(t, torch.Tensor) for t in output)
    )


def _fresh(inputs: Any) -> Any:
    """Detached copies of the input tensors keeping each one's requires_grad, so the caller's get no ``.grad``; the
    containers keep their types (a tokenizer's ``BatchEncoding`` stays one)."""
    return map_tensors(inputs, lambda t: t.detach().clone().requires_grad_(t.requires_grad))


def _cuda_devices(model: nn.Module, inputs: Any) -> list[int]:
    """CUDA devices whose RNG the runs may use, so fork_rng forks exactly those."""
    tensors = [*model.parameters(), *model.buffers()]
    stack = [inputs]
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            tensors.append(value)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, (tuple, list)):
            stack.extend(value)
    return sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})


def _detached(grads: Grads) -> Grads:
    return tuple(None if g is None else g.detach().clone() for g in grads)


def _same(a: Grads | None, b: Grads | None) -> bool:
    if a is None or b is None or len(a) != len(b):
        return a is None and b is None
    for x, y in zip(a, b, strict=True):
        if (x is None) != (y is None):
            return False
        if x is not None and y is not None and (x.shape != y.shape or not torch.allclose(x, y, rtol=_RTOL, atol=_ATOL)):
            return False
    return True


def _shape(g: torch.Tensor | None) -> tuple[int, ...] | None:
    return None if g is None else tuple(g.shape)


def _max_abs_diff(a: torch.Tensor | None, b: torch.Tensor | None) -> float | None:
    if a is None or b is None or a.shape != b.shape:
        return None
    return float((a - b).abs().max()) if a.numel() else 0.0
