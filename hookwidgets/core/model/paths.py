"""Resolve the paths of hooks' places (module paths, parameter names, autograd node ids) to objects, with
close-match errors."""

from __future__ import annotations

import difflib
from typing import cast

from torch import nn

from .._torch import COMPILED_INNER, compiled_inner
from ..display import display_name, quoted
from .scope import parse_node_id


def module_paths(model: nn.Module) -> list[str]:
    """All module paths of ``model`` in registration order; the root is ``""``."""
    return [path for path, _ in model.named_modules(remove_duplicate=False)]


def describe_path(path: str) -> str:
    """How a path is shown in messages: the root has no name of its own."""
    return "'' (the model itself)" if path == "" else quoted(path)


def resolve_module(model: nn.Module, path: str) -> nn.Module:
    """The submodule at ``path`` (``""``: the model); a KeyError naming the closest paths when there is none."""
    if not isinstance(path, str):
        raise TypeError(f"a module path must be a string such as 'layer1.0.conv1', not {type(path).__name__}")
    module = submodule_or_none(model, path)
    if module is not None:
        return module
    candidates = [p for p in module_paths(model) if p]
    close = difflib.get_close_matches(path, candidates, n=3, cutoff=0.5)
    if close:
        hint = " — did you mean " + " or ".join(quoted(c) for c in close) + "?"
    elif candidates:
        hint = f"; its modules are {', '.join(quoted(c) for c in candidates[:8])}" + (
            ", …" if len(candidates) > 8 else ""
        )
    else:
        hint = "; it has no submodules, so only '' (the model itself) can be a module path"
    raise KeyError(f"no module {quoted(path)} in {display_name(type(model).__name__)}{hint}")


def submodule_or_none(model: nn.Module, path: str) -> nn.Module | None:
    """The submodule at ``path``, found through the ``_modules`` dicts only, or None.

    ``get_submodule`` reads each name with ``getattr``: a name a parametrization owns (``weight`` under
    ``weight_norm``) would compute it, running the parametrization and firing hooks on it.
    """
    module = model
    for name in path.split(".") if path else ():
        children = module._modules  # a ScriptModule's is a mapping without .get()
        if name not in children:
            return None
        child = children[name]
        if not isinstance(child, nn.Module):  # None: a child slot left empty
            return None
        module = child
    return module


def resolve_path(model: nn.Module, path: str) -> tuple[str, nn.Module | nn.Parameter | str]:
    """``("module", module)``, ``("param", parameter)`` or ``("node", id)`` for a path; a KeyError with close matches.

    Inside a ``torch.compile`` wrapper the path may leave out torch's ``_orig_mod`` step, as the compiled
    model's attributes do (``"fc2"`` for ``"_orig_mod.fc2"``).
    """
    if not isinstance(path, str):
        raise TypeError(f"a path must be a string such as 'layer1.0.conv1', not {type(path).__name__}")
    module = submodule_or_none(model, path)
    if module is not None:
        return "module", module
    params = dict(model.named_parameters(remove_duplicate=False))
    if path in params:
        return "param", params[path]
    inside = through_compiled(model, path)
    if inside is not None and (submodule_or_none(model, inside) is not None or inside in params):
        return resolve_path(model, inside)
    if _is_node_id(path):
        return "node", path
    parametrized = _parametrized_hint(model, path, params)
    if parametrized:
        raise KeyError(parametrized)
    candidates = [p for p in module_paths(model) if p] + list(params)
    short = {without_compiled_steps(c): c for c in candidates if COMPILED_INNER in c.split(".")}
    close = difflib.get_close_matches(path, candidates + [c for c in short if c], n=3, cutoff=0.5)
    close = list(dict.fromkeys(short.get(c, c) for c in close))  # named as the tree names them
    hint = (
        " — did you mean " + " or ".join(quoted(c) for c in close) + "?"
        if close
        else (
            "; paths are module paths such as "
            + ", ".join(quoted(c) for c in candidates[:4])
            + ", parameter names, '' for the model itself, or autograd node ids from ex.graph()"
        )
    )
    raise KeyError(f"no module or parameter {quoted(path)} in {display_name(type(model).__name__)}{hint}")


def through_compiled(model: nn.Module, path: str) -> str | None:
    """``path`` with the ``_orig_mod`` step put back at each compiled wrapper it passes (``"fc2"`` ->
    ``"_orig_mod.fc2"``); None when it passes none, or leads to no module."""
    module, parts, inserted = model, [], False
    for name in path.split(".") if path else ():
        inner = compiled_inner(module)
        if name not in module._modules and inner is not None:
            parts.append(COMPILED_INNER)
            module, inserted = inner, True
        parts.append(name)
        child = module._modules.get(name)
        if not isinstance(child, nn.Module):  # a parameter's name ends the path, or nothing is there
            return ".".join(parts) if inserted and name == path.rsplit(".", 1)[-1] else None
        module = child
    return ".".join(parts) if inserted else None


def without_compiled_steps(path: str) -> str:
    """``path`` as the compiled model's own attributes name it: its ``_orig_mod`` steps left out."""
    return ".".join(part for part in path.split(".") if part != COMPILED_INNER)


def first_name(model: nn.Module, family: str, obj: object) -> str | None:
    """The name the tree, graph and captures use for a module or parameter reachable by several paths: its
    first, as ``named_modules()``/``named_parameters()`` give it; None for a node id or an object not found."""
    named = model.named_modules() if family == "module" else model.named_parameters() if family == "param" else ()
    return next((name for name, found in named if found is obj), None)


def alias_note(given: str, first: str) -> str:
    """Why a hook asked for at ``given`` sits at ``first``, the same module or parameter under its first name."""
    return (
        f"{quoted(given)} is another path to {quoted(first)} (the same object, registered twice): the hook is attached "
        f"and records under {quoted(first)}, the name the tree, the graph and ex.captures use"
    )


def _is_node_id(path: str) -> bool:
    """Whether ``path`` has the form of an autograd node id, ``"<scope>/<op>#<ordinal>"``."""
    try:
        parse_node_id(path)
    except ValueError:
        return False
    return True


def _parametrized_hint(model: nn.Module, path: str, params: dict[str, nn.Parameter]) -> str | None:
    """For a tensor a parametrization computes (``weight_norm``'s weight): what can be hooked instead."""
    owner_path, _, name = path.rpartition(".")
    owner = submodule_or_none(model, owner_path)
    parametrizations = getattr(owner, "parametrizations", None)
    if not isinstance(parametrizations, nn.ModuleDict) or name not in parametrizations:
        return None
    base = f"{owner_path}.parametrizations.{name}" if owner_path else f"parametrizations.{name}"
    originals = [p for p in params if p.startswith(base + ".original")]
    kinds = ", ".join(
        display_name(type(m).__name__) for m in cast(nn.ModuleList, parametrizations[name])
    )  # a ParametrizationList
    return (
        f"{quoted(path)} is no parameter: a parametrization ({kinds}) computes it from "
        f"{', '.join(map(quoted, originals))}; hook those parameters (kind 'grad'), or the module {quoted(base)}, "
        f"whose forward output is the computed {display_name(name)}"
    )
