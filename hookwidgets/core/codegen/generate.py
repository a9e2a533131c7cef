"""Plain-torch Python source that registers the same hooks as the explorer, for use without hookwidgets."""

from __future__ import annotations

import dataclasses
import keyword

from torch import nn

from ..display import display_name, quoted
from ..hooks.info import HeadPlan
from ..hooks.kinds import GLOBAL_KINDS, NODE_KINDS, takes_kwargs
from ..hooks.notes import CANNOT_FIRE
from ..hooks.registry import HookInfo
from ..hooks.tensor_edits import PRIMARY
from ..kind_table import KINDS, has
from ..model.paths import resolve_path
from ..model.scope import parse_node_id
from .fragments import (
    DICT_OUTPUT_NOTE,
    EDITABLE,
    GLOBAL_BACKWARD_SKIP,
    GLOBAL_REGISTER,
    GRAD_NOTE,
    HEADER,
    LEGACY_NOTE,
    MODULE_REGISTER,
    NODE_NOTE,
    NODE_REGISTER,
    PATCHES,
    PLACEHOLDER,
    SCOPE_HOOKS,
    TENSORS,
)
from .literals import Expression, comment, identifier, literal, quote
from .sections import edit_section, section

# Names the generated code defines itself; the model variable and hook functions must not shadow them.
RESERVED = {
    "torch",
    "dataclasses",
    "defaultdict",
    "captures",
    "handles",
    "kept",
    "paths",
    "_named",
    "_edit",
    "_edit_tensor",
    "_stats",
    "_print",
    "_on_dict_output",
    # the op-node helpers (templates/op_nodes.py)
    "bisect",
    "warnings",
    "node_hooks",
    "_scope_stack",
    "_scope_log",
    "_forward_start",
    "_probe_sequence_nr",
    "_next_sequence_nr",
    "_note_scope",
    "_scope_pre",
    "_scope_post",
    "_output_nodes",
    "_place_node_hooks",
    "_hiding",
    "_edit_hidden",
    "_path",
    "_module",
    "_every_module",
    # replace and mean_ablate tensors, head ablation (templates/heads.py)
    "patches",
    "_zero_heads",
    "_zero_heads_first",
    "_mha_without_heads",
}
SUPPORTED = (*MODULE_REGISTER, *GLOBAL_REGISTER, *NODE_KINDS)
"""The engine kinds the generator has a registration for."""


def hook_code(hooks: list[HookInfo], model_name: str = "model", *, model: nn.Module | None = None) -> str:
    """Python source, torch only, that registers hooks equivalent to ``hooks`` on the variable ``model_name``.

    The code keeps the handles in ``handles`` and what the hooks record in ``captures[(path, kind)]``.
    Hooks others attached (``foreign``) are left out. ``model`` tells whether a ``grad`` hook is on a
    module or a parameter where that cannot be read from the hook's live handle.
    """
    if not model_name.isidentifier() or keyword.iskeyword(model_name) or model_name in RESERVED:
        raise ValueError(
            f"model_name {model_name!r} must be a Python identifier, not one the generated code defines "
            f"({', '.join(sorted(RESERVED))})"
        )
    own, patches = _written_patches([info for info in hooks if not info.foreign and info.active])
    specs = [_spec(info, model) for info in own]
    op_nodes = [info for info, spec in zip(own, specs, strict=True) if spec in NODE_KINDS and _is_op_node(info)]
    names = {*RESERVED, model_name}
    blocks = [
        _block(i, info, spec, model_name, names, hide_edits=bool(op_nodes))
        for i, (info, spec) in enumerate(zip(own, specs, strict=True), 1)
    ]

    skipped = len(hooks) - len(own)
    note = f"# Left out: {skipped} hook(s) others attached or no longer live.\n" if skipped else ""
    modules = ["bisect", "dataclasses", "warnings"] if op_nodes else ["dataclasses"]
    imports = "".join(f"import {name}\n" for name in modules)
    parts = [HEADER.format(count=len(own), model=model_name, skipped=note, imports=imports), section("header"), "\n"]
    if patches:
        parts.append("\n" + PATCHES.format(shapes=", ".join(patches), count=len(patches)) + "\n")
    edits = {edit[0] for info in own if not callable(info.action) for edit in info.edit}
    if edits:
        parts.append(f"\n\n{edit_section(edits)}\n")
    if any(info.head_plan is not None for info in own):
        parts.append(f"\n\n{section('heads')}\n")
    actions = {info.action for info in own if isinstance(info.action, str)}
    optional = [
        ("stats", bool(actions & {"stats", "print"})),
        ("printing", "print" in actions),
        ("dict_output", "backward_pre" in specs),
        ("paths", bool(op_nodes) or any(spec in GLOBAL_KINDS for spec in specs)),
    ]
    parts += [f"\n\n{section(name, model_name)}\n" for name, wanted in optional if wanted]
    if any(spec in GLOBAL_KINDS for spec in specs):
        parts.append(f"\n{section('every_module', model_name)}\n")  # right under the paths it goes with
    if op_nodes:
        parts.append(f"\n\n{section('op_nodes', model_name)}\n\n\n{SCOPE_HOOKS}\n")
        if any(_hides_edit(info, spec) for info, spec in zip(own, specs, strict=True)):
            parts.append(f"\n\n{section('hidden_edit')}\n")
    parts += ["\n\n" + block + "\n" for block in blocks]
    return "".join(parts)


def _written_patches(infos: list[HookInfo]) -> tuple[list[HookInfo], list[str]]:
    """The hooks with each replace or mean_ablate tensor written ``patches[i]`` (code cannot hold a tensor's values),
    and those tensors' shapes in order."""
    shapes: list[str] = []
    written = []
    for info in infos:
        if any(edit[0] in PRIMARY for edit in info.edit):
            edits = []
            for edit in info.edit:
                if edit[0] in PRIMARY:
                    shapes.append(str(tuple(edit[1].shape)))
                    edit = (edit[0], Expression(f"patches[{len(shapes) - 1}]"))
                edits.append(edit)
            info = dataclasses.replace(info, edit=tuple(edits))
        written.append(info)
    return written, shapes


def _head_hook(plan: HeadPlan, model_name: str) -> list[str]:
    """The registration of an ablate_heads edit's own hook: where its attention's context meets the projection."""
    place, path, heads, dim = plan
    owner = f"{model_name}.get_submodule({quote(path)})" if path else model_name
    if place == "input":
        hook = f"lambda module, args: (_zero_heads(args[0], {literal(heads)}, {dim}), *args[1:])"
        return [f"handles.append({owner}.register_forward_pre_hook({hook}, prepend=True))"]
    if place == "output":
        hook = f"lambda module, args, output: _zero_heads_first(output, {literal(heads)}, {dim})"
        return [f"handles.append({owner}.register_forward_hook({hook}, prepend=True))"]
    hook = f"lambda module, args, kwargs, output: _mha_without_heads(module, args, kwargs, {literal(heads)})"
    return [f"handles.append({owner}.register_forward_hook({hook}, prepend=True, with_kwargs=True))"]


def _is_op_node(info: HookInfo) -> bool:
    """Whether a node hook's path is an op node (made anew by every forward), not an AccumulateGrad one."""
    return parse_node_id(info.path)[1] != "AccumulateGrad"


def _spec(info: HookInfo, model: nn.Module | None) -> str:
    """The engine's kind for a hook: its ``kind``, except ``param_grad`` for ``grad`` on a parameter."""
    if info.kind != "grad":
        return info.kind
    if info.spec:
        return info.spec
    if model is not None:
        family, _ = resolve_path(model, info.path)
        return "param_grad" if family == "param" else "grad"
    raise ValueError(
        f"cannot tell whether the 'grad' hook on {info.path!r} is on a module or a parameter: pass model= to hook_code"
    )


def _hides_edit(info: HookInfo, spec: str) -> bool:
    """Whether a hook edits in the forward, where the edit's nodes must not take op-node addresses."""
    return bool(info.edit) and not callable(info.action) and has(spec, phase="forward")


def _with_kwargs(info: HookInfo) -> bool:
    """Whether a forward or forward-pre hook takes kwargs, as the explorer registered it."""
    return takes_kwargs(info.spec, info.action, info.with_kwargs)


def _block(index: int, info: HookInfo, spec: str, model_name: str, names: set[str], hide_edits: bool = False) -> str:
    """One commented block: the hook function(s), then the line registering it; ``hide_edits``: a forward
    edit goes through ``_edit_hidden`` (op-node hooks are placed)."""
    if callable(info.action):
        what = f"your callable {quoted(info.action_name)}"
    else:
        edit = f"edit {', '.join(literal(e) for e in info.edit)}, then " if info.edit else ""
        copy = " (copies, so later in-place ops cannot change them)" if info.copy and info.action == "capture" else ""
        what = edit + info.action + copy
    lines = [comment(f"Hook {index}: {info.kind} on {quoted(info.path)} -> {what}")]
    if spec not in SUPPORTED:
        return lines[0] + f"\n# not generated: hookwidgets has no plain-torch code for kind {info.kind!r} yet"
    if spec == "legacy_backward":
        lines.append(LEGACY_NOTE)
    if spec in ("grad", "global_grad"):
        lines.append(GRAD_NOTE)
    with_kwargs = _with_kwargs(info)
    signature = KINDS[spec].parameters
    if with_kwargs:
        signature = signature.replace("args", "args, kwargs")
    # A callable registered as is takes its own name; the grad and global hooks wrap it in hook_<index>.
    direct = callable(info.action) and spec not in GLOBAL_KINDS and spec != "grad"
    fn = identifier(names, info.action_name if direct else "", f"hook_{index}")

    if spec in NODE_KINDS:
        node_lines = _node_hook(info, spec, fn, signature, model_name)
        return "\n".join([*lines, *node_lines])
    if spec in GLOBAL_KINDS:
        if spec == "global_grad":
            lines += _global_grad_hook(info, fn, names)
        else:
            lines += _global_hook(info, spec, fn, signature, names, hide_edits, with_kwargs)
        kwargs = ", with_kwargs=True" if with_kwargs else ""
        register = f"handles.append(_module.{GLOBAL_REGISTER[spec].format(fn=fn, kwargs=kwargs)})"
        if spec == "global_backward":
            register = GLOBAL_BACKWARD_SKIP + register
        return "\n".join([*lines, "", "", "for _module in _every_module:", f"    {register}"])
    else:
        if spec == "grad":
            lines += _grad_hook(info, fn, names)
        elif callable(info.action):
            lines.append(_placeholder(info, fn, signature))
        else:
            lines += [f"def {fn}({signature}):", *_body(info, spec, _key(info), _where(info), with_kwargs, hide_edits)]
        if has(spec, family="param"):
            owner = f"{model_name}.get_parameter({quote(info.path)})"
        else:
            owner = f"{model_name}.get_submodule({quote(info.path)})" if info.path else model_name
        kwargs = ", with_kwargs=True" if with_kwargs else ""
        registration = f"{owner}.{MODULE_REGISTER[spec].format(fn=fn, kwargs=kwargs)}"
        if spec == "backward_pre":
            as_tuple = ", as_tuple=True" if callable(info.action) else ""
            fallback = f"{owner}.register_forward_hook(_on_dict_output({fn}{as_tuple}))"
            return "\n".join(
                [*lines, "", "", f"handles.append({registration})", DICT_OUTPUT_NOTE, f"handles.append({fallback})"]
            )
        if info.note and CANNOT_FIRE in info.note:  # the explorer saw a dict or dataclass output
            return "\n".join(
                [*lines, "", "", f"handles.append({registration})", comment(f"this hook never fires: {info.note}")]
            )
    plan = info.head_plan
    heads = ["# the heads' slices are zeroed before the projection:", *_head_hook(plan, model_name)] if plan else []
    return "\n".join([*lines, "", "", f"handles.append({registration})", *heads])


def _grad_hook(info: HookInfo, fn: str, names: set[str]) -> list[str]:
    """A forward hook ``fn`` that arms a tensor hook on every output tensor requiring grad, and that tensor hook."""
    if callable(info.action):
        on_grad = identifier(names, info.action_name, f"{fn}_grad")
        lines = [_placeholder(info, on_grad, "grad")]
        arm = f"tensor.register_hook({on_grad})"
        loop, items = "tensor", "values"
    else:
        on_grad = identifier(names, "", f"{fn}_grad")
        lines = [f"def {on_grad}(grad, name):", *_body(info, "grad", _key(info), _where(info))]
        arm = f"tensor.register_hook(lambda grad, name=name: {on_grad}(grad, name))"
        loop, items = "name, tensor", "items"
    return [
        *lines,
        "",
        "",
        f"def {fn}(module, args, output):",
        f'    for {loop} in _named("grad_output", output).{items}():',
        "        if tensor.requires_grad:",
        f"            {arm}",
    ]


def _node_hook(info: HookInfo, spec: str, fn: str, signature: str, model_name: str) -> list[str]:
    """A hook on a parameter's AccumulateGrad node (stable across forwards), or on an op node found anew in
    every forward's graph by its scope and ordinal (the ``op_nodes`` template)."""
    scope, op, ordinal = parse_node_id(info.path)
    method = "register_prehook" if spec == "node_pre" else "register_hook"
    if callable(info.action):
        body = [_placeholder(info, fn, signature)]
    else:
        body = [f"def {fn}({signature}):", *_body(info, spec, _key(info), _where(info))]
    if op != "AccumulateGrad":
        entry = f"({quote(scope)}, {quote(op)}, {int(ordinal)}, {quote(method)}, {fn})"
        return [*body, "", "", f"node_hooks.append({entry})  # placed on every forward of {model_name}"]
    if ordinal.startswith("leaf"):  # the gradient sink of an input that requires grad, not of a parameter
        return [
            *body,
            "",
            "",
            comment(f"{quoted(info.path)} is the AccumulateGrad node of an input that requires grad:"),
            f"# register {fn} on that input's node yourself: x.view_as(x).grad_fn.next_functions[0][0].{method}({fn})",
        ]
    param = f"{scope}.{ordinal}" if scope else ordinal
    register = NODE_REGISTER.format(model=model_name, param=quote(param), method=method, fn=fn)
    return [NODE_NOTE, *body, "", "", register]


def _global_grad_hook(info: HookInfo, fn: str, names: set[str]) -> list[str]:
    """A forward hook, on every module of the model, arming tensor hooks on the module's outputs."""
    if callable(info.action):
        on_grad = identifier(names, info.action_name, f"{fn}_grad")
        lines = [_placeholder(info, on_grad, "grad")]
        arm = f"tensor.register_hook({on_grad})"
    else:
        on_grad = identifier(names, "", f"{fn}_grad")
        where = f"f\"{{path or '(model)'}} {info.kind}\""
        lines = [f"def {on_grad}(grad, path, name):", *_body(info, "grad", f"(path, {quote(info.kind)})", where)]
        arm = f"tensor.register_hook(lambda grad, path=path, name=name: {on_grad}(grad, path, name))"
    return [
        *lines,
        "",
        "",
        f"def {fn}(module, args, output):",
        "    path = paths[id(module)]",
        '    for name, tensor in _named("grad_output", output).items():',
        "        if tensor.requires_grad:",
        f"            {arm}",
    ]


def _global_hook(
    info: HookInfo, spec: str, fn: str, signature: str, names: set[str], hide_edits: bool, with_kwargs: bool
) -> list[str]:
    """A module hook, on every module of the model, recording under the module's path."""
    lines = []
    if callable(info.action):
        user = identifier(names, info.action_name, f"{fn}_user")
        lines += [_placeholder(info, user, signature), "", ""]
        body = [f"    return {user}({signature})"]
    else:
        where = f"f\"{{path or '(model)'}} {info.kind}\""
        body = _body(info, spec, f"(path, {quote(info.kind)})", where, with_kwargs, hide_edits)
    return [
        *lines,
        f"def {fn}({signature}):",
        "    path = paths[id(module)]",
        *body,
    ]


def _body(
    info: HookInfo, spec: str, key: str, where: str, with_kwargs: bool = False, hide_edits: bool = False
) -> list[str]:
    """Body lines: edit the value (when asked), record its tensors, return what torch expects for ``spec``."""
    local = spec.removeprefix("global_")
    editable = EDITABLE.get(local, "grad")
    pre_kwargs = with_kwargs and local == "forward_pre"
    lines = []
    if info.edit:
        edit = "_edit_hidden" if hide_edits and _hides_edit(info, spec) else "_edit"
        lines.append(f"{editable} = {edit}({editable}, {literal(info.edit)})")
    lines.append(
        "tensors = " + ('{**_named("args", args), **_named("kwargs", kwargs)}' if pre_kwargs else TENSORS[local])
    )
    if info.action == "capture":
        detach = "t.detach().clone()" if info.copy else "t.detach()"
        # torch passes a tensor hook None for an output that did not reach the loss: nothing to keep
        keep = " if t is not None" if local == "grad" else ""
        lines.append(f"captures[{key}].append({{name: {detach} for name, t in tensors.items(){keep}}})")
    elif info.action == "stats":
        lines += [
            "primary = next(iter(tensors.values()), None)  # the first output, argument or gradient",
            f"captures[{key}].append(None if primary is None else _stats(primary))",
        ]
    else:
        lines.append(f"_print({where}, tensors)")
    if info.edit:
        if local.endswith("backward"):
            lines.append("# torch refuses a value when no input requires grad (e.g. the first layer)")
            lines.append("return None if all(g is None for g in grad_input) else grad_input")
        else:
            lines.append("return args, kwargs  # torch wants both back" if pre_kwargs else f"return {editable}")
    return ["    " + line for line in lines]


def _placeholder(info: HookInfo, fn: str, signature: str) -> str:
    shown = display_name(info.action_name)  # in a comment: one line, whatever the name holds
    return PLACEHOLDER.format(fn=fn, signature=signature, name=shown)


def _key(info: HookInfo) -> str:
    return f"({quote(info.path)}, {quote(info.kind)})"


def _where(info: HookInfo) -> str:
    return quote(f"{info.path or '(model)'} {info.kind}")
