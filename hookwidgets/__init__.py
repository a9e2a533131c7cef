"""hookwidgets: look inside PyTorch models through hooks, in a notebook or headless.

``from hookwidgets import HookExplorer``; ``%load_ext hookwidgets`` in a notebook. The widget and
IPython layers are imported lazily so that ``hookwidgets.core`` stays usable with torch alone.

Import from ``hookwidgets`` and ``hookwidgets.core``, and from ``hookwidgets.plots``, ``.widget``, ``.distributed``,
``.examples`` and ``.ipython`` (docs/api.md documents these and the few public modules inside them): every other
module is internal.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ._warnings import HookwidgetsWarning

# A library's logger stays silent until the application configures logging (logging.basicConfig, a handler
# on the "hookwidgets" logger); without this, Python's last-resort handler would print its warnings.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"
"""The package version."""
__all__ = [
    "Explorer",
    "HookExplorer",
    "HookwidgetsWarning",
    "RunView",
    "__version__",
    "disable_display",
    "enable_display",
    "load_ipython_extension",
    "open_run",
    "unload_ipython_extension",
]

if TYPE_CHECKING:
    from .core.explorer import Explorer
    from .distributed.run_view import RunView, open_run
    from .widget.explorer import HookExplorer


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext hookwidgets``: registers the ``%hookexplorer`` magic (display stays opt-in)."""
    from .ipython import load_ipython_extension as load

    load(ip)


def unload_ipython_extension(ip: Any) -> None:
    """``%unload_ext hookwidgets``: removes the magic and display printer, closes the explorers they made (their
    models left as found)."""
    from .ipython import unload_ipython_extension as unload

    unload(ip)


def enable_display(ip: Any = None) -> None:
    """Show an explorer for every ``nn.Module`` that ends a cell (the current IPython shell by default)."""
    from .ipython import enable_display as enable

    enable(ip)


def disable_display(ip: Any = None) -> None:
    """Undo ``enable_display()`` and close the explorers it made."""
    from .ipython import disable_display as disable

    disable(ip)


def __getattr__(name: str) -> Any:
    if name == "HookExplorer":
        from .widget.explorer import HookExplorer

        return HookExplorer
    if name == "Explorer":
        from .core.explorer import Explorer

        return Explorer
    if name in ("open_run", "RunView"):  # the run log reader: torch and numpy, imported when first asked for
        from .distributed import run_view

        return getattr(run_view, name)
    raise AttributeError(f"module 'hookwidgets' has no attribute {name!r}")
