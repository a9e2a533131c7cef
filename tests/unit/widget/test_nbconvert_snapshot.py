"""A notebook executed and converted by ``jupyter nbconvert --to html`` shows the explorer's snapshot, not nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

CELL = """\
import torch
from torch import nn
from hookwidgets import HookExplorer

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
model.add_module("<script>alert(1)</script>", nn.Linear(8, 2))
ex = HookExplorer(model, example_inputs=torch.randn(3, 4))
ex.attach("0", ["forward", "grad"])
ex.run(target=0)
ex.view.selected = "0"
ex"""


def _convert(folder: Path, *options: str) -> str:
    """``jupyter nbconvert --to html --execute`` of a notebook whose one cell shows an explorer; the page's text."""
    notebook = folder / "shared.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)]), notebook)
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", *options, str(notebook)]
    command += ["--ExecutePreprocessor.timeout=120", "--ExecutePreprocessor.kernel_name=python3"]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return (folder / "shared.html").read_text(encoding="utf-8")


def _output_cell(page: str) -> str:
    """The converted cell that holds the explorer's output (nbconvert's own scripts are outside it)."""
    cells = re.split(r'(?=<div class="jp-Cell )', page)
    (cell,) = [chunk for chunk in cells[1:] if "jp-OutputArea-output" in chunk]  # cells[0]: the head, its styles
    return cell


@pytest.mark.timeout(400)
def test_nbconvert_html_shows_the_tree_and_the_figures_with_no_script(tmp_path: Path):
    # As a notebook saved from JupyterLab (which keeps no widget state unless asked to): nbconvert has no widget to
    # embed and shows the bundle's text/html.
    cell = _output_cell(_convert(tmp_path, "--ExecutePreprocessor.store_widget_state=False"))

    assert "<script" not in cell.lower() and "widget-view+json" not in cell
    assert 'class="hw-static"' in cell and "&lt;HookExplorer of Sequential: 4 modules, 2 hooks, step 1&gt;" in cell
    selected = re.search(r'<div class="hw-s-row hw-s-selected" title="0">.*?</div>', cell, flags=re.S)
    assert selected and re.findall(r'data-kind="(\w+)"[^>]*>(\w+ \d+)</span>', selected.group(0)) == [
        ("forward", "fwd 1"),
        ("grad", "grad 1"),
    ]
    assert "<span>&lt;script&gt;alert(1)&lt;/script&gt;</span>" in cell  # the module's name, as text
    images = re.findall(r"<img [^>]*>", cell)  # nbconvert writes the attributes in its own order
    assert len(images) == 2 and all('src="data:image/png;base64,iVBORw0KGgo' in image for image in images)
