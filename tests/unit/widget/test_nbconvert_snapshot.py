"""A notebook executed and converted by ``jupyter nbconvert --to html`` shows the explorer's snapshot, not nothing:
the one of the explorer as the notebook left it, with or without the widget's state saved."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

SHOW = """\
import torch
from torch import nn
from hookwidgets import HookExplorer

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
model.add_module("<script>alert(1)</script>", nn.Linear(8, 2))
ex = HookExplorer(model, example_inputs=torch.randn(3, 4))
ex"""
USE = """\
ex.attach("0", ["forward", "grad"])
ex.run(target=0)
ex.view.selected = "0"
"""
"""Shown first, used after: the notebook keeps the snapshot of the explorer as the second cell left it."""


def _convert(folder: Path, *options: str) -> str:
    """``jupyter nbconvert --to html --execute`` of a notebook that shows an explorer, then uses it; the page's text."""
    notebook = folder / "shared.ipynb"
    cells = [nbformat.v4.new_code_cell(SHOW), nbformat.v4.new_code_cell(USE)]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), notebook)
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


def _outputs(cell: str) -> list[str]:
    """The cell's outputs, in order (each a ``jp-OutputArea-child``)."""
    return re.split(r'(?=<div class="jp-OutputArea-child)', cell)[1:]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("widget_state", ["saved", "not saved"])
def test_nbconvert_html_shows_the_snapshot_as_the_later_cell_left_it_with_no_script(tmp_path: Path, widget_state):
    # Not saved: as a notebook saved from JupyterLab, which keeps no widget state unless asked to. Saved: nbconvert's
    # default, where the page embeds the widget for a browser that can load it.
    options = [] if widget_state == "saved" else ["--ExecutePreprocessor.store_widget_state=False"]
    widget, snapshot = _outputs(_output_cell(_convert(tmp_path, *options)))

    # The widget's output: the embedded widget, or where there is none its text; never the snapshot a second time.
    assert "hw-static" not in widget
    if widget_state == "saved":
        assert '<script type="application/vnd.jupyter.widget-view+json">' in widget
    else:
        assert "<script" not in widget.lower() and "&lt;HookExplorer of Sequential: 4 modules, 0 hooks" in widget
    # The snapshot's output: replaced when the second cell attached and ran, as that cell left the explorer.
    assert "<script" not in snapshot.lower() and 'class="hw-static"' in snapshot
    assert "&lt;HookExplorer of Sequential: 4 modules, 2 hooks, step 1&gt;" in snapshot
    selected = re.search(r'<div class="hw-s-row hw-s-selected" title="0">.*?</div>', snapshot, flags=re.S)
    assert selected and re.findall(r'data-kind="(\w+)"[^>]*>(\w+ \d+)</span>', selected.group(0)) == [
        ("forward", "fwd 1"),
        ("grad", "grad 1"),
    ]
    assert "<span>&lt;script&gt;alert(1)&lt;/script&gt;</span>" in snapshot  # the module's name, as text
    images = re.findall(r"<img [^>]*>", snapshot)  # nbconvert writes the attributes in its own order
    assert len(images) == 2 and all('src="data:image/png;base64,iVBORw0KGgo' in image for image in images)
