"""Notebook views of the explorer (anywidget).

``HookExplorer`` and ``ExplorerView`` are public from here; the modules inside are internal.
"""

# The modules here import hookwidgets.plots inside the functions that draw: importing the widget imports no matplotlib.
from .explorer import HookExplorer
from .view import ExplorerView

__all__ = ["ExplorerView", "HookExplorer"]
