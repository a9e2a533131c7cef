"""A model's names by object identity — module paths, parameter names, owners of parameters and
buffers — read in one pass, for scoping nodes and naming what saved tensors alias."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class ModelNames:
    """A model's names by object identity: module paths, parameter names, and what owns each tensor."""

    paths: dict[int, str] = field(default_factory=dict)  # id of a module -> its path ("" for the root)
    params: dict[int, str] = field(default_factory=dict)  # id of a parameter -> "layer1.0.conv1.weight"
    owners: dict[int, str] = field(default_factory=dict)  # id of a parameter or buffer -> "parameter …", "buffer …"
    param_scopes: dict[int, str] = field(default_factory=dict)  # id of a parameter -> its module's path


def read_names(model: nn.Module | None) -> ModelNames:
    """Every name of ``model`` in one pass, as ``named_modules()`` gives them (preorder, first path wins)."""
    names = ModelNames()
    paths, params, owners, scopes = names.paths, names.params, names.owners, names.param_scopes
    buffers: list[tuple[int, str]] = []
    stack: list[tuple[str, nn.Module]] = [("", model)] if model is not None else []
    pop, push = stack.pop, stack.extend
    while stack:
        path, module = pop()
        key = id(module)
        if key in paths:
            continue
        paths[key] = path
        prefix = path + "." if path else ""
        own = module._parameters
        if own:
            for name, param in own.items():
                if param is not None and id(param) not in params:
                    params[id(param)] = prefix + name
                    scopes[id(param)] = path
        own = module._buffers
        if own:
            buffers.extend([(id(buffer), prefix + name) for name, buffer in own.items() if buffer is not None])
        children = module._modules
        if children:
            push([(prefix + name, child) for name, child in reversed(children.items()) if child is not None])
    for key, name in buffers:
        owners.setdefault(key, "buffer " + name)
    for key, name in params.items():
        owners.setdefault(key, "parameter " + name)
    return names


class ParamNames:
    """Names of a model's parameters and buffers by identity: AccumulateGrad nodes, saved-tensor aliases."""

    def __init__(self, model: nn.Module | None, names: ModelNames | None = None) -> None:
        self._model = weakref.ref(model) if model is not None else lambda: None
        self._reread = False
        self._set(names if names is not None else read_names(model))

    def _set(self, names: ModelNames) -> None:
        self.by_id: dict[int, str] = names.params
        self.owners: dict[int, str] = names.owners
        self.scopes: dict[int, str] = names.param_scopes

    def new_walk(self) -> None:
        """Allow one re-read of the names in the next walk."""
        self._reread = False

    def name(self, tensor: torch.Tensor) -> str | None:
        name = self.by_id.get(id(tensor))
        if name is None and not self._reread:  # parameters replaced since: read them again, once per walk
            self._reread = True
            self._set(read_names(self._model()))
            name = self.by_id.get(id(tensor))
        return name
