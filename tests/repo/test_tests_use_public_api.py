"""Tests observe hookwidgets through its public API: no test reads, calls, sets or imports a name hookwidgets
keeps private, except the few listed here, each with why."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import anywidget
import ipywidgets
import matplotlib.figure
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "hookwidgets"

ENTRY_POINTS = frozenset({"_handle_msg", "_repr_mimebundle_", "_ipython_display_"})
"""ipywidgets' and IPython's entry points, which hookwidgets' objects answer too: the public ways in are the
widget comm's ``handle_msg`` (what the kernel calls for a message from the page) and IPython's display formatter."""

ALLOWED: dict[tuple[str, str], str] = {
    ("tests/unit/core/test_torch_apis.py", "_torch"): (
        "fault injection: a torch without a private API is faked by turning off the fact read at import"
    ),
    ("tests/unit/core/graph/test_scoping.py", "_torch"): (
        "fault injection: the sequence-number fallback for a torch without the reader is chosen at import"
    ),
    ("tests/unit/core/graph/test_scoping.py", "_probe_sequence_nr"): "that fallback, put in place of torch's reader",
    ("tests/unit/core/model/test_preserved_state.py", "_torch"): (
        "fault injection: a torch without the fused copy of many tensors is faked by turning off its fact"
    ),
    (
        "tests/unit/core/model/test_preserved_state.py",
        "_foreach_copy",
    ): "torch's fused copy, wrapped to count its calls",
    ("tests/unit/core/capture/test_fingerprint.py", "_strided_offsets"): (
        "the accelerator path's pure gather, checked on the CPU against the CPU fingerprint: CI has no accelerator"
    ),
    ("tests/unit/core/capture/test_fingerprint.py", "_device_print"): "as _strided_offsets: the gather itself",
    ("tests/unit/core/codegen/test_templates.py", "_edit"): (
        "a pure function of the generated code (private there, to keep off the user's names), checked against the "
        "engine's"
    ),
    ("tests/unit/core/codegen/test_templates.py", "_stats"): "as _edit",
    ("tests/unit/plots/test_feature_maps.py", "_labels"): (
        "box_size, a pure function of text, size and dpi, says where each label box lies; the tests check it "
        "against the shaded pixels"
    ),
}
"""(test file, private name) -> why the test may use it: fault injection, or a pure function whose unit test is
the right level."""


def _private(name: str) -> bool:
    return name.startswith("_") and name != "_" and not (name.startswith("__") and name.endswith("__"))


def _bound(node: ast.AST) -> Iterator[str]:
    """The names an assignment, a definition or a ``__slots__`` entry binds, as attribute or variable names."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name
    targets = node.targets if isinstance(node, ast.Assign) else []
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Attribute):
                yield part.attr
            elif isinstance(part, ast.Name):
                yield part.id
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
        yield from (c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str))
    if isinstance(node, ast.alias) and node.asname is not None:
        yield node.asname


@functools.cache
def hookwidgets_private_names() -> frozenset[str]:
    """Private names hookwidgets defines: its modules, and what its code binds (``self._x``, ``def _x``, ``_X =``)."""
    names = set()
    for path in (ROOT / PACKAGE).rglob("*.py"):
        names.update(part.removesuffix(".py") for part in path.relative_to(ROOT).parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names.update(_bound(node))
    return frozenset(name for name in names if _private(name))


@functools.cache
def foreign_names() -> frozenset[str]:
    """Private names of the torch, ipywidgets and matplotlib objects tests handle (``module._forward_hooks``,
    ``tensor._version``): checking those is checking that the model and the page are as found."""
    linear = nn.Linear(1, 1)
    objects = [
        linear,
        torch.ones(1).requires_grad_(),
        nn.Parameter(torch.ones(1)),
        torch.optim.SGD(linear.parameters(), lr=0.1),
        type(linear(torch.ones(1)).grad_fn),
        anywidget.AnyWidget,
        ipywidgets.DOMWidget,
        matplotlib.figure.Figure(),
    ]
    names = {name for obj in objects for name in [*dir(obj), *getattr(obj, "__dict__", {})]}
    return frozenset(name for name in names if _private(name)) - ENTRY_POINTS


def _imported(tree: ast.Module) -> dict[str, str]:
    """Each name a test file binds by import -> the dotted path of what it names (relative imports: tests')."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            module = "tests" if node.level else node.module or ""
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{module}.{alias.name}"
    return bound


def _own_objects(tree: ast.Module) -> set[int]:
    """Ids of ``self``/``cls`` names inside classes the test file defines: their private names are the test's."""
    own = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, ast.Name) and node.id in ("self", "cls"):
                own.add(id(node))
    return own


def _root(node: ast.AST, imported: dict[str, str]) -> str | None:
    """The dotted path an attribute chain starts from when its first name was imported, else None."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return imported.get(node.id) if isinstance(node, ast.Name) else None


def _attribute(node: ast.AST) -> tuple[ast.AST, str] | None:
    """(receiver, name) of ``x.name``, and of ``getattr(x, "name")`` or ``monkeypatch.setattr(x, "name", v)``."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    if not isinstance(node, ast.Call) or len(node.args) < 2:
        return None
    function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    name = node.args[1]
    if function in ("getattr", "setattr", "hasattr", "delattr") and isinstance(name, ast.Constant):
        return (node.args[0], name.value) if isinstance(name.value, str) else None
    return None


def uses(path: Path, ours: frozenset[str], theirs: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, name) of each private name of hookwidgets a test file reads, calls, sets or imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported, own = _imported(tree), _own_objects(tree)

    def hookwidgets_attribute(receiver: ast.AST, name: str) -> bool:
        if not _private(name) or id(receiver) in own:
            return False
        root = _root(receiver, imported)
        if root is not None:  # an imported module or class: whose it is decides
            return root.split(".")[0] == PACKAGE
        return name in ENTRY_POINTS or (name in ours and name not in theirs)

    for node in ast.walk(tree):
        named = _attribute(node)
        if named is not None and hookwidgets_attribute(*named):
            yield node.lineno, named[1]
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == PACKAGE:
            for name in [*node.module.split("."), *(alias.name for alias in node.names)]:
                if _private(name):
                    yield node.lineno, name
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            dotted = node.args[0].value  # monkeypatch.setattr("hookwidgets.x._y", v)
            if isinstance(dotted, str) and dotted.split(".")[0] == PACKAGE:
                yield from ((node.lineno, name) for name in dotted.split(".") if _private(name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield from ((node.lineno, name) for name in alias.name.split(".") if _private(name))


@functools.cache
def private_uses() -> dict[tuple[str, str], list[int]]:
    """(test file, private name) -> the lines that use it, over every Python file under tests/."""
    ours, theirs = hookwidgets_private_names(), foreign_names()
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for line, name in sorted(set(uses(path, ours, theirs))):
            found.setdefault((path.relative_to(ROOT).as_posix(), name), []).append(line)
    return found


def test_no_test_uses_a_private_name_of_hookwidgets_outside_the_allowed_few():
    found = private_uses()
    unlisted = sorted(
        (file, line, name) for (file, name), lines in found.items() if (file, name) not in ALLOWED for line in lines
    )
    listed = [f"{file}:{line}: {name}" for file, line, name in unlisted]
    assert listed == [], "observe the behaviour through the public API instead:\n" + "\n".join(listed)


def test_every_allowed_use_is_still_there():
    found = private_uses()
    assert [key for key in ALLOWED if key not in found] == []


SAMPLE = """\
import os
import torch
import hookwidgets.core._torch as apis
from hookwidgets.core.capture import native
from hookwidgets.plots._labels import box_size
class Helper:
    def __init__(self):
        self._registry = None
def test(ex, view, module, monkeypatch):
    ex._registry.clock.kept_steps()
    getattr(ex, "_watches")
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr("hookwidgets.core.capture.native._status", "")
    view._handle_msg({})
    module._forward_hooks.clear()
    torch._C._autograd, os._exit, apis.off()
"""


def test_the_scan_sees_each_way_to_a_private_name_and_leaves_torchs_and_the_tests_own(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(SAMPLE, encoding="utf-8")
    found = sorted(uses(sample, hookwidgets_private_names(), foreign_names()))
    assert found == [
        (3, "_torch"),
        (5, "_labels"),
        (10, "_registry"),
        (11, "_watches"),
        (12, "_tried"),
        (13, "_status"),
        (14, "_handle_msg"),
    ]
