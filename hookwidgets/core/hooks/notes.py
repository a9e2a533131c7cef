"""Notes on hooks, in one place: every kind of note a hook can carry, which one it shows, and the one way to set one.

A hook keeps at most one note of each kind (``NoteKind``); ``add`` sets one, ``drop`` takes one back, and neither
touches a note of another kind. ``HookInfo.note`` shows the kind of highest precedence, followed by the short-step
note (a capture budget that holds less than one step), which is said beside any other. The texts of the notes the
engine writes while it registers and fires hooks are here too; a note made from facts of another layer (an alias, an
attention implementation) takes its text from there.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, Protocol

import torch
from torch import nn

from .. import kind_table
from ..capture.store import CaptureStore
from ..display import display_name, quoted
from ..model.compiled import is_compiled
from ..model.nested import is_dataclass_value, tensors_in


class NoteKind(enum.IntEnum):
    """The kinds of note, lowest precedence first: a hook with several shows the last one's."""

    ALIAS = enum.auto()
    """Attached under another path to the same object (``model/paths.py``)."""
    HIDDEN_PROBABILITIES = enum.auto()
    """An attention implementation that computes no probabilities (``model/attention_sources.py``)."""
    META_STATS = enum.auto()
    """Statistics of a tensor on the meta device, which holds no values (``actions.py``)."""
    FSDP_PARAM = enum.auto()
    """A gradient hook on a parameter FSDP2 shards: which gradient it sees, and when (``sharded_params.py``)."""
    LOCAL_SHARD = enum.auto()
    """Statistics of a DTensor's local shard only: their reduction across ranks needs ``collective=True``
    (``actions.py``)."""
    STEP_NOT_ARMED = enum.auto()
    """The model's last forward needed no grad: no gradient comes back through it."""
    NOT_RUN = enum.auto()
    """The module did not run in the example forward; goes once the hook fires."""
    UNCHECKED = enum.auto()
    """attach()'s check by a forward was skipped on a model sharded across ranks (``model/distributed.py``); goes
    once the hook fires."""
    CANNOT_FIRE = enum.auto()
    """The hook can never fire there: a torch.fx graph never calls the module, a parameter on the meta device."""
    COMPILED = enum.auto()
    """A compiled model may ignore a hook attached after its first compiled call; goes once the hook fires."""
    REFUSED = enum.auto()
    """A model-wide hook that torch refused on some modules (``model_wide.py``)."""
    NODE_MISSING = enum.auto()
    """An autograd node hook whose id the latest forward's graph lacked (``node_hooks.py``)."""
    GRAD_NOT_ARMED = enum.auto()
    """A ``grad`` hook's call gave no output tensor that requires grad."""
    BACKWARD_OUTPUT = enum.auto()
    """A full backward hook whose module's output torch cannot hook (a dict), or that ran without grad."""
    INPUT_GRAD = enum.auto()
    """A full backward hook whose ``grad_input`` was all None or empty."""
    PATCH_SKIPPED = enum.auto()
    """A patch left out of a generation's decode steps (``dispatch.py``)."""
    STOPPED = enum.auto()
    """No gradient can come: every path to the score passes a module that passes none (``stop_notes.py``)."""
    GIVEN = enum.auto()
    """Set by hand (``info.note = text``)."""
    SHORT_STEPS = enum.auto()
    """The capture budget holds less than one step: shown beside the note of highest precedence, not instead."""


UNTIL_FIRED = (NoteKind.NOT_RUN, NoteKind.UNCHECKED, NoteKind.COMPILED)
"""The kinds of note that say why a hook may not fire: they go when it fires."""


class Notes:
    """The notes of one hook, by kind."""

    __slots__ = ("_by_kind",)

    def __init__(self) -> None:
        self._by_kind: dict[NoteKind, str] = {}

    @property
    def text(self) -> str | None:
        """The note shown: the one of highest precedence, then the short-step note; None without notes."""
        by_kind = self._by_kind.copy()  # one snapshot: firings on other threads may add notes meanwhile
        if not by_kind:
            return None
        short = by_kind.get(NoteKind.SHORT_STEPS)
        main = [by_kind[kind] for kind in sorted(by_kind) if kind is not NoteKind.SHORT_STEPS]
        parts = [part for part in (main[-1] if main else None, short) if part]
        return "; ".join(parts) or None

    def set_text(self, text: str | None) -> None:
        """``info.note = text``: the note given by hand replaces every other, and stays until set again."""
        self._by_kind = {NoteKind.GIVEN: text} if text else {}

    def has(self, kind: NoteKind) -> bool:
        return kind in self._by_kind


class _Noted(Protocol):
    _notes: Notes


def add(info: _Noted, text: str | None, kind: NoteKind) -> None:
    """Give ``info`` the note ``text`` of ``kind``, in place of its earlier note of that kind (None: drop it)."""
    if text:
        info._notes._by_kind[kind] = text
    else:
        drop(info, kind)


def drop(info: _Noted, *kinds: NoteKind) -> None:
    """Take back ``info``'s notes of ``kinds``; its notes of other kinds stay."""
    by_kind = info._notes._by_kind
    for kind in kinds:
        by_kind.pop(kind, None)


def has(info: _Noted, kind: NoteKind) -> bool:
    """Whether ``info`` holds a note of ``kind``."""
    return info._notes.has(kind)


def fired(info: _Noted) -> None:
    """``info`` fired (for the first time): the notes saying it may not fire go."""
    drop(info, *UNTIL_FIRED)


# --- Notes a whole step puts on hooks --------------------------------------------------------------------------------


def note_short_steps(hooks: Iterable[Any], store: CaptureStore) -> None:
    """Say on each hook whose records the store evicted before their own step ended that the budget holds less
    than one step (a global kind: naming the modules); drop the note once a later step was kept whole."""
    short = store.short_steps()
    for info in hooks:
        note = short.get((info.path, info.kind))
        if kind_table.has(info.spec, family="global"):  # its records are each module's
            modules = [path for path, kind in short if kind == info.kind]
            more = f" and {len(modules) - 1} more modules" if len(modules) > 1 else ""
            note = f"{short[(modules[0], info.kind)]} (on {quoted(modules[0] or '(model)')}{more})" if modules else None
        add(info, note, NoteKind.SHORT_STEPS)


def note_armed(hooks: Iterable[Any], output: Any) -> None:
    """Say "not armed" on ``hooks`` (of the kinds a step arms: ``Kind.armed_by_step``) after a forward whose
    ``output`` needs no grad (under no_grad or inference_mode, or nothing upstream requires grad); drop it after one
    that does."""
    if torch.is_grad_enabled():
        tensors = tensors_in(output)
        if not tensors:
            return  # no output tensor to tell (a forward that runs its own backward): the notes stay
        armed = any(t.requires_grad for t in tensors)
    else:
        armed = False
    for info in hooks:
        add(info, None if armed else STEP_NOT_ARMED, NoteKind.STEP_NOT_ARMED)


# --- The texts ---------------------------------------------------------------------------------------------------

NOT_RUN = "did not run in the example forward"
"""How ``not_run_note`` begins."""


def unchecked_note(why: str) -> str:
    """What attach() could not check on a model sharded across ranks (``why``: the skip, with the fix)."""
    return f"not checked by a forward at attach (an in-place op breaking it, its edit's fit, a node id): {why}"


def not_run_note(path: str, module: nn.Module) -> str:
    """Why module hooks on a module the model never calls will not fire, and what to hook instead."""
    return (
        f"{quoted(path)} ({display_name(type(module).__name__)}) {NOT_RUN}: its parent never calls it (it may use "
        "its parameters directly, as MultiheadAttention does with out_proj, or hold modules it runs itself, as a "
        "ModuleDict does), so its module hooks will not fire there; hook the module that calls it, or its parameters "
        "(kind 'grad')"
    )


def graph_skips_note(path: str, module: nn.Module, owner: str) -> str:
    """Why module hooks on a module that a torch.fx GraphModule (at ``owner``) never calls cannot fire."""
    return (
        f"{quoted(path)} ({display_name(type(module).__name__)}) is never called: {quoted(owner or '(model)')} "
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


def meta_param_note(path: str, swapped: bool) -> str:
    """Why gradient hooks on a parameter held on the meta device do not fire; ``swapped``: the example forward
    showed its module computing with another tensor in its place."""
    scope, _, attr = path.rpartition(".")
    node = quoted(f"{scope}/AccumulateGrad#{attr}")
    if swapped:
        return (
            f"{quoted(path)} is a placeholder on the meta device between calls: in the example forward its module "
            "computed with another tensor in its place (an offload hook, such as accelerate's cpu_offload or "
            "dispatch_model with offloaded weights, swaps the weight in for each call and puts a placeholder back "
            f"after it), so gradient hooks on the placeholder never fire; attach kind 'node' to {node} instead, the "
            "node that accumulates the weight's gradient (ex.graph() names it after the parameter)"
        )
    return (
        f"{quoted(path)} is on the meta device, which holds no values: a forward computes with another tensor in "
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
"""The note of a global backward or parameter hook after such a forward; the next forward with grad drops it."""
GRAD_NOT_ARMED = (
    "not armed: no output tensor required grad (forward under torch.no_grad / inference_mode, "
    "or nothing upstream requires grad), so no gradient will come for this call"
)
"""The note of a ``grad`` hook after a call of its module whose outputs need no grad."""


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


def input_grad_note(path: str, grad_input: tuple[Any, ...], edited: bool) -> str:
    """Why a full backward hook got no input gradient (``grad_input`` all None, or empty), and whether its edit
    of grad_input was lost (``edited``)."""
    if not grad_input:  # torch gives one entry per positional argument: there was none
        return keyword_inputs_note(path, edited)
    return NO_INPUT_GRAD if edited else no_input_grad_note(path)


CANNOT_FIRE = "full backward hooks cannot fire on it"
"""In the note of a full backward hook on a module whose output torch's full backward hooks skip."""


def backward_output_note(kind: str, output: object) -> str | None:
    """Why a full backward hook cannot fire for this output, or None when it can."""
    what = _unhookable_output(output)
    if what is not None:
        used = (
            "'grad' tensor hooks on its tensors record grad_output instead"
            if kind_table.has(kind, pre=True)
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
