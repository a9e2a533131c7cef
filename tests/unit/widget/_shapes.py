"""The shapes of ``hookwidgets/widget/protocol.py`` as text, and a check that a value has one."""

from __future__ import annotations

import json
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict


def type_text(annotation: Any) -> str:
    """How docs/widget-protocol.md writes a type: ``int | None``, ``list[TreeNode]``, ``"attach"``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "Any"
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is list:
        return f"list[{type_text(args[0])}]"
    if origin is dict:
        return f"dict[{type_text(args[0])}, {type_text(args[1])}]"
    if isinstance(annotation, type):
        return annotation.__name__
    raise TypeError(f"no text for the annotation {annotation!r}")


def fields(shape: Any) -> dict[str, str]:
    """Each field of a TypedDict and its type as text, ``, optional`` after a field a message may leave out."""
    hints = get_type_hints(shape)
    return {
        name: type_text(hint) + (", optional" if name in shape.__optional_keys__ else "")
        for name, hint in hints.items()
    }


def problems(value: Any, annotation: Any, where: str = "") -> list[str]:
    """Where ``value`` differs from ``annotation`` (a TypedDict's keys exactly, recursively); empty when it fits."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is Any:
        return []
    if annotation is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if origin in (Union, types.UnionType):
        found = [problems(value, a, where) for a in args]
        return [] if any(not p for p in found) else [f"{where}: {value!r} fits none of {type_text(annotation)}"]
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is not {type_text(annotation)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__} is no list"]
        return [p for k, item in enumerate(value) for p in problems(item, args[0], f"{where}[{k}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} is no dict"]
        return [
            p
            for key, item in value.items()
            for p in [*problems(key, args[0], f"{where} key"), *problems(item, args[1], f"{where}[{key!r}]")]
        ]
    if is_typeddict(annotation):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} is no {annotation.__name__}"]
        hints = get_type_hints(annotation)
        extra = sorted(set(value) - set(hints))
        missing = sorted(annotation.__required_keys__ - set(value))
        found = [f"{where}: {annotation.__name__} has no field {extra}"] if extra else []
        found += [f"{where}: {annotation.__name__} lacks {missing}"] if missing else []
        for name in hints.keys() & value.keys():
            found += problems(value[name], hints[name], f"{where}.{name}")
        return found
    if annotation is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif annotation is bytes:
        ok = isinstance(value, (bytes, memoryview))
    else:
        ok = isinstance(value, annotation)
    return [] if ok else [f"{where}: {value!r} is no {type_text(annotation)}"]


def typed_dicts(module: types.ModuleType) -> dict[str, Any]:
    """Every TypedDict of hookwidgets the module holds (defines, or imports from the engine), by name."""
    return {
        name: obj
        for name, obj in vars(module).items()
        if is_typeddict(obj) and obj.__module__.startswith("hookwidgets.") and not name.startswith("_")
    }
