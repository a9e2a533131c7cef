"""Keywords renamed in a release: the old name keeps working for a while, with a DeprecationWarning naming the new."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from ._warnings import HookwidgetsDeprecationWarning

F = TypeVar("F", bound=Callable[..., Any])


def renamed(**old_to_new: str) -> Callable[[F], F]:
    """Let the decorated function take each old keyword as its new name; its signature shows the new names only."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    kwargs[new] = take_old(function, kwargs, old, new, stacklevel=3)
            return function(*args, **kwargs)

        return call  # type: ignore[return-value]

    return decorate


def take_old(function: Callable, kwargs: dict[str, Any], old: str, new: str, *, stacklevel: int, why: str = "") -> Any:
    """Pop ``kwargs[old]`` with a DeprecationWarning saying to pass ``new=`` (and ``why``); a TypeError when both
    were passed. ``stacklevel`` counts from this function to the caller of the public function."""
    name = function.__qualname__
    if new in kwargs:
        raise TypeError(f"{name}() got {new}= and {old}=, its former name: pass {new}= only")
    message = f"{name}({old}=...) is deprecated: pass {new}= instead{why}"
    warnings.warn(message, HookwidgetsDeprecationWarning, stacklevel=stacklevel)
    return kwargs.pop(old)
