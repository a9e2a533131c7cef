"""Plain-data payloads of the view's traitlets: pure functions of a headless Explorer's public state."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import torch
from torch.nn.parameter import is_lazy

from ..core.capture.export import plain_number
from ..core.codegen.generate import hook_code
from ..core.display import display_name, quoted
from ..core.explorer import Explorer
from ..core.hooks.edit_notes import edit_labels
from ..core.hooks.kinds import valid_kinds
from ..core.hooks.registry import HookInfo
from ..core.kind_table import KINDS
from ..core.model.lazy import unmaterialized_param
from ..core.model.paths import resolve_path
from ..core.model.scores import output_summary
from ..core.model.tree import SCRIPTED_ROOT
from .attribution_methods import method_words, methods_note, offered_methods
from .edit_choices import NO_OFFERS, edit_offers
from .protocol import HookItem, HookKind, Memory, OutputScores, ParamChip, Selection, Status


def kinds_payload() -> list[HookKind]:
    """The ``hook_kinds`` traitlet: the kind table's rows in display order, with what the page shows of each (its
    tooltip and badge), which ones "Stats on every layer" attaches and which the inspector offers first (``common``):
    the page keeps no list of kinds of its own."""
    return [
        {
            "kind": k.user_name,
            "name": k.name,
            "family": k.family,
            "phase": k.phase,
            "tip": k.tip,
            "badge": k.badge,
            "every_layer": k.every_layer,
            "common": k.common,
        }
        for k in KINDS.values()
    ]


def hooks_payload(hooks: Iterable[HookInfo]) -> list[HookItem]:
    """The ``hooks`` traitlet: the explorer's hooks, then hooks others attached (``foreign``); each edit named as
    ``Explorer.edits`` names it (``edit_label``), for its badge and the run bar."""
    return [
        _plain_hook({**info.as_dict(), "steps": info.steps, "edit_label": "".join(edit_labels([info]))})
        for info in hooks
    ]


def _plain_hook(hook: dict[str, Any]) -> HookItem:
    # ("clip", inf) is a valid edit: a bound of inf must not reach the page as a bare Infinity.
    plain = {**hook, "edit": [[plain_number(arg) for arg in edit] for edit in hook["edit"]]}
    return cast(HookItem, plain)  # HookInfo.as_dict() holds HookItem's fields


def status_payload(
    state: str,
    message: str,
    top: Iterable[tuple[int, float]] | Iterable[list[Any]],
    output: dict[str, Any] | None = None,
    *,
    cell: bool = False,
    step: int = 0,
    failed: str | None = None,
) -> Status:
    """The ``status`` traitlet: idle, busy, live or error, what the latest action did, the classes or next tokens the
    run bar and the attribution offer (``[index, probability]``, NaN as ``"nan"``), and what the model's output
    offers a backward (``output``: ``Explorer.probe_output`` without its ``top``; kind ``none`` when unknown).

    ``cell``: a notebook cell is running (the page's clicks wait for it); ``step``: the explorer's step, which views
    drawn earlier compare theirs with; ``failed``: the module the latest Run failed in, marked in the tree.
    """
    summary = output_summary(None) if output is None else output
    return {
        "state": state,
        "message": message,
        "top": [[int(c), plain_number(p)] for c, p in top],
        "output": cast(OutputScores, {key: summary[key] for key in OUTPUT_FIELDS}),  # output_summary's fields
        "cell": cell,
        "step": step,
        "failed": failed,
    }


OUTPUT_FIELDS = ("kind", "tensor", "shape", "words", "positions", "decoder", "loss", "labels", "probe_failed")


def memory_payload(explorer: Explorer) -> Memory:
    """The ``memory`` traitlet: what the capture store holds against its budget, whether it is full (``evicting``),
    and ``short_steps``, the hooks whose records went before their own step ended (``{"path", "kind", "note"}``)."""
    summary = explorer.captures.summary()
    return {
        "bytes": summary["nbytes"],
        "budget": summary["budget"],
        "records": summary["records"],
        "evicted": summary["evicted"],
        "evicting": summary["evicting"],
        "short_steps": [{"path": s["path"], "kind": s["kind"], "note": s["note"]} for s in summary["short_steps"]],
    }


def selection_payload(explorer: Explorer, path: str) -> Selection:
    """The ``selection`` traitlet: what ``path`` is, the hook kinds valid there, details and code."""
    if isinstance(explorer.model, torch.jit.ScriptModule):  # torch refuses even get_submodule there: no kinds
        return _nothing_at(path, SCRIPTED_ROOT)
    try:
        family, obj = resolve_path(explorer.model, path)
    except (KeyError, TypeError) as exc:
        return _nothing_at(path, _text(exc))
    kinds = list(valid_kinds(family, is_root=path == ""))
    problem = _scripted_problem(explorer, path, obj) if family == "module" else ""
    if family == "param" and isinstance(obj, torch.Tensor) and is_lazy(obj):
        problem = unmaterialized_param(path)
    if problem:
        kinds = []  # every kind would fail on it; a module's parameters' chips still lead to theirs
    details: list[list[str]] = []
    params: list[ParamChip] = []
    if family == "module" and isinstance(obj, torch.nn.Module):
        details.append(["Class", display_name(type(obj).__name__)])
        for name, param in obj.named_parameters(recurse=False):
            chip = f"{path}.{name}" if path else name
            params.append({"name": name, "path": chip, "shape": _shape(param), "trainable": param.requires_grad})
    elif family == "param" and isinstance(obj, torch.Tensor):
        shape = _shape(obj)
        details += [
            ["Shape", UNINITIALIZED if shape is None else "×".join(map(str, shape)) or "scalar"],
            ["Dtype", str(obj.dtype).removeprefix("torch.")],
            ["Trainable", "yes" if obj.requires_grad else "no (requires_grad=False: no gradient hooks fire)"],
        ]
    else:
        details += _node_details(explorer, path)
    own = [h for h in explorer.hooks if h.path == path and not h.foreign]
    code = hook_code(own, model=explorer.model) if own else ""
    methods = offered_methods(explorer, path) if family == "module" else []
    module = obj if family == "module" and isinstance(obj, torch.nn.Module) else None
    offers = edit_offers(explorer, path, module) if module is not None and kinds else NO_OFFERS
    return {
        "path": path,
        "family": family,
        "kinds": kinds,
        "details": details,
        "params": params,
        "code": code,
        "problem": problem,
        **offers,
        "attribution_methods": methods,
        "attribution_words": method_words(methods),
        "attribution_note": methods_note(explorer, path, methods) if family == "module" else "",
    }


def _nothing_at(path: str, problem: str) -> Selection:
    """The selection of a path that takes no hook, and why."""
    return {
        "path": path,
        "family": "none",
        "kinds": [],
        "details": [],
        "params": [],
        "code": "",
        "problem": problem,
        **NO_OFFERS,
        "attribution_methods": [],
        "attribution_words": {},
        "attribution_note": "",
    }


UNINITIALIZED = "not materialized yet (a lazy module's parameter: the model's first forward gives its shape)"


def _shape(param: torch.Tensor) -> list[int] | None:
    """The parameter's shape; None for a lazy module's parameter not materialized yet (torch raises on its shape)."""
    return None if is_lazy(param) else list(param.shape)


def _scripted_problem(explorer: Explorer, path: str, module: Any) -> str:
    """Why the module at ``path`` takes no hooks when it is, or is inside, a torch.jit.script module; else ""."""
    outer = next((p for p in explorer.unwatched if p == "" or path == p or path.startswith(p + ".")), None)
    if outer is None and not isinstance(module, torch.jit.ScriptModule):
        return ""
    where = (
        "is a torch.jit.script module"
        if outer in (None, path)
        else f"is inside the torch.jit.script module {quoted(outer)}"
    )
    return (
        f"module {quoted(path)} {where}: ScriptModules take no hooks; hook a module around it, or its parameters "
        "(kind 'grad'), or explore it before scripting"
    )


def _node_details(explorer: Explorer, node_id: str) -> list[list[str]]:
    """Op, module and saved tensors of an autograd node of the recorded graph."""
    data = explorer.recorded_graph
    node = next((n for n in data["nodes"] if n["id"] == node_id), None) if data else None
    if node is None:
        return [["Node", "not in the recorded graph: its hook is placed when a forward makes it"]]
    rows = [["Op", node["op"]], ["Module", display_name(node["module"] or "(model)")]]
    if node["param"]:
        rows.append(["Parameter", display_name(node["param"])])
    saved = node.get("saved") or []
    if saved:
        total = sum(s["bytes"] for s in saved if s.get("alias") is None)
        names = ", ".join(f"{s['name']} {'×'.join(map(str, s['shape']))}" for s in saved)
        rows.append(["Saved", f"{names} ({total:,} bytes of its own)"])
    return rows


def _text(exc: BaseException) -> str:
    """An exception's message without the quotes KeyError adds."""
    return exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
