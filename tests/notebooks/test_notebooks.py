"""Every notebook in notebooks/ runs headlessly top to bottom; the asserts in its cells check the results."""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
EXPECTED = [
    "attributions",
    "distributed",
    "fsdp-run-log",
    "hooks-tour",
    "quickstart",
    "training-monitor",
    "transformers",
]
CELL_TIMEOUT = 240


def _notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_every_expected_notebook_is_there():
    assert [p.stem for p in _notebooks()] == EXPECTED


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_notebook_is_stored_clean_and_checks_its_results(path: Path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), f"{path.name}: clear its outputs"
    asserts = sum(len(re.findall(r"^\s*assert ", c.source, flags=re.M)) for c in code)
    assert asserts >= 5, f"{path.name} has {asserts} assert statements; check results, not only 'no error'"
    assert not re.search(r"https?://|urlretrieve|download=True", "\n".join(c.source for c in code))


@pytest.fixture(scope="module")
def trained_examples() -> None:
    """Train the example models once into this session's cache, so each notebook's kernel only loads them."""
    from hookwidgets.examples import induction_lm, pretrained_digits_cnn
    from hookwidgets.examples.vit import pretrained_digits_vit

    pretrained_digits_cnn()
    pretrained_digits_vit()
    induction_lm()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_notebook_runs_and_its_asserts_hold(path: Path, tmp_path: Path, trained_examples: None):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    start = time.monotonic()
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    seconds = time.monotonic() - start
    print(f"{path.name}: {seconds:.1f} s")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
