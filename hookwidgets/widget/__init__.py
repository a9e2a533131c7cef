"""Notebook views of the explorer (anywidget)."""

from .explorer import HookExplorer
from .view import ExplorerView

__all__ = ["ExplorerView", "HookExplorer"]
