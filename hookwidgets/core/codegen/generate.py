"""Plain-torch Python source that registers the same hooks as the explorer, for use without hookwidgets."""

from __future__ import annotations

import builtins
import keyword
import math
import unicodedata
from typing import Any

from torch import nn

from ..diagnostics.notes import CANNOT_FIRE
from ..display import display_name, quoted, visible
from ..hooks.kinds import GLOBAL_KINDS, MODULE_KINDS, NODE_KINDS
from ..hooks.registry import HookInfo
from ..model.scope import parse_node_id
from ..model.targets import resolve_target

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
    # the op-node block (OP_NODES)
    "bisect",
    "warnings",
    "node_hooks",
    "_scope_stack",
    "_scope_log",
    "_forward_start",
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
}
SUPPORTED = (*MODULE_KINDS, *GLOBAL_KINDS, "param_grad", "post_accumulate", *NODE_KINDS)

# Per engine kind (global ones without their prefix): torch's hook signature, the value an edit
# replaces (and the hook returns), and the named tensors the explorer records.
SIGNATURE = {
    "forward_pre": "module, args",
    "forward": "module, args, output",
    "backward_pre": "module, grad_output",
    "backward": "module, grad_input, grad_output",
    "legacy_backward": "module, grad_input, grad_output",
    "grad": "grad",
    "param_grad": "grad",
    "post_accumulate": "param",
    "node_pre": "grad_outputs",
    "node": "grad_inputs, grad_outputs",
}
EDITABLE = {
    "forward_pre": "args",
    "forward": "output",
    "backward_pre": "grad_output",
    "backward": "grad_input",
    "legacy_backward": "grad_input",
    "node_pre": "grad_outputs",
    "node": "grad_inputs",
}
TENSORS = {
    "forward_pre": '_named("args", args)',
    "forward": '_named("output", output)',
    "backward_pre": '_named("grad_output", grad_output)',
    "backward": '{**_named("grad_output", grad_output), **_named("grad_input", grad_input)}',
    "legacy_backward": '{**_named("grad_output", grad_output), **_named("grad_input", grad_input)}',
    "grad": "{name: grad}",  # name: grad_output, grad_output.0, ... after the output tensors
    "param_grad": '{"grad": grad}',
    "post_accumulate": '{"grad": param.grad} if param.grad is not None else {}',
    "node_pre": '_named("grad_output", grad_outputs)',
    "node": '{**_named("grad_output", grad_outputs), **_named("grad_input", grad_inputs)}',
}
MODULE_REGISTER = {
    "forward_pre": "register_forward_pre_hook({fn}{kwargs})",
    # always_call: a forward that raises still reports (output None), as in the explorer
    "forward": "register_forward_hook({fn}{kwargs}, always_call=True)",
    "backward_pre": "register_full_backward_pre_hook({fn})",
    "backward": "register_full_backward_hook({fn})",
    "legacy_backward": "register_backward_hook({fn})",
    "grad": "register_forward_hook({fn})",
    "param_grad": "register_hook({fn})",
    "post_accumulate": "register_post_accumulate_grad_hook({fn})",
}
GLOBAL_REGISTER = {  # on each module of the model, first among its hooks: where torch runs its global hooks
    "global_forward_pre": "register_forward_pre_hook({fn}, prepend=True)",
    "global_forward": "register_forward_hook({fn}, prepend=True, always_call=True)",
    "global_backward_pre": "register_full_backward_pre_hook({fn}, prepend=True)",
    "global_backward": "register_full_backward_hook({fn}, prepend=True)",
    "global_grad": "register_forward_hook({fn}, prepend=True)",
}

HEADER = """\
# Plain-PyTorch version of {count} hook(s) made with hookwidgets; needs only torch and the model in `{model}`.
# captures[(target, kind)] lists what each hook recorded, oldest first; to remove every hook:
#     for handle in handles:
#         handle.remove()
{skipped}{imports}from collections import defaultdict

import torch

captures = defaultdict(list)  # (target, kind) -> records: dicts of detached tensors, or of statistics
handles = []  # one RemovableHandle per registered hook
kept = []  # autograd nodes that carry hooks and that torch alone would let go


def _named(prefix, value):
    \"\"\"The tensors inside a (nested) tuple, list, dict or dataclass, named prefix, prefix.0, prefix.key, ...\"\"\"
    if isinstance(value, torch.Tensor):
        return {{prefix: value}}
    if isinstance(value, (tuple, list)):
        items = enumerate(value)
    elif isinstance(value, dict):  # before dataclasses: HF's ModelOutput is both, and a dict first
        items = value.items()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    else:
        return {{}}
    found = {{}}
    for key, item in items:
        found.update(_named(f"{{prefix}}.{{key}}", item))
    return found
"""

EDIT = """

def _edit(value, edits):
    \"\"\"value with every floating-point tensor inside edited in order: new tensors, never in place.\"\"\"
    if isinstance(value, torch.Tensor):
        return _edit_tensor(value, edits) if value.is_floating_point() else value
    if isinstance(value, tuple):
        items = [_edit(v, edits) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # namedtuples too
    if isinstance(value, list):
        return type(value)(_edit(v, edits) for v in value)
    if isinstance(value, dict):
        return type(value)({{k: _edit(v, edits) for k, v in value.items()}})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # replace() takes init fields only; __post_init__ recomputes the others
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        return dataclasses.replace(value, **{{name: _edit(getattr(value, name), edits) for name in fields}})
    return value  # None and non-tensors pass through


def _edit_tensor(t, edits):
    for edit in edits:
{branches}    return t
"""
EDIT_BRANCHES = {
    "scale": ["t = t * edit[1]"],
    "clip": ["t = t.clamp(-edit[1], edit[1])"],
    "clip_norm": [
        "# the norm in float32 at least, so float16 does not overflow; the rescale stays differentiable",
        "norm = torch.linalg.vector_norm(t, dtype=torch.promote_types(t.dtype, torch.float32))",
        "t = t * torch.where(norm > edit[1], edit[1] / norm, torch.ones_like(norm)).to(t.dtype)",
    ],
    "zero": [
        "# masked_fill keeps the graph (zero gradients upstream) and, unlike t * 0, turns Inf and NaN into 0",
        "t = t.masked_fill(torch.ones((), dtype=torch.bool, device=t.device), 0)",
    ],
    "ablate": [
        "# zero the given channels: dim 1, or dim 0 of a 1-D tensor",
        "index = torch.tensor(edit[1], dtype=torch.long, device=t.device)",
        "t = t.index_fill(1 if t.dim() >= 2 else 0, index, 0)",
    ],
}

STATS = '''

def _stats(t):
    """mean, population std, min, max and L2 norm of the finite values; zero fraction; NaN/Inf counts."""
    x = t.detach()
    x = x.abs() if x.is_complex() else x
    x = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32).flatten()
    finite = x[torch.isfinite(x)]
    n, nan = x.numel(), int(torch.isnan(x).sum())
    stats = dict.fromkeys(("mean", "std", "min", "max"), float("nan")) | {"norm": 0.0}
    if finite.numel():
        norm, y, scale = torch.linalg.vector_norm(finite), finite, 1.0
        if not torch.isfinite(norm):  # squares of finite values above ~1e19 overflow float32: rescale in float64
            scale = finite.abs().max().item()
            y = finite.to(torch.float64) / scale
            norm = torch.linalg.vector_norm(y)
        stats = {
            "mean": y.mean().item() * scale,
            "std": y.std(correction=0).item() * scale,
            "min": finite.min().item(),
            "max": finite.max().item(),
            "norm": norm.item() * scale,
        }
    zero_fraction = int((x == 0).sum()) / n if n else 0.0
    return stats | {"zero_fraction": zero_fraction, "nan": nan, "inf": n - nan - finite.numel(), "numel": n}
'''

PRINT = '''

def _print(where, tensors):
    """One line: where the hook fired and each tensor's shape, dtype and range (or None)."""
    parts = []
    for name, t in tensors.items():
        if t is None:
            parts.append(f"{name} is None")
            continue
        s = _stats(t)
        parts.append(
            f"{name} {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} "
            f"mean={s['mean']:.4g} std={s['std']:.4g} min={s['min']:.4g} max={s['max']:.4g}"
            + (f" nan={s['nan']}" if s["nan"] else "")
            + (f" inf={s['inf']}" if s["inf"] else "")
        )
    print(f"{where}: " + ("; ".join(parts) if parts else "no tensors"))
'''

DICT_OUTPUT = '''

def _on_dict_output(hook, as_tuple=False):
    """A forward hook standing in for the full backward pre-hook `hook`, which torch never fires on a dict or
    dataclass output: a tensor hook on each output tensor calls hook(module, grad_output) with its gradient
    alone, as {key: grad} (recorded as grad_output.<key>) or, for a hook of yours, as torch's (grad,)."""

    def one_grad(module, key, grad):
        result = hook(module, (grad,) if as_tuple else {key: grad})
        if isinstance(result, dict):
            return next(iter(result.values()))
        return result[0] if isinstance(result, (tuple, list)) else result  # None leaves the gradient as is

    def arm(module, args, output):
        if isinstance(output, dict) or (dataclasses.is_dataclass(output) and not isinstance(output, type)):
            for name, tensor in _named("grad_output", output).items():
                if tensor.requires_grad:
                    key = name.removeprefix("grad_output.")
                    tensor.register_hook(lambda grad, key=key: one_grad(module, key, grad))

    return arm
'''

DICT_OUTPUT_NOTE = "# torch never fires the pre-hook above on a dict or dataclass output: then tensor hooks call it"

PATHS = """

# The model's modules by id, with their paths.
paths = {{}}
for _path, _module in {model}.named_modules(remove_duplicate=False):
    paths.setdefault(id(_module), _path)  # a module reachable by two paths goes by the first, as in hookwidgets
"""

EVERY_MODULE = """
# Global kinds: torch's process-wide module hooks would run for every model in the process, so each global
# kind is a hook on every module of this model instead, put first among the module's own hooks (torch runs
# its global hooks before them). A module added to the model later gets the hooks when this code runs again.
_every_module = [m for m in {model}.modules() if not isinstance(m, torch.jit.ScriptModule)]  # those take no hooks
"""

GRAD_NOTE = """\
# A forward hook arms a tensor hook on each output that requires grad: unlike a full backward hook, this
# works when a module changes its output in place. Tensor hooks armed by a forward that already ran stay
# on that forward's graph after the handles are removed."""

LEGACY_NOTE = """\
# register_backward_hook is deprecated (torch warns): on a module made of several autograd ops it sees the
# gradients of the last op only (for Linear: bias, input and weight of addmm), not the module's inputs, and
# once used, the module refuses full backward hooks even after removal. Here only for comparison: use
# register_full_backward_hook (kind 'backward') or a tensor hook on the output (kind 'grad')."""

NODE_NOTE = """\
# The parameter's AccumulateGrad node, where its gradient is added to .grad (the spot Horovod hooks to
# start communication early). torch holds this node only weakly: `kept` keeps it, and so its hook, alive."""

NODE_REGISTER = """\
_param = {model}.get_parameter({param})
kept.append(_param.view_as(_param).grad_fn.next_functions[0][0])  # the parameter's AccumulateGrad node
handles.append(kept[-1].{method}({fn}))"""

OP_NODES = """

# Op nodes (AddmmBackward0, AddBackward0, ...) are made anew by every forward, so their hooks are placed
# on every forward. A node's address "<scope>/<op>#<n>" is the n-th node of that op, in creation order,
# that the module at <scope> made itself (not its submodules). Two global hooks log from which autograd
# sequence number on each module of the model was running; when the model's forward returns, its graph
# is walked from the outputs and each addressed node gets its hook. One thread at a time.
node_hooks = []  # (scope, op, ordinal, method, hook) placed on every forward
_scope_stack, _scope_log, _forward_start = [], [], [0]
_hiding = [0]  # above 0 while a hook's edit runs (_edit_hidden): its nodes get scope None and no address


def _probe_sequence_nr():
    # For a torch without the private reader below: make one node and read its number.
    with torch.enable_grad():
        node = (torch.zeros((), requires_grad=True) * 1).grad_fn
    return node._sequence_nr() + 1 if node is not None else 0


# The number autograd gives the next node made on this thread (a private torch function, free to call).
_next_sequence_nr = getattr(torch._C._autograd, "_get_sequence_nr", _probe_sequence_nr)


def _note_scope():
    seq = _next_sequence_nr()
    scope = None if _hiding[0] else _scope_stack[-1] if _scope_stack else ""
    if _scope_log and _scope_log[-1][0] == seq:
        _scope_log[-1] = (seq, scope)  # no node was made since the last entry
    elif not _scope_log or _scope_log[-1][1] != scope:
        _scope_log.append((seq, scope))


def _scope_pre(module, args):
    path = paths.get(id(module))
    if path is None:
        return  # a module of another model
    if module is {model}:  # a new forward of the model
        _scope_stack.clear()
        _scope_log.clear()
        _forward_start[0] = _next_sequence_nr()
    elif not _scope_stack:
        return  # a submodule called on its own
    _scope_stack.append(path)
    _note_scope()


def _scope_post(module, args, output):
    path = paths.get(id(module))
    if path is None or not _scope_stack:
        return
    while _scope_stack and _scope_stack.pop() != path:
        pass
    _note_scope()
    if module is {model} and not _scope_stack and node_hooks:
        _place_node_hooks(output, _forward_start[0], _next_sequence_nr())


def _output_nodes(output):
    todo, nodes = [output], []
    while todo:
        item = todo.pop()
        if isinstance(item, torch.Tensor):
            if item.grad_fn is not None:
                nodes.append(item.grad_fn)
        elif isinstance(item, (tuple, list)):
            todo.extend(reversed(item))
        elif isinstance(item, dict):
            todo.extend(reversed(list(item.values())))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            todo.extend(reversed([getattr(item, f.name, None) for f in dataclasses.fields(item)]))
    return nodes


def _place_node_hooks(output, start, end):
    # Walk this forward's graph, give each node its scope and ordinal, and hook the addressed ones.
    order, scope_of, todo = [], {{}}, list(reversed(_output_nodes(output)))
    seen = set()
    while todo:  # iterative: a deep graph would exceed Python's recursion limit
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.name().endswith("AccumulateGrad") or node._sequence_nr() < start:
            continue  # a leaf's gradient sink, or the inputs' own history
        order.append(node)
        todo.extend(n for n, _ in node.next_functions if n is not None)
    starts = [seq for seq, _ in _scope_log]
    for node in order:
        seq = node._sequence_nr()
        if seq < end:
            i = bisect.bisect_right(starts, seq) - 1
            scope_of[node] = _scope_log[i][1] if i >= 0 else ""
    for node in order:  # a view autograd rebuilt after the forward takes the scope of its first user
        for n, _ in node.next_functions:
            if n in seen and n not in scope_of and node in scope_of:
                scope_of[n] = scope_of[node]
    counts, wanted, found = {{}}, {{}}, set()
    for scope, op, ordinal, method, hook in node_hooks:
        wanted.setdefault((scope, op, ordinal), []).append((method, hook))
    for node in sorted(order, key=lambda n: n._sequence_nr()):
        op = node.name().removeprefix("torch::autograd::")
        key = (scope_of.get(node, ""), op)
        if op == "BackwardHookFunctionBackward" or key[0] is None:
            continue  # added by full backward hooks or by a hook's edit: not one of the model's ops
        ordinal = counts.get(key, 0)
        counts[key] = ordinal + 1
        for method, hook in wanted.get((*key, ordinal), ()):
            getattr(node, method)(hook)  # the graph keeps the node, and its hook, until backward frees it
            found.add((*key, ordinal))
    for scope, op, ordinal in wanted.keys() - found:
        message = f"node {{scope}}/{{op}}#{{ordinal}} is not in this forward's graph: its hook did not fire"
        warnings.warn(message, stacklevel=2)


handles.append(torch.nn.modules.module.register_module_forward_pre_hook(_scope_pre))
handles.append(torch.nn.modules.module.register_module_forward_hook(_scope_post, always_call=True))
"""

HIDDEN_EDIT = """

def _edit_hidden(value, edits):
    \"\"\"_edit in a forward hook: the edit's own nodes take no address, so the model's nodes keep theirs.\"\"\"
    if not _scope_stack:
        return _edit(value, edits)  # outside a forward of the model: nothing to number
    _hiding[0] += 1
    _note_scope()
    try:
        return _edit(value, edits)
    finally:
        _hiding[0] -= 1
        _note_scope()
"""

PLACEHOLDER = """\
def {fn}({signature}):
    # replace with your hook `{name}`: the explorer cannot turn arbitrary Python code into source,
    # so this placeholder with torch's signature does nothing.
    return None"""


def hook_code(hooks: list[HookInfo], model_name: str = "model", *, model: nn.Module | None = None) -> str:
    """Python source, torch only, that registers hooks equivalent to ``hooks`` on the variable ``model_name``.

    The code keeps the handles in ``handles`` and what the hooks record in ``captures[(target, kind)]``.
    Hooks others attached (``foreign``) are left out. ``model`` tells whether a ``grad`` hook is on a
    module or a parameter where that cannot be read from the hook's live handle.
    """
    if not model_name.isidentifier() or keyword.iskeyword(model_name) or model_name in RESERVED:
        raise ValueError(
            f"model_name {model_name!r} must be a Python identifier, not one the generated code defines "
            f"({', '.join(sorted(RESERVED))})"
        )
    own = [info for info in hooks if not info.foreign and info.active]
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
    parts = [HEADER.format(count=len(own), model=model_name, skipped=note, imports=imports)]
    edits = {edit[0] for info in own if not callable(info.action) for edit in info.edit}
    if edits:
        used = [name for name in EDIT_BRANCHES if name in edits]
        branches = "".join(
            f"        {'elif' if i else 'if'} edit[0] == {_quote(name)}:\n"
            + "".join(f"            {line}\n" for line in EDIT_BRANCHES[name])
            for i, name in enumerate(used)
        )
        parts.append(EDIT.format(branches=branches))
    actions = {info.action for info in own if isinstance(info.action, str)}
    if actions & {"stats", "print"}:
        parts.append(STATS)
    if "print" in actions:
        parts.append(PRINT)
    if "backward_pre" in specs:
        parts.append(DICT_OUTPUT)
    if op_nodes or any(spec in GLOBAL_KINDS for spec in specs):
        parts.append(PATHS.format(model=model_name))
    if any(spec in GLOBAL_KINDS for spec in specs):
        parts.append(EVERY_MODULE.format(model=model_name))
    if op_nodes:
        parts.append(OP_NODES.format(model=model_name))
        if any(_hides_edit(info, spec) for info, spec in zip(own, specs, strict=True)):
            parts.append(HIDDEN_EDIT)
    parts += ["\n\n" + block + "\n" for block in blocks]
    return "".join(parts)


def _is_op_node(info: HookInfo) -> bool:
    """Whether a node hook's target is an op node (made anew by every forward), not an AccumulateGrad one."""
    return parse_node_id(info.target)[1] != "AccumulateGrad"


def _spec(info: HookInfo, model: nn.Module | None) -> str:
    """The engine's kind for a hook: its ``kind``, except ``param_grad`` for ``grad`` on a parameter."""
    if info.kind != "grad":
        return info.kind
    if info.spec:
        return info.spec
    if model is not None:
        family, _ = resolve_target(model, info.target)
        return "param_grad" if family == "param" else "grad"
    raise ValueError(
        f"cannot tell whether the 'grad' hook on {info.target!r} is on a module or a parameter: "
        "pass model= to hook_code"
    )


def _hides_edit(info: HookInfo, spec: str) -> bool:
    """Whether a hook edits in the forward, where the edit's nodes must not take op-node addresses."""
    return bool(info.edit) and not callable(info.action) and spec.removeprefix("global_") in ("forward_pre", "forward")


def _with_kwargs(info: HookInfo) -> bool:
    """Whether a forward or forward-pre hook takes kwargs."""
    return info.with_kwargs and info.kind in ("forward_pre", "forward")


def _block(index: int, info: HookInfo, spec: str, model_name: str, names: set[str], hide_edits: bool = False) -> str:
    """One commented block: the hook function(s), then the line registering it; ``hide_edits``: a forward
    edit goes through ``_edit_hidden`` (op-node hooks are placed)."""
    if callable(info.action):
        what = f"your callable {quoted(info.action_name)}"
    else:
        edit = f"edit {', '.join(_literal(e) for e in info.edit)}, then " if info.edit else ""
        copy = " (copies, so later in-place ops cannot change them)" if info.copy and info.action == "capture" else ""
        what = edit + info.action + copy
    lines = [_comment(f"Hook {index}: {info.kind} on {quoted(info.target)} -> {what}")]
    if spec not in SUPPORTED:
        return lines[0] + f"\n# not generated: hookwidgets has no plain-torch code for kind {info.kind!r} yet"
    if spec == "legacy_backward":
        lines.append(LEGACY_NOTE)
    if spec in ("grad", "global_grad"):
        lines.append(GRAD_NOTE)
    with_kwargs = _with_kwargs(info)
    signature = SIGNATURE[spec.removeprefix("global_")]
    if with_kwargs:
        signature = signature.replace("args", "args, kwargs")
    # A callable registered as is takes its own name; the grad and global hooks wrap it in hook_<index>.
    direct = callable(info.action) and spec not in GLOBAL_KINDS and spec != "grad"
    fn = _name(names, info.action_name if direct else "", f"hook_{index}")

    if spec in NODE_KINDS:
        node_lines = _node_hook(info, spec, fn, signature, model_name)
        return "\n".join([*lines, *node_lines])
    if spec in GLOBAL_KINDS:
        if spec == "global_grad":
            lines += _global_grad_hook(info, fn, names)
        else:
            lines += _global_hook(info, spec, fn, signature, names, hide_edits)
        register = f"handles.append(_module.{GLOBAL_REGISTER[spec].format(fn=fn)})"
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
        if spec in ("param_grad", "post_accumulate"):
            owner = f"{model_name}.get_parameter({_quote(info.target)})"
        else:
            owner = f"{model_name}.get_submodule({_quote(info.target)})" if info.target else model_name
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
                [*lines, "", "", f"handles.append({registration})", _comment(f"this hook never fires: {info.note}")]
            )
    return "\n".join([*lines, "", "", f"handles.append({registration})"])


def _grad_hook(info: HookInfo, fn: str, names: set[str]) -> list[str]:
    """A forward hook ``fn`` that arms a tensor hook on every output tensor requiring grad, and that tensor hook."""
    if callable(info.action):
        on_grad = _name(names, info.action_name, f"{fn}_grad")
        lines = [_placeholder(info, on_grad, "grad")]
        arm = f"tensor.register_hook({on_grad})"
        loop, items = "tensor", "values"
    else:
        on_grad = _name(names, "", f"{fn}_grad")
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
    every forward's graph by its scope and ordinal (the ``OP_NODES`` block)."""
    scope, op, ordinal = parse_node_id(info.target)
    method = "register_prehook" if spec == "node_pre" else "register_hook"
    if callable(info.action):
        body = [_placeholder(info, fn, signature)]
    else:
        body = [f"def {fn}({signature}):", *_body(info, spec, _key(info), _where(info))]
    if op != "AccumulateGrad":
        entry = f"({_quote(scope)}, {_quote(op)}, {int(ordinal)}, {_quote(method)}, {fn})"
        return [*body, "", "", f"node_hooks.append({entry})  # placed on every forward of {model_name}"]
    if ordinal.startswith("leaf"):  # the gradient sink of an input that requires grad, not of a parameter
        return [
            *body,
            "",
            "",
            _comment(f"{quoted(info.target)} is the AccumulateGrad node of an input that requires grad:"),
            f"# register {fn} on that input's node yourself: x.view_as(x).grad_fn.next_functions[0][0].{method}({fn})",
        ]
    param = f"{scope}.{ordinal}" if scope else ordinal
    register = NODE_REGISTER.format(model=model_name, param=_quote(param), method=method, fn=fn)
    return [NODE_NOTE, *body, "", "", register]


GLOBAL_BACKWARD_SKIP = """\
if _module._is_full_backward_hook is False:
        continue  # a legacy backward hook is on it: torch refuses a full one beside it
    """


def _global_grad_hook(info: HookInfo, fn: str, names: set[str]) -> list[str]:
    """A forward hook, on every module of the model, arming tensor hooks on the module's outputs."""
    if callable(info.action):
        on_grad = _name(names, info.action_name, f"{fn}_grad")
        lines = [_placeholder(info, on_grad, "grad")]
        arm = f"tensor.register_hook({on_grad})"
    else:
        on_grad = _name(names, "", f"{fn}_grad")
        where = f"f\"{{path or '(model)'}} {info.kind}\""
        lines = [f"def {on_grad}(grad, path, name):", *_body(info, "grad", f"(path, {_quote(info.kind)})", where)]
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


def _global_hook(info: HookInfo, spec: str, fn: str, signature: str, names: set[str], hide_edits: bool) -> list[str]:
    """A module hook, on every module of the model, recording under the module's path."""
    lines = []
    if callable(info.action):
        user = _name(names, info.action_name, f"{fn}_user")
        lines += [_placeholder(info, user, signature), "", ""]
        body = [f"    return {user}({signature})"]
    else:
        where = f"f\"{{path or '(model)'}} {info.kind}\""
        body = _body(info, spec, f"(path, {_quote(info.kind)})", where, hide_edits=hide_edits)
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
        lines.append(f"{editable} = {edit}({editable}, {_literal(info.edit)})")
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


def _name(names: set[str], wanted: str, fallback: str) -> str:
    """``wanted`` if it is a free identifier (not a builtin either), else ``fallback`` (numbered when taken)."""
    # Python reads identifiers in NFKC form: a fullwidth "ｔｏｒｃｈ" would define `torch` and shadow the module.
    wanted = unicodedata.normalize("NFKC", str(wanted))
    free = wanted.isidentifier() and not keyword.iskeyword(wanted) and not hasattr(builtins, wanted)
    name = wanted if free and wanted not in names else fallback
    base, n = name, 2
    while name in names:
        name, n = f"{base}_{n}", n + 1
    names.add(name)
    return name


def _comment(text: str) -> str:
    """A one-line comment of ``text``: a line break or other invisible character in it is escaped, never output."""
    return "# " + visible(text)


def _key(info: HookInfo) -> str:
    return f"({_quote(info.target)}, {_quote(info.kind)})"


def _where(info: HookInfo) -> str:
    return _quote(f"{info.target or '(model)'} {info.kind}")


def _quote(text: str) -> str:
    """A string literal for ``text``: ``repr``, in double quotes when that needs no escape."""
    text = str.__str__(text)  # the characters alone: a str subclass's own __repr__ could write any code
    literal = repr(text)
    return f'"{literal[1:-1]}"' if literal[0] == "'" and '"' not in text else literal


def _literal(value: Any) -> str:
    """Source for a (nested) tuple of numbers and strings; non-finite floats as ``float("inf")``; else a ValueError."""
    if isinstance(value, (tuple, list)):
        items = [_literal(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))  # the plain int's repr: a subclass could write any code in its own
    if isinstance(value, float):
        return repr(float(value)) if math.isfinite(value) else f'float("{float(value)}")'
    raise ValueError(f"hook_code writes edits of numbers and strings only, not {type(value).__name__}")
