"""Importing hookwidgets costs only what is used: matplotlib comes with drawing, safetensors with export."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import hookwidgets

PACKAGE = Path(hookwidgets.__file__).parent
DRAWING = "hookwidgets.plots"
"""The one package whose job is matplotlib figures: importing it imports matplotlib."""


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter of this environment (a module already imported here proves nothing)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=240
    )


def _modules() -> list[str]:
    """Every module of the package by file, without importing any (a walk by import would import plots)."""
    names = {".".join(("hookwidgets", *p.relative_to(PACKAGE).with_suffix("").parts)) for p in PACKAGE.rglob("*.py")}
    return sorted(name.removesuffix(".__init__") for name in names)


def test_no_module_outside_plots_imports_matplotlib_or_safetensors(tmp_path):
    modules = [name for name in _modules() if name != DRAWING and not name.startswith(DRAWING + ".")]
    assert len(modules) > 100 and "hookwidgets.widget.explorer" in modules and "hookwidgets.core" in modules
    done = _run(
        f"""
        import importlib, json, sys
        for name in {modules!r}:
            importlib.import_module(name)
            pulled = [m for m in ("matplotlib", "safetensors") if m in sys.modules]
            if pulled:
                print(json.dumps([name, pulled]))
                break
        else:
            print(json.dumps(None))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout.strip().splitlines()[-1])
    assert first is None, f"importing {first[0]} imported {first[1]}: import them inside the function that uses them"


def test_the_engine_attaches_runs_and_closes_with_matplotlib_and_safetensors_missing(tmp_path):
    """The headless engine needs torch only: with both packages unimportable it works, and only export says so."""
    done = _run(
        """
        import sys
        sys.modules.update(dict.fromkeys(["matplotlib", "safetensors"]))  # None: `import` raises ImportError
        import torch
        from torch import nn
        from hookwidgets import Explorer

        model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
        with Explorer(model, example_inputs=torch.randn(2, 4)) as ex:
            ex.attach("0", ["forward", "grad"])
            ex.run(target=0)
            assert ex.captures["0"]["forward"][-1].tensor.shape == (2, 3)
            assert ex.captures["0"]["grad"][-1].tensor.shape == (2, 3)
            try:
                ex.export("caps.safetensors")
            except ImportError as exc:
                print("export:", exc)
        print("closed")
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    said, closed = done.stdout.splitlines()
    assert said.startswith("export: ") and "safetensors" in said and closed == "closed"
