"""Fixtures of the widget-protocol tests: an explorer of the small CNN, closed after the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hookwidgets import HookExplorer


@pytest.fixture
def explorer(cnn, image) -> Iterator[HookExplorer]:
    cnn.eval()
    ex = HookExplorer(cnn, example_inputs=image)
    yield ex
    ex.close()
