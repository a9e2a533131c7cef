"""The engine's checks on hook kinds: which a path takes, and whether a callable fits one (the facts about each kind
are the rows of ``core/kind_table.py``)."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

from ..display import quoted
from ..kind_table import KINDS, Kind, names, rows, user_names

MODULE_KINDS = names(family="module")
"""The kinds valid on a module."""
GLOBAL_KINDS = names(family="global")
"""The kinds valid on the model itself (path ``""``), each firing for every module of the model."""
NODE_KINDS = names(family="node")
"""The kinds valid on an autograd node id from ``graph()``."""
PARAM_KINDS = user_names(family="param")
"""The kinds valid on a parameter, as users name them (``grad`` on a parameter is the engine's ``param_grad``)."""


def _valid(family: str, is_root: bool) -> tuple[Kind, ...]:
    """The rows of the kinds a path of ``family`` takes (the root module also takes the global kinds)."""
    if family in ("param", "node"):
        return rows(family=family)
    return rows(family="module") + (rows(family="global") if is_root else ())


def valid_kinds(family: str, is_root: bool = False) -> tuple[str, ...]:
    """Kinds a user may attach to a path of ``family`` (the root module also takes global kinds)."""
    return tuple(dict.fromkeys(k.user_name for k in _valid(family, is_root)))


def resolve_kind(kind: str, path: str, family: str) -> Kind:
    """The Kind for ``kind`` on a path; a ValueError listing the kinds valid there otherwise."""
    valid = valid_kinds(family, is_root=path == "")
    found = next((k for k in _valid(family, path == "") if k.user_name == kind), None)
    if found is None:
        what = {"param": "parameter", "node": "autograd node"}.get(family, "module")
        if isinstance(kind, str) and kind in KINDS and KINDS[kind].family == "global":
            hint = " (global kinds fire for every module of the model: attach them to path '')"
        elif isinstance(kind, str) and kind in KINDS and KINDS[kind].family == "node":
            hint = " (it applies to autograd node ids from ex.graph(), such as 'fc/AddmmBackward0#0')"
        elif isinstance(kind, str) and kind in KINDS:
            hint = f" (it applies to {KINDS[kind].family} paths)"
        else:
            close = difflib.get_close_matches(str(kind), valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"hook kind {kind!r} is not valid for {what} {quoted(path)}{hint}; valid kinds there: {', '.join(valid)}"
        )
    return found


def check_callable(fn: Callable[..., Any], spec: Kind, with_kwargs: bool = False) -> None:
    """Reject at attach time a user callable that could not take torch's arguments for ``spec``."""
    arity = spec.arity + (1 if with_kwargs and spec.kwargs_form else 0)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without a signature: torch will tell at call time
    try:
        signature.bind(*range(arity))
    except TypeError as exc:
        expected = spec.signature if not with_kwargs else spec.signature.replace("args", "args, kwargs")
        raise TypeError(
            f"the callable {quoted(getattr(fn, '__name__', fn))} cannot be a {spec.name!r} hook: torch calls it as "
            f"{expected} ({arity} positional arguments), and binding them failed: {exc}"
        ) from None


def takes_kwargs(spec: str, action: str | Callable[..., Any], with_kwargs: bool) -> bool:
    """Whether a module hook is registered in torch's ``with_kwargs`` form: as asked for a callable, and always for a
    built-in ``forward_pre`` or ``global_forward_pre`` action, which records keyword arguments as ``kwargs.<name>``."""
    kind = KINDS.get(spec)
    if kind is None or kind.phase != "forward":
        return False
    if kind.pre and not callable(action):
        return True  # torch hides keyword arguments from a pre-hook that does not ask for them
    return with_kwargs and kind.kwargs_form
