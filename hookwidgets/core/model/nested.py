"""The tensors inside nested values (outputs, args, gradients): tuples, lists, dicts and dataclasses."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, cast

import torch

from .._torch import tree_leaves


def is_dataclass_value(value: Any) -> bool:
    """Whether ``value`` is a dataclass instance (not a dataclass type)."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def children(value: Any) -> Iterable[tuple[Any, Any]] | None:
    """``(key, item)`` pairs of a container: indexes of a tuple or list, keys of a mapping, fields of a
    dataclass; None for anything else."""
    if isinstance(value, (tuple, list)):
        return enumerate(value)
    # Mappings before dataclasses: HF's ModelOutput is both, and its dict holds only the fields that are set.
    if isinstance(value, Mapping):
        return value.items()
    if is_dataclass_value(value):
        return [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    return None


def named_tensors(prefix: str, value: Any) -> dict[str, torch.Tensor]:
    """Tensors inside a (nested) value, named ``prefix``, ``prefix.0``, ``prefix.key``, ``prefix.field``…"""
    if isinstance(value, torch.Tensor):  # the common case, kept cheap: hooks call this on every firing
        return {prefix: value}
    found: dict[str, torch.Tensor] = {}
    _collect(prefix, value, found, set())
    return found


def _collect(prefix: str, value: Any, found: dict[str, torch.Tensor], path: set[int]) -> None:
    if isinstance(value, torch.Tensor):
        found[prefix] = value
        return
    items = children(value)
    # A container already on the path is a cycle (a dataclass pointing back at its parent): not walked again.
    if items is None or id(value) in path:
        return
    path.add(id(value))
    for key, item in items:
        _collect(f"{prefix}.{key}", item, found, path)
    path.discard(id(value))


def tensors_in(value: Any) -> list[torch.Tensor]:
    """Every tensor inside a (nested) value, in order."""
    return list(named_tensors("", value).values())


def output_tensors(output: Any) -> list[torch.Tensor]:
    """The tensors in an output structure, in order: pytree's containers, and dataclasses inside them."""
    # pytree knows registered types (deque, custom nodes) but not dataclasses, which it leaves whole.
    return [t for leaf in tree_leaves(output) for t in tensors_in(leaf)]


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor inside a (nested) value, or None."""
    return next(iter(named_tensors("", value).values()), None)


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``value`` with ``fn`` applied to every tensor inside; containers are rebuilt with their types and their
    own state (namedtuples, a defaultdict's factory, attributes of list and dict subclasses, dataclasses through
    ``dataclasses.replace``), anything else passes."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        items = [map_tensors(v, fn) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # namedtuples too
    if isinstance(value, list):
        items = [map_tensors(v, fn) for v in value]
        if type(value) is list:
            return items
        rebuilt = copy.copy(value)  # a subclass: its attributes kept, its __init__ (maybe other arguments) not called
        rebuilt[:] = items
        return rebuilt
    if isinstance(value, Mapping):
        return rebuilt_mapping(value, {k: map_tensors(v, fn) for k, v in value.items()})
    if is_dataclass_value(value):
        # replace() passes init fields only (it refuses the others); __post_init__ recomputes those.
        changes = {f.name: map_tensors(getattr(value, f.name), fn) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def rebuilt_mapping(value: Mapping[Any, Any], mapped: dict[Any, Any]) -> Mapping[Any, Any]:
    """A mapping of ``value``'s type holding ``mapped``'s items."""
    if type(value) is dict:
        return mapped
    if isinstance(value, MutableMapping) and not is_dataclass_value(value):
        # A copy with its items replaced keeps what a subclass holds besides them (a defaultdict's
        # default_factory, attributes) and needs no particular __init__ (a defaultdict's takes a factory first).
        try:
            rebuilt = copy.copy(value)
        except Exception:  # a mapping that cannot be copied: built from the dict below
            rebuilt = None
        if rebuilt is not None and rebuilt is not value:
            for key, item in mapped.items():
                rebuilt[key] = item
            return rebuilt
    try:  # HF's ModelOutput (a dataclass and a dict) rebuilds its fields from a dict; a read-only mapping too
        build = cast(Callable[[dict[Any, Any]], Mapping[Any, Any]], type(value))  # a concrete type, unlike Mapping
        return build(mapped)
    except TypeError:  # a mapping type not built from a dict: a plain dict
        return mapped
