"""README.md opens with the pip install and an example that needs nothing more, keeps a clone's two commands under
Develop, links the API reference, lists every notebook, and links nothing missing."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib

from tests.readme import FIRST_LOOK, README, ROOT, code_blocks, first_example, section, sections
from tests.repo.test_torch_floor import declared_floor
from tests.unit.core.test_layers import LAYERS

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # [text](path) and ![alt](path), anchors dropped
BEYOND_THE_PACKAGE = ("sklearn", "hookwidgets.examples", "transformers", "torchvision")
"""What the README's later examples use and a bare ``pip install hookwidgets`` does not bring; the fresh
environment of tests/release runs the example with nothing else installed at all."""


def test_it_opens_with_pip_install_torch_first_then_hookwidgets():
    assert sections()[0] == "Install"
    commands = code_blocks(section("Install"), "bash")[0]
    assert [line.split("#")[0].strip() for line in commands.splitlines()] == [
        "pip install torch",
        "pip install hookwidgets",
    ]
    assert README.index("pip install hookwidgets") < README.index("```python")


def test_the_install_section_says_the_python_and_torch_floors_pyproject_declares():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    install = " ".join(section("Install").split())
    assert f"Python {requires.removeprefix('>=')} or later" in install
    assert f"torch {declared_floor()} or later" in install


def test_the_first_example_needs_nothing_beyond_the_package(tmp_path):
    example = first_example()
    assert "HookExplorer(" in example and ".close()" in example
    blocker = f"import sys\nsys.modules.update(dict.fromkeys({BEYOND_THE_PACKAGE!r}))  # None: importing raises\n"
    done = subprocess.run(
        [sys.executable, "-c", blocker + example], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"README's first example failed:\n{done.stderr}"


def test_the_first_example_shows_the_widget_as_its_cells_last_expression():
    """A bare ``ex`` shows the widget only as its cell's last expression: the cell that makes the explorer ends with
    it, and no cell has one anywhere else (where it shows nothing)."""
    cells = [ast.parse(cell).body for cell in code_blocks(section(FIRST_LOOK), "python")]
    bare = [
        (k, i == len(body) - 1)
        for k, body in enumerate(cells)
        for i, statement in enumerate(body)
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Name) and statement.value.id == "ex"
    ]
    made = next(k for k, body in enumerate(cells) if "HookExplorer(" in ast.unparse(body))
    assert bare == [(made, True)]


def test_it_says_what_each_notebook_front_end_needs():
    frontends = " ".join(section("Notebook front-ends").split())  # words, whatever the line breaks
    assert [name for name in ("JupyterLab", "Notebook 7", "VS Code", "Colab") if name not in frontends] == []
    assert "custom widget manager" in frontends  # Colab's, which anywidget turns on


def test_a_clones_two_commands_are_under_develop():
    commands = code_blocks(section("Develop"), "bash")[0]
    assert [line.split()[:2] for line in commands.splitlines()] == [["make", "demo"], ["make", "test"]]


def test_it_links_the_api_reference_and_every_notebook():
    links = set(LINK.findall(README))
    assert "docs/api.md" in links
    notebooks = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 5
    assert [n for n in notebooks if n not in links] == []


def test_every_local_link_and_image_exists():
    local = [link for link in LINK.findall(README) if not re.match(r"[a-z]+:", link)]
    assert any(link.endswith(".png") for link in local)  # the gallery shows screenshots
    assert [link for link in local if not (ROOT / link).exists()] == []


def _layout() -> dict[str, str]:
    """The README's Layout block: path -> what it says the path holds."""
    block = README.split("## Layout", 1)[1].split("```", 2)[1]
    return dict(line.split(maxsplit=1) for line in block.strip().splitlines())


def test_the_layout_names_only_paths_that_exist():
    assert [path for path in _layout() if not (ROOT / path).exists()] == []


def test_the_layout_names_every_package_and_test_folder():
    listed = set(_layout())
    folders = [
        p
        for parent in ("hookwidgets", "hookwidgets/core", "tests", "tools")
        for p in sorted((ROOT / parent).iterdir())
        if p.is_dir() and (p / "__init__.py").exists()
    ]
    assert len(folders) > 10
    assert [
        f"{p.relative_to(ROOT).as_posix()}/" for p in folders if f"{p.relative_to(ROOT).as_posix()}/" not in listed
    ] == []


def test_the_layout_lists_core_in_the_order_of_its_layers():
    """``hookwidgets/core``'s folders and modules, in the Layout, go down the layers the layer test enforces (a
    module imports only from its own layer and the ones listed before it); every layer that is a folder is listed."""
    listed = [
        path.removeprefix("hookwidgets/core/").rstrip("/").removesuffix(".py")
        for path in _layout()
        if path.startswith("hookwidgets/core/") and path != "hookwidgets/core/"
    ]
    rank = {head: k for k, layer in enumerate(LAYERS) for head in layer}
    assert [head for head in listed if head not in rank] == []
    assert listed == sorted(listed, key=rank.__getitem__)
    folders = {head for layer in LAYERS for head in layer if (ROOT / "hookwidgets" / "core" / head).is_dir()}
    assert folders - set(listed) == set()


def test_unit_tests_mirror_the_package():
    """Every folder of tests/unit/ is a package folder of hookwidgets/, and each package folder with code has one."""
    tests = ROOT / "tests" / "unit"
    mirrored = {p.relative_to(tests).as_posix() for p in tests.rglob("*") if p.is_dir() and any(p.glob("test_*.py"))}
    package = ROOT / "hookwidgets"
    folders = {
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_dir() and (p / "__init__.py").exists() and "templates" not in p.parts
    }
    assert mirrored - folders == set(), "a tests/unit folder with no package folder of that name"
    assert folders - mirrored == set(), "a package folder whose tests live elsewhere"
