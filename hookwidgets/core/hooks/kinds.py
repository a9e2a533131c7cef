"""Hook kinds: which targets each applies to, when it fires, and the signature of its callable."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from ..display import quoted


@dataclass(frozen=True)
class Kind:
    """One hook kind: the target family it applies to, its phase, and torch's callable arity."""

    name: str
    family: str  # "module", "global" (target ""), "param" or "node" (an autograd node id)
    phase: str  # "forward" or "backward"
    arity: int  # positional arguments of torch's hook signature
    signature: str  # shown in errors about user callables


KINDS = {
    k.name: k
    for k in (
        Kind("forward_pre", "module", "forward", 2, "hook(module, args)"),
        Kind("forward", "module", "forward", 3, "hook(module, args, output)"),
        Kind("backward_pre", "module", "backward", 2, "hook(module, grad_output)"),
        Kind("backward", "module", "backward", 3, "hook(module, grad_input, grad_output)"),
        Kind("grad", "module", "backward", 1, "hook(grad)"),
        Kind("legacy_backward", "module", "backward", 3, "hook(module, grad_input, grad_output)"),
        Kind("global_forward_pre", "global", "forward", 2, "hook(module, args)"),
        Kind("global_forward", "global", "forward", 3, "hook(module, args, output)"),
        Kind("global_backward_pre", "global", "backward", 2, "hook(module, grad_output)"),
        Kind("global_backward", "global", "backward", 3, "hook(module, grad_input, grad_output)"),
        Kind("global_grad", "global", "backward", 1, "hook(grad)"),
        Kind("param_grad", "param", "backward", 1, "hook(grad)"),
        Kind("post_accumulate", "param", "backward", 1, "hook(param)"),
        Kind("node_pre", "node", "backward", 1, "hook(grad_outputs)"),
        Kind("node", "node", "backward", 2, "hook(grad_inputs, grad_outputs)"),
    )
}
"""Each hook kind's name → its ``Kind``: target family, phase, torch's callable arity and signature."""
MODULE_KINDS = tuple(k for k, spec in KINDS.items() if spec.family == "module")
"""The kinds valid on a module."""
GLOBAL_KINDS = tuple(k for k, spec in KINDS.items() if spec.family == "global")
"""The kinds valid on the model itself (target ``""``), each firing for every module of the model."""
NODE_KINDS = ("node_pre", "node")
PARAM_KINDS = ("grad", "post_accumulate")
"""The kinds valid on a parameter, as users name them (``grad`` on a parameter is the engine's ``param_grad``)."""
WIDGET_KINDS = ("forward_pre", "forward", "backward_pre", "backward", "grad")


def valid_kinds(family: str, is_root: bool = False) -> tuple[str, ...]:
    """Kinds a user may attach to a target of ``family`` (the root module also takes global kinds)."""
    if family == "param":
        return PARAM_KINDS
    if family == "node":
        return NODE_KINDS
    return MODULE_KINDS + (GLOBAL_KINDS if is_root else ())


def resolve_kind(kind: str, target: str, family: str) -> Kind:
    """The Kind for ``kind`` on a target; a ValueError listing the kinds valid there otherwise."""
    valid = valid_kinds(family, is_root=target == "")
    if not isinstance(kind, str) or kind not in valid:
        what = {"param": "parameter", "node": "autograd node"}.get(family, "module")
        if isinstance(kind, str) and kind in KINDS and KINDS[kind].family == "global":
            hint = " (global kinds fire for every module of the model: attach them to target '')"
        elif isinstance(kind, str) and kind in KINDS and KINDS[kind].family == "node":
            hint = " (it applies to autograd node ids from ex.graph(), such as 'fc/AddmmBackward0#0')"
        elif isinstance(kind, str) and kind in KINDS:
            hint = f" (it applies to {KINDS[kind].family} targets)"
        else:
            close = difflib.get_close_matches(str(kind), valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"hook kind {kind!r} is not valid for {what} {quoted(target)}{hint}; valid kinds there: {', '.join(valid)}"
        )
    return KINDS["param_grad" if family == "param" and kind == "grad" else kind]


def check_callable(fn: Callable, spec: Kind, with_kwargs: bool = False) -> None:
    """Reject at attach time a user callable that could not take torch's arguments for ``spec``."""
    arity = spec.arity + (1 if with_kwargs and spec.name in ("forward_pre", "forward") else 0)
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


def takes_kwargs(spec: str, action: str | Callable, with_kwargs: bool) -> bool:
    """Whether a module hook is registered in torch's ``with_kwargs`` form: as asked for a callable, and always for a
    built-in ``forward_pre`` or ``global_forward_pre`` action, which records keyword arguments as ``kwargs.<name>``."""
    if spec in ("forward_pre", "global_forward_pre") and not callable(action):
        return True  # torch hides keyword arguments from a pre-hook that does not ask for them
    return with_kwargs and spec in ("forward_pre", "forward")
