"""What the code says about a public name: its signature as written, and the docstrings of its fields,
attributes and constants (the string literal after each assignment), read with ``inspect`` and ``ast``."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import textwrap
from typing import Any, is_typeddict

LONGEST_VALUE = 80  # characters of a value written out; a longer one is described by its type and length


def public_names(module: Any) -> list[str]:
    """``__all__``, or the public functions and classes the module defines, in definition order."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == module.__name__
    ]


def package_classes(cls: type, documented: dict[type, str]) -> list[type]:
    """``cls`` and its bases defined in hookwidgets, up to the first base documented on its own."""
    found = []
    for owner in cls.__mro__:
        if owner is not cls and owner in documented:
            break
        if owner.__module__.startswith("hookwidgets"):
            found.append(owner)
    return found


def own_doc(obj: Any) -> str | None:
    """The object's own docstring, cleaned (a dataclass's generated one and an inherited one are not its own)."""
    target = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    doc = vars(target).get("__doc__") if inspect.isclass(target) else getattr(target, "__doc__", None)
    if not doc or (dataclasses.is_dataclass(target) and doc.startswith(f"{target.__name__}(")):
        return None
    return inspect.cleandoc(doc)


def literal(value: Any) -> str:
    """A value as Python source with double quotes, as the code is formatted."""
    if isinstance(value, str):
        return '"' + repr(value)[1:-1].replace('"', '\\"').replace("\\'", "'") + '"'
    if isinstance(value, tuple):
        items = ", ".join(literal(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def parsed(obj: Any) -> tuple[str, ast.AST] | None:
    """The source of a function or class and its parsed definition, or None where there is no source."""
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(obj)))
    except (OSError, TypeError):
        return None
    return source, ast.parse(source).body[0]


def written_defaults(obj: Any) -> dict[str, str]:
    """Each parameter's default as its source writes it (``DEFAULT_MEMORY_BUDGET``, not the number)."""
    if inspect.isclass(obj):
        init = next((vars(c)["__init__"] for c in obj.__mro__ if "__init__" in vars(c)), None)
        if init is not None and parsed(init) is not None:
            return written_defaults(init)
        return {name: text for name, (text, _, _) in body_assignments(obj).items() if text is not None}
    found = parsed(obj)
    if found is None or not isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    source, args = found[0], found[1].args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    return {a.arg: ast.get_source_segment(source, d) or "" for a, d in pairs}


def body_assignments(cls: type) -> dict[str, tuple[str | None, str | None, str | None]]:
    """Name -> (default as written, annotation, docstring) of each assignment in the class bodies of ``cls``."""
    found: dict[str, tuple[str | None, str | None, str | None]] = {}
    for owner in reversed(cls.__mro__):
        source = parsed(owner) if owner.__module__.startswith("hookwidgets") else None
        if source is None or not isinstance(source[1], ast.ClassDef):
            continue
        for name, node, doc in documented_assignments(source[1].body):
            value = node.value
            written = ast.get_source_segment(source[0], value) if value is not None else None
            if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) == "field":
                written = next(
                    (ast.get_source_segment(source[0], k.value) for k in value.keywords if k.arg == "default"), None
                )
            annotation = ast.get_source_segment(source[0], node.annotation) if isinstance(node, ast.AnnAssign) else None
            found[name] = (written, annotation, doc)
    return found


def documented_assignments(body: list[ast.stmt], owner: str | None = None) -> list[tuple[str, ast.stmt, str | None]]:
    """(name, assignment, the string literal after it) for each assignment of ``body``; ``owner``: ``self.x`` only."""
    found = []
    for index, node in enumerate(body):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        following = body[index + 1] if index + 1 < len(body) else None
        is_doc = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
        doc = inspect.cleandoc(following.value.value) if is_doc and isinstance(following.value.value, str) else None
        for target in targets:
            for leaf in target.elts if isinstance(target, ast.Tuple) else [target]:
                if owner is None and isinstance(leaf, ast.Name):
                    found.append((leaf.id, node, doc))
                elif owner and isinstance(leaf, ast.Attribute) and getattr(leaf.value, "id", None) == owner:
                    found.append((leaf.attr, node, doc))
    return found


def fields(cls: type) -> list[tuple[str, str, str | None]]:
    """(name, type, docstring) of each public field of a dataclass, named tuple or TypedDict."""
    if is_typeddict(cls):
        names = list(cls.__annotations__.items())
    elif dataclasses.is_dataclass(cls):
        names = [(f.name, f.type) for f in dataclasses.fields(cls)]
    elif hasattr(cls, "_fields"):
        names = [(name, cls.__annotations__.get(name, "")) for name in cls._fields]
    else:
        return []
    written = body_assignments(cls)
    out = []
    for name, kind in names:
        if not name.startswith("_"):
            _, annotation, doc = written.get(name, (None, None, None))
            out.append((name, annotation or (kind if isinstance(kind, str) else inspect.formatannotation(kind)), doc))
    return out


def attributes(cls: type, documented: dict[type, str]) -> list[tuple[str, str, str | None]]:
    """(name, type, docstring) of each public attribute the ``__init__`` of ``cls`` (or an undocumented base) sets."""
    found: dict[str, tuple[str, str, str | None]] = {}
    for owner in package_classes(cls, documented):
        source = parsed(vars(owner)["__init__"]) if "__init__" in vars(owner) else None
        if source is None:
            continue
        for node in ast.walk(source[1]):
            body = getattr(node, "body", None)
            for name, assignment, doc in documented_assignments(body if isinstance(body, list) else [], "self"):
                if name.startswith("_") or name in found:
                    continue
                annotation = getattr(assignment, "annotation", None)
                kind = ast.get_source_segment(source[0], annotation) if annotation is not None else ""
                found[name] = (name, kind or "", doc)
    return list(found.values())


def constants(module: Any) -> list[tuple[str, str, str | None]]:
    """(name, value or type, docstring) of each public name of the module that is not callable."""
    out = []
    for name in public_names(module):
        value = getattr(module, name)
        if callable(value):
            continue
        text = literal(value)
        if len(text) > LONGEST_VALUE:
            text = f"{type(value).__name__} of {len(value)}" if hasattr(value, "__len__") else type(value).__name__
        else:
            text = f"`{text}`"
        out.append((name, text, constant_doc(module, name)))
    return out


def constant_doc(module: Any, name: str) -> str | None:
    """The string literal after the assignment of ``name``, in ``module`` or in the module it imports it from."""
    tree = ast.parse(inspect.getsource(module))
    for found, _, doc in documented_assignments(tree.body):
        if found == name:
            return doc
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            origin = next(a.name for a in node.names if (a.asname or a.name) == name)
            package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
            source = importlib.import_module("." * node.level + (node.module or ""), package)
            return constant_doc(source, origin)
    return None


def signature(obj: Any, is_method: bool) -> tuple[str, list[tuple[str, str]]]:
    """The parameters as the heading writes them, and (name, value) of each default written as a name."""
    function = getattr(obj, "__func__", obj)
    params = list(inspect.signature(function).parameters.values())
    if is_method and not isinstance(obj, staticmethod):
        params = params[1:]
    written = written_defaults(function)
    factories = {f.name: f.default_factory for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else {}
    parts: list[str] = []
    named: list[tuple[str, str]] = []
    star = False
    for param in params:
        if param.name.startswith("_"):
            continue
        if param.kind is param.VAR_POSITIONAL:
            parts.append(f"*{param.name}")
            star = True
            continue
        if param.kind is param.VAR_KEYWORD:
            parts.append(f"**{param.name}")
            continue
        if param.kind is param.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = param.name
        if param.name in factories and factories[param.name] is not dataclasses.MISSING:
            text += "=" + literal(factories[param.name]())
        elif param.default is not param.empty:
            default = written.get(param.name) or literal(param.default)
            text += "=" + default
            if re.fullmatch(r"[A-Za-z_][\w.]*", default) and default not in ("None", "True", "False"):
                named.append((default, literal(param.default)))
        parts.append(text)
        if param.kind is param.POSITIONAL_ONLY and params[-1] is not param:
            following = params[params.index(param) + 1]
            if following.kind is not param.POSITIONAL_ONLY:
                parts.append("/")
    return ", ".join(parts), named


def returns(obj: Any) -> str:
    """`` -> annotation`` as the code writes it, or nothing."""
    function = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    annotation = inspect.signature(function).return_annotation
    if annotation is inspect.Signature.empty:
        return ""
    return " -> " + (annotation if isinstance(annotation, str) else inspect.formatannotation(annotation))
