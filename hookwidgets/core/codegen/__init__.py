"""Plain-torch source that registers the explorer's hooks, for use without hookwidgets."""

from .generate import hook_code

__all__ = ["hook_code"]
