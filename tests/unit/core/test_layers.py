"""hookwidgets.core stays torch-only and layered: imports go one way, no cycles, private torch APIs in one module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import hookwidgets.core

from .._import_graph import cycles


def test_core_imports_torch_only():
    code = (
        "import sys, hookwidgets.core, hookwidgets.core.explorer\n"
        "bad = [m for m in ('ipywidgets', 'anywidget', 'IPython', 'matplotlib') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_plots_import_no_widgets():
    code = "import sys, hookwidgets.plots\nprint(','.join(m for m in ('ipywidgets', 'anywidget') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


# --- The layers of hookwidgets.core, read from the source with ast -------------------------------------------------

CORE = Path(hookwidgets.core.__file__).resolve().parent
PACKAGE = "hookwidgets.core"
LAYERS = [
    ("display", "gc_pause", "_torch", "kind_table"),
    ("model",),
    ("capture",),
    ("graph",),
    ("hooks",),
    ("diagnostics",),
    ("attribution",),
    ("monitors",),
    ("codegen",),
    ("explorer",),
]
"""Lowest first: a module imports only from its own package and lower layers. The package's own ``__init__``
(the public names) sits with ``explorer``, on top."""
NOT_IN_CORE = ("ipywidgets", "IPython", "matplotlib", "anywidget", "traitlets")
PRIVATE_TORCH_NAMES = {
    "_use_count",
    "_storage_Use_Count",
    "_cdata",
    "_sequence_nr",
    "_get_sequence_nr",
    "_current_autograd_node",
    "_current_graph_task_id",
    "_top_saved_tensors_default_hooks",
    "_is_fwd_grad_enabled",
    "_is_full_backward_hook",
    "_global_is_full_backward_hook",
    "_orig_mod",
    "_compiled_call_impl",
    "_infer_parameters",
    "_raw_saved_",
    "_is_view",
    "OptimizedModule",
}
"""Private torch attributes (read as attributes or named in a string) that only ``core/_torch.py`` may touch."""
TORCH_API_MODULE = f"{PACKAGE}._torch"


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(CORE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {_module_name(path): path for path in sorted(CORE.rglob("*.py"))}


def _package_of(name: str) -> str:
    return name if SOURCES[name].name == "__init__.py" else name.rpartition(".")[0]


def _imports(name: str) -> list[tuple[str, bool]]:
    """``(imported module, at module level)`` for every import in module ``name``, TYPE_CHECKING blocks included
    (as module level); ``from X import a`` imports ``X.a`` when that is a module, else ``X``."""
    tree = ast.parse(SOURCES[name].read_text(encoding="utf-8"))
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name, top) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = _package_of(name).split(".")
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    found.append((sub if sub in SOURCES else target, top))
            visit(child, nested)

    visit(tree, True)
    return found


def _edges(name: str) -> set[str]:
    """The core modules that importing ``name`` runs at once: those it imports at module level, and the
    ``__init__`` of each package they are in that ``name`` is not itself inside (Python runs it first)."""
    edges = set()
    for target, top in _imports(name):
        if not top or not target.startswith(PACKAGE):
            continue
        parts = target.split(".")
        for end in range(2, len(parts) + 1):
            ancestor = ".".join(parts[:end])
            if ancestor in SOURCES and ancestor != name and not name.startswith(ancestor + "."):
                edges.add(ancestor)
    return edges


def _layer(name: str) -> int:
    head = name.removeprefix(PACKAGE).lstrip(".").split(".")[0]
    for rank, layer in enumerate(LAYERS):
        if head in layer:
            return rank
    return len(LAYERS) - 1  # the package's __init__


def test_every_core_module_has_a_layer():
    heads = {name.removeprefix(PACKAGE).lstrip(".").split(".")[0] for name in SOURCES} - {""}
    placed = {head for layer in LAYERS for head in layer}
    assert heads - placed == set(), "a module or subpackage of core with no layer: add it to LAYERS"


def test_core_imports_go_one_way_down_the_layers():
    upward = [f"{name} -> {target}" for name in SOURCES for target in _edges(name) if _layer(target) > _layer(name)]
    assert upward == [], "imports from a higher layer: " + "; ".join(upward)


def test_core_has_no_import_cycle():
    found = cycles({name: _edges(name) for name in SOURCES})
    assert found == [], f"import cycles in core (TYPE_CHECKING imports count): {found}"


def test_core_never_imports_display_libraries():
    found = [
        f"{name} imports {target}"
        for name in SOURCES
        for target, _ in _imports(name)
        if target.split(".")[0] in NOT_IN_CORE
    ]
    assert found == []


GENERATED_CODE = "hookwidgets.core.codegen.templates."
"""Source of the code ``ex.code()`` writes out: plain torch that runs without hookwidgets, so it reads torch's
private APIs itself (guarded in the generated text), not through core/_torch.py."""


def test_private_torch_apis_only_in_core_torch():
    found = []
    for name, path in SOURCES.items():
        if name == TORCH_API_MODULE or name.startswith(GENERATED_CODE):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE_TORCH_NAMES:
                found.append(f"{name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Attribute) and _torch_private_chain(node):
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
            elif _private_name_string(node, docstrings):
                found.append(f"{name}:{node.lineno} {node.value!r}")
        for target, _ in _imports(name):
            if target.split(".")[0] == "torch" and (
                any(part.startswith("_") for part in target.split(".")) or target == "torch.nn.modules.module"
            ):
                found.append(f"{name} imports {target}")
    assert found == [], "private torch APIs outside core/_torch.py: " + "; ".join(found)


def _torch_private_chain(node: ast.Attribute) -> bool:
    """``torch._C…``, ``torch.utils._pytree…``: an attribute chain from the name ``torch`` through a private part."""
    parts = []
    value: ast.AST = node
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    return isinstance(value, ast.Name) and value.id == "torch" and any(part.startswith("_") for part in parts)


def _private_name_string(node: ast.AST, docstrings: set[int]) -> bool:
    """A string (not a docstring) naming a private torch attribute, as ``getattr(m, "_orig_mod")`` would."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in docstrings:
        return False
    return node.value in PRIVATE_TORCH_NAMES or node.value.startswith("_raw_saved_")


def test_codegen_reads_no_private_field_of_what_it_writes_out():
    """The code is written from what each hook says of itself publicly (``HookInfo``'s fields and properties)."""
    found = []
    for name, path in SOURCES.items():
        if not name.startswith(f"{PACKAGE}.codegen") or name.startswith(GENERATED_CODE):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            private = isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__")
            if private:
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.ImportFrom):
                found += [f"{name}:{node.lineno} imports {a.name}" for a in node.names if a.name.startswith("_")]
    assert found == []
