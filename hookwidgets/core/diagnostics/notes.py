"""Why a hook did not fire, or broke a forward: the known pitfalls, recognised and explained."""

from __future__ import annotations

import types
from typing import Any

import torch
from torch import nn

from ..display import display_name, quoted
from ..kind_table import has
from ..model.compiled import is_compiled
from ..model.nested import is_dataclass_value, output_tensors

_INPLACE_VIEW_ERROR = "BackwardHookFunction is a view and is being modified inplace"

NOT_RUN = "did not run in the example forward"
"""How ``not_run_note`` begins: the note goes once the hook fires."""


def not_run_note(target: str, module: nn.Module) -> str:
    """Why module hooks on a module the model never calls will not fire, and what to hook instead."""
    return (
        f"{quoted(target)} ({display_name(type(module).__name__)}) {NOT_RUN}: its parent never calls it (it may use "
        "its parameters directly, as MultiheadAttention does with out_proj, or hold modules it runs itself, as a "
        "ModuleDict does), so its module hooks will not fire there; hook the module that calls it, or its parameters "
        "(kind 'grad')"
    )


def graph_skips_note(target: str, module: nn.Module, owner: str) -> str:
    """Why module hooks on a module that a torch.fx GraphModule (at ``owner``) never calls cannot fire."""
    return (
        f"{quoted(target)} ({display_name(type(module).__name__)}) is never called: {quoted(owner or '(model)')} "
        "is a torch.fx GraphModule (as torch.export's ExportedProgram.module() is) whose graph calls neither it nor a "
        "module around it (no call_module node): the graph reads its parameters (get_attr) and runs their ops itself, "
        "so module hooks on it never fire; hook its parameters (kind 'grad'), an autograd node of ex.graph(), or the "
        "modules of torch.export.unflatten(program), which keeps them as modules that are called"
    )


def graph_skips_global_note(skipped: dict[str, str]) -> str:
    """Which modules a model-wide hook never fires on because a torch.fx GraphModule's graph never calls them."""
    names = ", ".join(quoted(path) for path in list(skipped)[:5]) + (", …" if len(skipped) > 5 else "")
    owners = ", ".join(sorted({quoted(owner or "(model)") for owner in skipped.values()}))
    return (
        f"never fires on {len(skipped)} module(s) ({names}): the torch.fx GraphModule {owners} (as torch.export's "
        "ExportedProgram.module() is) runs their ops in its graph and never calls them (no call_module node); hook "
        "parameters (kind 'grad'), autograd nodes of ex.graph(), or explore torch.export.unflatten(program)"
    )


def meta_param_note(target: str, swapped: bool) -> str:
    """Why gradient hooks on a parameter held on the meta device do not fire; ``swapped``: the example forward
    showed its module computing with another tensor in its place."""
    scope, _, attr = target.rpartition(".")
    node = quoted(f"{scope}/AccumulateGrad#{attr}")
    if swapped:
        return (
            f"{quoted(target)} is a placeholder on the meta device between calls: in the example forward its module "
            "computed with another tensor in its place (an offload hook, such as accelerate's cpu_offload or "
            "dispatch_model with offloaded weights, swaps the weight in for each call and puts a placeholder back "
            f"after it), so gradient hooks on the placeholder never fire; attach kind 'node' to {node} instead, the "
            "node that accumulates the weight's gradient (ex.graph() names it after the parameter)"
        )
    return (
        f"{quoted(target)} is on the meta device, which holds no values: a forward computes with another tensor in "
        "its place when an offload hook (accelerate's) swaps the weight in for each call, and with none when the "
        "weights were never loaded (accelerate.init_empty_weights()), so gradient hooks on it do not fire; for an "
        f"offloaded model attach kind 'node' to {node} instead, for an empty one load its weights first"
    )


NOT_ARMED = (
    "not armed: the forward ran without grad (torch.no_grad / inference_mode, or nothing upstream "
    "requires grad), so backward hooks cannot fire for this call"
)
STEP_NOT_ARMED = (
    "not armed: the model's last forward ran without grad (torch.no_grad / inference_mode, or nothing upstream "
    "requires grad), so no gradient comes back through it to this hook"
)
"""The note of a global backward or parameter hook after such a forward; the next forward with grad clears it."""


NO_INPUT_GRAD = (
    "the edit had no effect: no input of this module requires grad (e.g. the first layer), and torch "
    "refuses a changed grad_input there; edit 'grad' or 'backward_pre' on it instead"
)


def no_input_grad_note(path: str) -> str:
    """Why a full backward hook's grad_input is all None: none of the module's inputs requires grad."""
    return (
        f"grad_input of {quoted(path or '(model)')} is all None: none of its inputs requires grad (e.g. the first "
        "layer), so only grad_output is recorded; pass inputs with requires_grad=True to see input gradients"
    )


def keyword_inputs_note(path: str, edited: bool) -> str:
    """Why a full backward hook's grad_input is empty: the module got no positional argument, and torch leaves
    tensors passed by keyword out of grad_input (whether they require grad or not)."""
    name = path or "(model)"
    cause = (
        f"{name!r} was called with no positional argument, and torch leaves tensors passed by keyword "
        "(module(x=t)) out of grad_input"
    )
    if edited:
        return (
            f"the edit had no effect: {cause}, so there is nothing to change; pass the tensor positionally, "
            "or edit 'grad' or 'backward_pre' on the module that produces it"
        )
    return (
        f"grad_input of {name!r} is empty: {cause}, so only grad_output is recorded; pass the tensor "
        "positionally, or attach 'grad' or 'backward_pre' to the module that produces it (its grad_output is "
        "this input's gradient)"
    )


def input_grad_note(path: str, grad_input: tuple, edited: bool) -> str:
    """Why a full backward hook got no input gradient (``grad_input`` all None, or empty), and whether its edit
    of grad_input was lost (``edited``)."""
    if not grad_input:  # torch gives one entry per positional argument: there was none
        return keyword_inputs_note(path, edited)
    return NO_INPUT_GRAD if edited else no_input_grad_note(path)


def is_inplace_collision(exc: BaseException | None) -> bool:
    """True for torch's error when an in-place op modifies the output a full backward hook wrapped."""
    return isinstance(exc, RuntimeError) and _INPLACE_VIEW_ERROR in str(exc)


def is_inplace_collision_text(error: str | None) -> bool:
    """``is_inplace_collision`` for an error kept as text (a recorded graph's ``"error"``)."""
    return error is not None and _INPLACE_VIEW_ERROR in error


def inplace_culprit(exc: BaseException, model: nn.Module) -> str | None:
    """Path of the innermost module of ``model`` running when ``exc`` was raised (the in-place one)."""
    paths = {id(m): p for p, m in model.named_modules()}
    culprit = None
    tb: types.TracebackType | None = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, nn.Module) and id(owner) in paths:
            culprit = paths[id(owner)]
        tb = tb.tb_next
    return culprit


def modified_view(exc: BaseException) -> torch.Tensor | None:
    """The tensor the in-place op of a collision tried to modify, when the traceback shows it for sure: the one
    view a full backward hook's ``BackwardHookFunction`` made (its ``_base`` is the hooked module's output)
    among the locals of the innermost frame, a function such as ``F.relu(input, inplace=True)``.

    None when that frame is a module's own code (``out.add_(x)`` in a forward: the tensor modified may be a
    temporary, and another local a view of some other hooked output) or holds no such view, or several.
    """
    tb: types.TracebackType | None = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    local_values = tb.tb_frame.f_locals.values()
    if any(isinstance(value, nn.Module) for value in local_values):
        return None
    views = [
        value
        for value in local_values
        if isinstance(value, torch.Tensor) and type(value.grad_fn).__name__ == "BackwardHookFunctionBackward"
    ]
    return views[0] if len(views) == 1 else None


def explain_foreign_collision(culprit: str | None, model: nn.Module, hooks: list[tuple[str, str, str]]) -> str:
    """What went wrong when an in-place op met a full backward hook that the explorer did not attach."""
    where, fix = _where_and_fix(culprit, model)
    owners = ", ".join(f"{kind} {display_name(name)} on {quoted(target or '(model)')}" for target, kind, name in hooks)
    whose = f" ({owners})" if owners else ""
    return (
        f"{where} modifies the output of a module with a full backward hook that the explorer did not "
        f"attach{whose}: torch wraps the hooked module's output in a view for the backward hook, and modifying "
        "that view in place makes the forward raise. The explorer leaves hooks others attached alone: remove "
        f"that hook (its handle's .remove()), register a tensor hook instead, or {fix}."
    )


def _where_and_fix(culprit: str | None, model: nn.Module) -> tuple[str, str]:
    """The in-place module as words, and how to make it out of place."""
    where, fix = "an in-place op", "make the in-place op out of place"
    if culprit is not None:
        module = model.get_submodule(culprit)
        where = f"the in-place module {quoted(culprit)} ({display_name(type(module).__name__)})"
        if hasattr(module, "inplace"):
            fix = f"set model.get_submodule({quoted(culprit)}).inplace = False"
    return where, fix


def explain_collision(kind: str, target: str, culprit: str | None, model: nn.Module) -> str:
    """What went wrong when a full backward hook met an in-place op, and the two ways out."""
    where, fix = _where_and_fix(culprit, model)
    return (
        f"the full backward hook {kind!r} on {quoted(target)} collides with {where}: torch wraps the hooked "
        "module's output in a view for the backward hook, and modifying that view in place makes the "
        f"forward raise. The hook was detached so the next forward works. Attach 'grad' instead (tensor "
        f"hooks are robust to in-place ops), or {fix}."
    )


CANNOT_FIRE = "full backward hooks cannot fire on it"
"""In the note of a full backward hook on a module whose output torch's full backward hooks skip."""


def backward_output_note(kind: str, output: object) -> str | None:
    """Why a full backward hook cannot fire for this output, or None when it can."""
    what = _unhookable_output(output)
    if what is not None:
        used = (
            "'grad' tensor hooks on its tensors record grad_output instead"
            if has(kind, pre=True)
            else "attach 'grad' to record the output gradients"
        )
        return f"output is {what}: {CANNOT_FIRE} (torch needs a Tensor or a tuple); {used}"
    if not torch.is_grad_enabled():
        return NOT_ARMED
    return None


def _unhookable_output(output: object) -> str | None:
    """``"a dict"``, ``"a dataclass (Name)"``, ``"a list"``... for an output torch's full backward hooks skip (neither a
    Tensor nor a tuple), else None."""
    if isinstance(output, dict):  # before dataclasses: HF's ModelOutput is both, and reads as a dict
        return "a dict"
    if is_dataclass_value(output):
        return f"a dataclass ({display_name(type(output).__name__)})"
    if output is None:
        return "None"
    if not isinstance(output, (torch.Tensor, tuple)):
        return f"a {display_name(type(output).__name__)}"
    return None


SCRIPTED_ROOT = (
    "the model is a torch.jit.script module: ScriptModules take no hooks, so no module shows a shape or "
    "fires a hook; explore the model before scripting it"
)


def unwatched_note(unwatched: list[str]) -> str | None:
    """Which torch.jit.script modules the explorer cannot watch (they take no hooks); None when there are none."""
    if not unwatched:
        return None
    if "" in unwatched:
        return SCRIPTED_ROOT
    names = ", ".join(quoted(path) for path in unwatched)
    theirs = "its" if len(unwatched) == 1 else "their"
    return f"torch.jit.script modules take no hooks: {names} (and {theirs} submodules) show no shape and fire no hooks"


COMPILED = (
    "the model is compiled: hooks added after its first compiled call do not fire unless "
    "torch._dynamo.config.skip_nnmodule_hook_guards = False (then it recompiles once); "
    "attach hooks before compiling, or explore the uncompiled module"
)
"""The warning of attach() on a compiled model."""

NOT_FIRED = "not fired since it was attached"
"""How the note of a hook on a compiled model begins: it goes once the hook fires."""


def compiled_note(model: nn.Module) -> str | None:
    """The note of a hook just attached to a compiled model, which may ignore it; None for a model not compiled."""
    return f"{NOT_FIRED}, and {COMPILED}" if is_compiled(model) else None


def note_until_fired(note: str) -> bool:
    """Whether ``note`` says why a hook may not fire (never run in the example forward, compiled model): it
    stops being true when the hook fires."""
    return NOT_RUN in note or note.startswith(NOT_FIRED)


def no_graph_reason(model: nn.Module, output: Any, grad_mode: tuple[bool, bool], inputs_grad: bool) -> str:
    """Why a forward left no autograd graph, and what to do about it."""
    name = display_name(type(model).__name__)
    grad_enabled, inference = grad_mode
    if inference:
        return f"no graph: {name} ran under torch.inference_mode(), so autograd recorded nothing; run it outside"
    if not grad_enabled:
        return (
            f"no graph: {name} ran with grad disabled (torch.no_grad()), so autograd recorded nothing; "
            "run it under torch.enable_grad()"
        )
    tensors = output_tensors(output)
    if not tensors:
        return f"no graph: the output of {name} holds no tensor (got {type(output).__name__}); return tensors"
    if any(t.requires_grad for t in tensors):  # requires grad without a grad_fn: a leaf returned as is
        return (
            f"no graph: {name} returned leaf tensors (a parameter or an input, as is), which have no grad_fn: "
            "no op of the forward lies between them and the output"
        )
    if not inputs_grad and not any(p.requires_grad for p in model.parameters()):
        return (
            f"no graph: nothing in {name}'s forward requires grad (no parameter has requires_grad=True, "
            "and no tensor argument does); call model.requires_grad_() or pass an input with requires_grad=True"
        )
    if not any(t.is_floating_point() or t.is_complex() for t in tensors):
        dtypes = ", ".join(sorted({str(t.dtype).removeprefix("torch.") for t in tensors}))
        return (
            f"no graph: {name} returned only {dtypes} tensors (argmax, a comparison or a cast), which carry no "
            "gradient; return the floating-point scores to see their graph"
        )
    return (
        f"no graph: no output tensor of {name} has a grad_fn although its parameters require grad: the forward "
        "detached its outputs (.detach(), .data, a NumPy round trip) or made them under torch.no_grad() inside"
    )
