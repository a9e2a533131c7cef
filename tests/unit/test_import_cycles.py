"""No import cycle anywhere in hookwidgets, read from the source with ast: imports under TYPE_CHECKING count too,
so a module's dependencies go one way (the widget's handlers and live updates know a protocol, not the controller)."""

from __future__ import annotations

import ast
from pathlib import Path

import hookwidgets

from ._import_graph import cycles

ROOT = Path(hookwidgets.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = ["hookwidgets", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _imported(name: str) -> set[str]:
    """The modules of hookwidgets that ``name`` imports outside functions (TYPE_CHECKING blocks included), with the
    ``__init__`` of each package on the way that ``name`` is not itself inside (Python runs it first)."""
    package = name if SOURCES[name].name == "__init__.py" else name.rpartition(".")[0]
    targets: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue  # run when called, not on import
            if isinstance(child, ast.Import):
                targets.extend(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - (child.level - 1)] if child.level else []
                module = ".".join([*base, *([child.module] if child.module else [])])
                for alias in child.names:
                    sub = f"{module}.{alias.name}"
                    targets.append(sub if sub in SOURCES else module)
            visit(child)

    visit(ast.parse(SOURCES[name].read_text(encoding="utf-8")))
    edges = set()
    for target in targets:
        parts = target.split(".")
        for end in range(1, len(parts) + 1):
            ancestor = ".".join(parts[:end])
            if ancestor in SOURCES and ancestor != name and not name.startswith(ancestor + "."):
                edges.add(ancestor)
    return edges


def test_hookwidgets_has_no_import_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the finder finds one
    assert len(SOURCES) > 100 and "hookwidgets.widget.view" in _imported("hookwidgets.widget.explorer")
    found = cycles({name: _imported(name) for name in SOURCES})
    assert found == [], f"import cycles (TYPE_CHECKING imports count): {found}"
