"""Fixtures of the widget-protocol tests: an explorer of the small CNN, closed after the test; an IPython shell."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from hookwidgets import HookExplorer


@pytest.fixture
def explorer(cnn, image) -> Iterator[HookExplorer]:
    cnn.eval()
    ex = HookExplorer(cnn, example_inputs=image)
    yield ex
    ex.close()


@pytest.fixture
def shell(tmp_path, monkeypatch) -> Iterator[InteractiveShell]:
    """An IPython shell (history in memory, its dir in tmp), as a notebook's kernel runs one; cleared after."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()
