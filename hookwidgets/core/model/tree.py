"""The module tree as plain data, with output shapes from a probe run."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict

import torch
from torch import nn
from torch.nn.parameter import is_lazy
from torch.utils.hooks import RemovableHandle

from ..display import quoted
from .inputs import Inputs, call_model
from .lazy import has_lazy, probe_copy
from .meta import call_time_watch, holds_meta
from .packed import packed_numel
from .preserved_state import preserved_state


class TreeNode(TypedDict):
    """One module of the tree: path, name, class, parameter counts of its subtree (None: a lazy parameter's size
    is unknown yet), packed weights, its first output's shape and dtype (None: not probed), and its children."""

    path: str
    """The module's path (empty for the model itself)."""
    name: str
    """The last part of the path (the model's class name for the root)."""
    cls: str
    """The module's class name."""
    trainable: int | None
    """Parameters with ``requires_grad`` in its subtree, each counted once; None while a lazy one's size is unknown."""
    frozen: int | None
    """Parameters without ``requires_grad`` in its subtree, packed weights included; None as above."""
    packed: int
    """Of those, the weights a quantized module keeps packed (no parameter of its own)."""
    shape: list[int | str] | None
    """Its first output's shape in the shape probe (a str for a size that is not a number); None: not probed."""
    dtype: str | None
    """That output's dtype, without ``torch.``; None: not probed."""
    children: list[TreeNode]
    """Its child modules, in registration order."""


@dataclass
class ProbeResult:
    """Output shape and dtype of each module's first output tensor, by path; ``unwatched``: the
    outermost ScriptModules, which take no hooks, so they and their submodules have no shape."""

    shapes: dict[str, list[int | str]]
    dtypes: dict[str, str]
    unwatched: list[str] = field(default_factory=list)
    called: set[int] = field(default_factory=set)  # ids of the modules whose forward ran
    swapped: set[str] = field(default_factory=set)  # parameters a module computed with another tensor in place of


def _within(path: str, prefix: str) -> bool:
    return prefix == "" or path == prefix or path.startswith(prefix + ".")


def hookable_modules(model: nn.Module) -> tuple[list[tuple[str, nn.Module]], list[str]]:
    """``(path, module)`` for each module that takes forward hooks, and the paths of the outermost ScriptModules."""
    hookable: list[tuple[str, nn.Module]] = []
    unwatched: list[str] = []
    for path, module in model.named_modules():
        if isinstance(module, torch.jit.ScriptModule):  # its submodules are ScriptModules too: name the outermost
            if not any(_within(path, outer) for outer in unwatched):
                unwatched.append(path)
        else:
            hookable.append((path, module))
    return hookable, unwatched


@contextlib.contextmanager
def forward_hooks(
    model: nn.Module, make_hook: Callable[[str], Callable[..., Any]], **options: Any
) -> Iterator[list[str]]:
    """``make_hook(path)`` as a forward hook on every hookable module for the body; yields the unwatched paths.

    Registering happens inside the ``try``, so hooks added before a failing registration are removed too.
    """
    modules, unwatched = hookable_modules(model)
    handles: list[RemovableHandle] = []
    try:
        for path, module in modules:
            handles.append(module.register_forward_hook(make_hook(path), **options))
        yield unwatched
    finally:
        for handle in handles:
            handle.remove()


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    items: Iterable[Any]
    if isinstance(value, (tuple, list)):
        items = value
    elif isinstance(value, dict):
        items = value.values()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [getattr(value, f.name) for f in dataclasses.fields(value)]
    else:
        return None
    for item in items:
        found = _first_tensor(item)
        if found is not None:
            return found
    return None


def describe_shape(tensor: torch.Tensor) -> list[int | str]:
    """The shape as a list; in a nested tensor a dim whose size differs between components reads ``"min..max"``."""
    if not tensor.is_nested:
        return list(tensor.shape)
    sizes = [part.shape for part in tensor.unbind()]  # works for strided and jagged layouts alike
    shape: list[int | str] = [len(sizes)]
    for dim in zip(*sizes, strict=True):  # components all have the same number of dims
        low, high = min(dim), max(dim)
        shape.append(low if low == high else f"{low}..{high}")
    return shape


def probe(model: nn.Module, inputs: Inputs) -> ProbeResult:
    """Run ``inputs`` once (eval mode, no grad) and note each module's first output's shape.

    ScriptModules take no hooks: they are listed in ``unwatched`` and the rest of the tree is probed.
    The model is left as found (state restored, temporary hooks removed), also when it raises; one with
    lazy modules not yet materialized is probed on a copy (``probe_copy``), so that they stay so.
    """
    result = ProbeResult({}, {})
    probed = probe_copy(model) if has_lazy(model) else model
    # the copy's modules stand for the model's, which come in the same order
    originals = {id(twin): id(m) for m, twin in zip(model.modules(), probed.modules(), strict=True)}

    def note_output(path: str) -> Callable[[nn.Module, Any, Any], None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            result.called.add(id(module))
            tensor = _first_tensor(output)
            if tensor is None or path in result.shapes:  # first call wins for shared modules
                return
            try:
                shape = describe_shape(tensor)
            except Exception:  # an exotic tensor leaves this one module without a shape, not the whole tree
                return
            result.shapes[path] = shape
            result.dtypes[path] = str(tensor.dtype).removeprefix("torch.")

        return hook

    # a model holding meta tensors may swap weights in for each call (offloaded): which, is seen only during the call
    watching = call_time_watch(probed) if holds_meta(probed) else contextlib.nullcontext()
    with forward_hooks(probed, note_output) as unwatched, preserved_state(probed), torch.no_grad(), watching as watch:
        result.unwatched = unwatched
        call_model(probed, inputs)
    result.called = {originals[i] for i in result.called if i in originals}
    result.swapped = set(watch.names) if watch is not None else set()
    return result


def build_tree(model: nn.Module, probed: ProbeResult | None = None) -> TreeNode:
    """Nested plain-data tree: path, name, class, parameter counts (subtree), output shape, children.

    Parameters shared between modules are counted once per subtree. A count that includes a lazy module's
    parameter not materialized yet is None: its size is unknown until the model's first forward. Packed weights (a
    quantized Linear's int8 weight and bias, ``packed``) are counted with the frozen ones: nothing trains them.
    """
    probed = probed or ProbeResult({}, {})
    packed_by_module = {id(m): packed_numel(m) for m in model.modules()}

    def node(path: str, name: str, module: nn.Module) -> TreeNode:
        counts: dict[bool, int | None] = {True: 0, False: 0}  # by requires_grad
        for param in module.parameters():  # parameters() already removes duplicates
            known = counts[param.requires_grad]
            counts[param.requires_grad] = None if known is None or is_lazy(param) else known + param.numel()
        packed = sum(packed_by_module.get(id(m), 0) for m in module.modules())  # modules() removes duplicates
        trainable, frozen = counts[True], counts[False]
        frozen = None if frozen is None else frozen + packed
        children = [
            node(f"{path}.{child_name}" if path else child_name, child_name, child)
            for child_name, child in module.named_children()
        ]
        return {
            "path": path,
            "name": name,
            "cls": type(module).__name__,
            "trainable": trainable,
            "frozen": frozen,
            "packed": packed,
            "shape": probed.shapes.get(path),
            "dtype": probed.dtypes.get(path),
            "children": children,
        }

    return node("", type(model).__name__, model)


SCRIPTED_ROOT = (
    "the model is a torch.jit.script module: ScriptModules take no hooks, so no module shows a shape or "
    "fires a hook; explore the model before scripting it"
)


def tree_node(tree: TreeNode, path: str) -> TreeNode | None:
    """The node of module ``path`` in ``tree`` (as ``build_tree`` made it), or None when the tree has no such module."""
    node = tree
    while node["path"] != path:
        child = next((c for c in node["children"] if _within(path, c["path"])), None)
        if child is None:
            return None
        node = child
    return node


def unwatched_note(unwatched: list[str]) -> str | None:
    """Which torch.jit.script modules the explorer cannot watch (they take no hooks); None when there are none."""
    if not unwatched:
        return None
    if "" in unwatched:
        return SCRIPTED_ROOT
    names = ", ".join(quoted(path) for path in unwatched)
    theirs = "its" if len(unwatched) == 1 else "their"
    return f"torch.jit.script modules take no hooks: {names} (and {theirs} submodules) show no shape and fire no hooks"
