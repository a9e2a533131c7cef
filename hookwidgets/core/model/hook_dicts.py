"""Hooks that others attached to the model: listed beside the explorer's own, never removed."""

from __future__ import annotations

from collections.abc import Mapping, Set

from torch import nn

from .._torch import LAZY_INIT_HOOK, global_module_hooks

# Module attribute holding the hook dict -> the kind it corresponds to.
MODULE_DICTS = {
    "_forward_pre_hooks": "forward_pre",
    "_forward_hooks": "forward",
    "_backward_pre_hooks": "backward_pre",
    "_backward_hooks": "backward",
}
HOOK_DICTS = (
    *MODULE_DICTS,
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)
"""Every module attribute holding hooks or their flags: a copy of a module is given dicts of its own for them."""


def _is_lazy_init(module: nn.Module, hook: object) -> bool:
    """True for the pre-hook a lazy module (``nn.LazyLinear``…) registers on itself to materialize at its
    first forward: torch's own machinery, gone after that forward, not a hook anyone attached."""
    return (
        LAZY_INIT_HOOK is not None
        and getattr(hook, "__func__", None) is LAZY_INIT_HOOK
        and getattr(hook, "__self__", None) is module
    )


def _name(hook: object) -> str:
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or type(hook).__name__


def foreign_hooks(
    model: nn.Module,
    own_ids: set[int],
    explorers: Mapping[int, tuple[str, str, str]] | None = None,
    hidden: Set[int] = frozenset(),
) -> list[tuple[str, str, str]]:
    """``(path, kind, hook name)`` for every hook on the model whose handle id is not in ``own_ids``.

    Covers module hook dicts, parameter tensor and post-accumulate hooks, and the process-wide
    global module hooks (shown on path ``""``, since they fire for this model too). ``explorers`` maps
    the handle ids of other explorers' hooks to the one entry each such hook is listed as (a global kind
    is one hook on every module); ``hidden``: ids of their machinery (step trackers), not listed.
    """
    explorers = explorers or {}
    found: list[tuple[str, str, str]] = []
    listed: set[tuple[str, str, str]] = set()

    def add(key: int, entry: tuple[str, str, str]) -> None:
        if key in own_ids:
            return
        entry = explorers.get(key, entry)
        if key in explorers and entry in listed:
            return  # another explorer's hook, listed once
        if key in hidden and key not in explorers:
            return
        listed.add(entry)
        found.append(entry)

    for path, module in model.named_modules():
        for attr, kind in MODULE_DICTS.items():
            for key, h in getattr(module, attr).items():
                if not _is_lazy_init(module, h):
                    add(key, (path, kind, _name(h)))
    for name, param in model.named_parameters():
        for key, hook in (param._backward_hooks or {}).items():
            add(key, (name, "grad", _name(hook)))
        for key, hook in (getattr(param, "_post_accumulate_grad_hooks", None) or {}).items():
            add(key, (name, "post_accumulate", _name(hook)))
    for kind, hooks in global_module_hooks().items():
        for key, h in hooks.items():
            add(key, ("", kind, _name(h)))
    return found
