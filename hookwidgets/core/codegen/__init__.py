"""Plain-torch source that registers the explorer's hooks, for use without hookwidgets.

Internal: ``Explorer.code()`` is the public way in.
"""

from .generate import hook_code

__all__ = ["hook_code"]
