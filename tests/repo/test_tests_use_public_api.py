"""Tests observe hookwidgets through its public API: no test reads, calls, sets or imports a name hookwidgets
keeps private, except the few listed here, each with why; and tests, notebooks, the README and the docs import from
the public modules (those docs/api.md documents), not from the internal ones, but where listed here with why."""

from __future__ import annotations

import ast
import functools
import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import anywidget
import ipywidgets
import matplotlib.figure
import torch
from torch import nn

from tools.apidoc.page import MODULES

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


# --- Imports from the public modules only --------------------------------------------------------------------------

PUBLIC = frozenset(MODULES)
"""The public modules, as docs/api.md documents them; every other module of hookwidgets is internal."""
UNIT = ROOT / "tests" / "unit"

EVERY_DERIVED_LIST = "a kind added to the table is seen in every list derived from it, in each module that derives one"
INTERNAL_ALLOWED: dict[tuple[str, str], str] = {
    ("tests/reliability/_oracle.py", "hookwidgets.core.hooks"): (
        "the oracle names a firing's tensors (args.N, output.N) as the engine keys its captures"
    ),
    ("tests/reliability/test_fuzz.py", "hookwidgets.core.hooks"): (
        "tells torch's in-place collision error from the other errors a fuzzed model raises, as the engine does"
    ),
    ("tests/reliability/test_soak.py", "hookwidgets.core.hooks"): (
        "the timeline's cap, made small so that a short soak wraps it"
    ),
    ("tests/reliability/test_soak.py", "hookwidgets.widget"): (
        "the live path's intervals and share, set so that a short soak runs it many times"
    ),
    ("tests/repo/test_js_payloads.py", "hookwidgets.widget"): (
        "the page's JSDoc types are written from widget/protocol.py and checked against it"
    ),
    ("tests/unit/core/capture/test_views.py", "hookwidgets.core.model"): (
        "the token sequences a view is given, built by hand for the pure function under test"
    ),
    ("tests/unit/core/codegen/test_generate.py", "hookwidgets.core.capture"): (
        "the generated code's statistics checked against the engine's"
    ),
    ("tests/unit/core/codegen/test_generate.py", "hookwidgets.core.hooks"): (
        "the generated code's edits checked against the engine's"
    ),
    ("tests/unit/core/codegen/test_templates.py", "hookwidgets.core.capture"): (
        "the templates' statistics checked against the engine's"
    ),
    ("tests/unit/core/codegen/test_templates.py", "hookwidgets.core.hooks"): (
        "the templates' edits checked against the engine's"
    ),
    ("tests/unit/core/diagnostics/test_nonfinite.py", "hookwidgets.core.capture"): (
        "statistics combined across calls checked against those of the tensors concatenated"
    ),
    ("tests/unit/core/graph/test_scoping.py", "hookwidgets.core"): (
        "fault injection: the private torch API's fallback (core/_torch.py), listed in ALLOWED too"
    ),
    ("tests/unit/core/graph/test_scoping.py", "hookwidgets.core.model"): (
        "fault injection: the scope tracker's sequence reader replaced by that fallback"
    ),
    ("tests/unit/core/hooks/test_edits_axes.py", "hookwidgets.widget"): (
        "the widget's edit parser, a pure function, passes the new edit forms to the engine unchanged"
    ),
    ("tests/unit/core/model/test_blocks.py", "hookwidgets.core.diagnostics"): (
        "the logit lens on a model given directly: the block finding under test is what it reads through"
    ),
    ("tests/unit/core/model/test_compiled.py", "hookwidgets.widget"): (
        "what the widget shows of a compiled model's hook notes, a pure function of ex.hooks"
    ),
    ("tests/unit/core/model/test_mapping_inputs.py", "hookwidgets.core.attribution"): (
        "the copy of mapping inputs that attributions take gradients through"
    ),
    ("tests/unit/core/model/test_meta.py", "hookwidgets.widget"): (
        "what the view draws of a meta capture, a pure function of ex.captures"
    ),
    ("tests/unit/core/model/test_nested.py", "hookwidgets.core.attribution"): (
        "the layer tap on nested outputs, the unit attributions read layers through"
    ),
    ("tests/unit/core/model/test_nested.py", "hookwidgets.core.hooks"): (
        "edits keep the nested containers' types: the unit that rebuilds them"
    ),
    ("tests/unit/core/model/test_scope.py", "hookwidgets.core.graph"): (
        "the graph recorder, whose nodes the scope tracker places"
    ),
    ("tests/unit/core/model/test_preserved_state.py", "hookwidgets.core"): (
        "fault injection: torch's fused copy turned off (core/_torch.py), listed in ALLOWED too"
    ),
    ("tests/unit/core/test_kind_table.py", "hookwidgets.core.diagnostics"): EVERY_DERIVED_LIST,
    ("tests/unit/core/test_kind_table.py", "hookwidgets.core.hooks"): EVERY_DERIVED_LIST,
    ("tests/unit/core/test_kind_table.py", "hookwidgets.core.monitors"): EVERY_DERIVED_LIST,
    ("tests/unit/core/test_kind_table.py", "hookwidgets.widget"): EVERY_DERIVED_LIST,
    ("tests/unit/core/test_run.py", "hookwidgets.core.model"): (
        "the score resolution every analysis shares, on outputs built by hand"
    ),
    ("tests/unit/plots/test_complex_and_empty.py", "hookwidgets.core.hooks"): (
        "the print action's line for an empty tensor, a pure function"
    ),
    ("tests/unit/plots/test_distributed.py", "hookwidgets.distributed"): (
        "the rows the figures draw, from records built by hand"
    ),
    ("tests/unit/test_logging.py", "hookwidgets.examples"): (
        "the examples' weight cache, given a tiny model so that nothing trains"
    ),
    ("tests/unit/widget/test_view_protocol.py", "hookwidgets.core.model"): (
        "the engine's text for a scripted model's root, which the view shows as it is"
    ),
}
"""(test file, internal package) -> why the file may import that package's internal modules. A unit test needs no
entry for the package its folder mirrors (tests/unit/core/hooks/ for hookwidgets.core.hooks): there it checks the
internals at their own level."""

DOTTED = re.compile(r"\bhookwidgets(?:\.\w+)+")
"""A dotted name in a document: ``hookwidgets.core.Explorer``, ``hookwidgets.plots.distributed``."""


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def module_of(dotted: str) -> str:
    """The module a dotted name is in: its longest prefix that is a module of hookwidgets."""
    parts = dotted.split(".")
    return next(".".join(parts[:n]) for n in range(len(parts), 0, -1) if _is_module(".".join(parts[:n])))


def package_of(module: str) -> str:
    """The package holding ``module`` (a package holds itself)."""
    return module if ROOT.joinpath(*module.split("."), "__init__.py").is_file() else module.rpartition(".")[0]


def mirrored_by(module: str) -> Path:
    """The tests/unit folder of the package ``module`` is in: the deepest one mirroring its package's path."""
    parts = package_of(module).split(".")[1:]
    while parts and not UNIT.joinpath(*parts).is_dir():
        parts = parts[:-1]
    return UNIT.joinpath(*parts)


def imported_modules(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of each hookwidgets module a piece of code imports, reaches by attribute, or names in a
    ``monkeypatch.setattr("hookwidgets.x.y", ...)`` or ``import_module("hookwidgets.x")``."""
    imported = _imported(tree)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == PACKAGE:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield node.lineno, full if _is_module(full) else node.module
        elif isinstance(node, ast.Attribute) and id(node) not in inner:  # a whole chain, not a part of one
            chain, value = [], node
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            root = imported.get(value.id) if isinstance(value, ast.Name) else None
            if root is not None and root.split(".")[0] == PACKAGE and _is_module(root):
                yield node.lineno, module_of(".".join([root, *reversed(chain)]))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            dotted = node.args[0].value
            if (
                function in ("setattr", "delattr", "import_module")
                and isinstance(dotted, str)
                and DOTTED.fullmatch(dotted)
            ):
                yield node.lineno, module_of(dotted)


def _python(text: str) -> ast.Module:
    """A notebook cell or a Markdown code block as Python, its IPython magics and shell lines left out."""
    return ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines()))


def documents() -> Iterator[tuple[str, str, bool]]:
    """(where, text, is code) of the README, every Markdown file of docs/ and every notebook cell."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT).as_posix()
        yield where, text, False
        for block in re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
            yield where, block, True
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for number, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"], 1):
            source = "".join(cell["source"])
            where = f"{path.relative_to(ROOT).as_posix()} cell {number}"
            yield where, source, False
            if cell["cell_type"] == "code":
                yield where, source, True


def named_wrongly(dotted: str) -> str | None:
    """Why a dotted name in a document is not public (an internal module, or no public name of a public one)."""
    module = module_of(dotted)
    if module not in PUBLIC:
        return f"{module} is internal"
    rest = dotted.removeprefix(module).lstrip(".").split(".")[0]
    if rest and (_private(rest) or not hasattr(importlib.import_module(module), rest)):
        return f"{module} has no public {rest}"
    return None


@functools.cache
def internal_imports() -> dict[tuple[str, str], list[int]]:
    """(test file, internal package) -> the lines importing its modules, the mirrored package's aside."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for line, module in sorted(set(imported_modules(ast.parse(path.read_text(encoding="utf-8"))))):
            if module in PUBLIC or mirrored_by(module) == path.parent:
                continue
            found.setdefault((path.relative_to(ROOT).as_posix(), package_of(module)), []).append(line)
    return found


def test_every_public_module_is_documented_and_every_internal_package_says_it_is():
    assert {"hookwidgets", "hookwidgets.core"} <= PUBLIC and all(_is_module(m) for m in PUBLIC)
    packages = sorted(p.parent for p in (ROOT / PACKAGE).rglob("__init__.py"))
    for package in packages[1:]:  # hookwidgets itself says what is public
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
        assert "internal" in doc.lower(), f"{package.relative_to(ROOT)}: say in its docstring what is internal"


def test_tests_import_internal_modules_only_where_their_folder_mirrors_them_or_listed():
    unlisted = sorted(
        f"{file}:{line}: {package}"
        for (file, package), lines in internal_imports().items()
        if (file, package) not in INTERNAL_ALLOWED
        for line in lines
    )
    assert unlisted == [], "import the public name (hookwidgets, hookwidgets.core, ...) instead:\n" + "\n".join(
        unlisted
    )


def test_every_allowed_internal_import_is_still_there():
    assert [key for key in INTERNAL_ALLOWED if key not in internal_imports()] == []


def test_the_readme_docs_and_notebooks_teach_public_names_only():
    wrong, imports, names = [], set(), set()
    for where, text, is_code in documents():
        if is_code:
            modules = {module for _, module in imported_modules(_python(text))}
            wrong += [f"{where}: imports {module}" for module in sorted(modules) if module not in PUBLIC]
            imports |= modules
        else:
            wrong += [f"{where}: {dotted}: {why}" for dotted in DOTTED.findall(text) if (why := named_wrongly(dotted))]
            names.update(DOTTED.findall(text))
    assert {"hookwidgets.core", "hookwidgets.plots", "hookwidgets.examples"} <= imports and len(names) > 10
    assert wrong == []


def test_the_import_scan_sees_each_way_to_a_module():
    code = """\
import hookwidgets.core.capture.stats as stats
from hookwidgets.core import Explorer, hooks
from hookwidgets.widget.live import LiveUpdates
import hookwidgets.core
def test(monkeypatch):
    hookwidgets.core.graph.record.walk
    monkeypatch.setattr("hookwidgets.core.capture.native.DISABLE_ENV", "X")
"""
    found = sorted(imported_modules(ast.parse(code)))
    assert found == [
        (1, "hookwidgets.core.capture.stats"),
        (2, "hookwidgets.core"),
        (2, "hookwidgets.core.hooks"),
        (3, "hookwidgets.widget.live"),
        (4, "hookwidgets.core"),
        (6, "hookwidgets.core.graph.record"),
        (7, "hookwidgets.core.capture.native"),
    ]
    assert mirrored_by("hookwidgets.core.hooks.kinds") == UNIT / "core" / "hooks"
    assert mirrored_by("hookwidgets.core.codegen.templates") == UNIT / "core" / "codegen"
    assert mirrored_by("hookwidgets.core.display") == UNIT / "core"
    assert named_wrongly("hookwidgets.core.Explorer.attach") is None
    assert named_wrongly("hookwidgets.core.capture.stats") == "hookwidgets.core.capture.stats is internal"
    assert named_wrongly("hookwidgets.core.no_such_name") == "hookwidgets.core has no public no_such_name"
