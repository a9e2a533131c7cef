"""hookwidgets: look inside PyTorch models through hooks, in a notebook or headless.

``from hookwidgets import HookExplorer``. The widget layer is imported lazily so that
``hookwidgets.core`` stays usable (and importable) with torch alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Explorer", "HookExplorer", "__version__"]

if TYPE_CHECKING:
    from .core.explorer import Explorer
    from .widget.explorer import HookExplorer


def __getattr__(name: str) -> Any:
    if name == "HookExplorer":
        from .widget.explorer import HookExplorer

        return HookExplorer
    if name == "Explorer":
        from .core.explorer import Explorer

        return Explorer
    raise AttributeError(f"module 'hookwidgets' has no attribute {name!r}")
