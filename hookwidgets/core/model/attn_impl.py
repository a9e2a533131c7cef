"""The attention implementation a transformers model runs (``eager``, ``sdpa``, flash), read from its configs'
``_attn_implementation``, and eager attention for one run: only eager attention computes the probabilities."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from torch import nn

from ..display import display_name, quoted

EAGER = "eager"
_INTERNAL = "_attn_implementation_internal"  # where transformers' configs keep the value their property returns
_MISSING = object()


def reachable_configs(model: nn.Module) -> list[tuple[str, Any]]:
    """Every config that says how ``model`` attends, with where it was found: each module's ``config`` (the root's,
    every pretrained submodule's, an attention module's own) and, recursively, their sub-configs (CLIP's
    ``text_config`` and ``vision_config``); each config once."""
    found: dict[int, tuple[str, Any]] = {}

    def add(config: Any, where: str) -> None:
        if config is None or id(config) in found or not hasattr(config, "_attn_implementation"):
            return
        found[id(config)] = (where, config)
        for key in getattr(config, "sub_configs", None) or ():
            add(getattr(config, key, None), f"{key} of {where}")

    for path, module in model.named_modules():
        add(getattr(module, "config", None), f"the config of {quoted(path or '(model)')}")
    return list(found.values())


def implementation_at(model: nn.Module, path: str) -> str | None:
    """The attention implementation of the config nearest the module at ``path`` (its own, else its closest
    ancestor's), or None when no config up to the root says."""
    parts = path.split(".") if path else []
    for end in range(len(parts), -1, -1):
        config = getattr(model.get_submodule(".".join(parts[:end])), "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            implementation: str | None = config._attn_implementation
            return implementation
    return None


def hides_probabilities(implementation: str | None) -> bool:
    """Whether attention run by ``implementation`` computes no probabilities (sdpa, flash, flex, kernels)."""
    return implementation is not None and implementation not in (EAGER, "paged|eager")


def hidden_attention_note(path: str, implementation: str, index: int | None) -> str:
    """The note of a hook on an attention module whose probabilities the implementation does not compute."""
    where = "" if index is None else f" (output.{index})" if index >= 0 else " (the last element of its output)"
    return (
        f"attention probabilities are not computed under {implementation}: {quoted(path or '(model)')} returns None "
        f"in their place{where}; ex.attention() runs the model once with eager attention and returns them, or load "
        "the model with attn_implementation='eager' to see them in this hook"
    )


@contextlib.contextmanager
def eager_attention(model: nn.Module) -> Iterator[None]:
    """Run the body with every reachable config (and module that cached one) on eager attention, and put each
    back as found, also when the body raises. A config that will not take eager raises ValueError."""
    configs = reachable_configs(model)
    saved = [(config, _stored(config)) for _, config in configs]
    cached = [(m, m.__dict__["_attn_implementation"]) for m in model.modules() if _cached_implementation(m)]
    try:
        for _, config in configs:
            _store(config, EAGER)
        for module, _ in cached:
            module.__dict__["_attn_implementation"] = EAGER
        refused = [(where, config) for where, config in configs if config._attn_implementation != EAGER]
        if refused:
            raise ValueError(_refused_message(refused))
        yield
    finally:
        for config, value in saved:
            _restore(config, value)
        for module, value in cached:
            module.__dict__["_attn_implementation"] = value


def _cached_implementation(module: nn.Module) -> bool:
    """Whether a module keeps a copy of its config's implementation (some transformers models cache it at init)."""
    return isinstance(module.__dict__.get("_attn_implementation"), str)


def _stored(config: Any) -> tuple[str, Any]:
    """Which attribute holds the config's implementation, and its value as found (``_MISSING`` when absent)."""
    if _INTERNAL in vars(config):
        return _INTERNAL, vars(config)[_INTERNAL]
    return "_attn_implementation", vars(config).get("_attn_implementation", _MISSING)


def _store(config: Any, value: str) -> None:
    """Set ``value`` on ``config`` alone: the internal attribute, not the property, which also sets sub-configs."""
    setattr(config, _INTERNAL if _INTERNAL in vars(config) else "_attn_implementation", value)


def _restore(config: Any, stored: tuple[str, Any]) -> None:
    name, value = stored
    if value is _MISSING:
        vars(config).pop(name, None)
    else:
        setattr(config, name, value)


def _refused_message(refused: list[tuple[str, Any]]) -> str:
    names = ", ".join(
        f"{where} ({display_name(type(config).__name__)}: {config._attn_implementation!r})" for where, config in refused
    )
    return (
        f"attention() needs eager attention, the only implementation that computes attention probabilities, but "
        f"{names} stayed on another implementation when set to 'eager' (its _attn_implementation is fixed); "
        "build the model with attn_implementation='eager' (from_pretrained(..., attn_implementation='eager') or "
        "model.set_attn_implementation('eager')), or hook the module that computes the softmax over keys"
    )
