"""A model's names by object identity — module paths, parameter names, owners of parameters and
buffers — read in one pass, for scoping nodes and naming what saved tensors alias."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import nn

from ..gc_pause import no_gc
from .meta import any_meta


@dataclass
class ModelNames:
    """A model's names by object identity: module paths, parameter names, and what owns each tensor."""

    paths: dict[int, str] = field(default_factory=dict)  # id of a module -> its path ("" for the root)
    params: dict[int, str] = field(default_factory=dict)  # id of a parameter -> "layer1.0.conv1.weight"
    owners: dict[int, str] = field(default_factory=dict)  # id of a parameter or buffer -> "parameter …", "buffer …"
    param_scopes: dict[int, str] = field(default_factory=dict)  # id of a parameter -> its module's path
    storages: dict[int, str] = field(default_factory=dict)  # where a parameter's or buffer's memory starts -> owner
    meta: bool = False  # a parameter or buffer is on the meta device (see ``meta.holds_meta``)


def read_names(model: nn.Module | None) -> ModelNames:
    """Every name of ``model`` in one pass, as ``named_modules()`` gives them (preorder, first path wins)."""
    with no_gc():
        return _read_names(model)


def _read_names(model: nn.Module | None) -> ModelNames:
    names = ModelNames()
    paths, params, owners, scopes = names.paths, names.params, names.owners, names.param_scopes
    tensors: list[torch.Tensor] = []  # the parameters, in the order of ``params``
    buffers: list[tuple[torch.Tensor, str]] = []
    stack: list[tuple[str, nn.Module]] = [("", model)] if model is not None else []
    pop, push = stack.pop, stack.extend
    while stack:
        path, module = pop()
        key = id(module)
        if key in paths:
            continue
        paths[key] = path
        prefix = path + "." if path else ""
        own: Mapping[str, torch.Tensor | None] = module._parameters
        if own:
            for name, param in own.items():
                if param is not None and id(param) not in params:
                    params[id(param)] = prefix + name
                    scopes[id(param)] = path
                    tensors.append(param)
        own = module._buffers
        if own:
            buffers.extend([(buffer, prefix + name) for name, buffer in own.items() if buffer is not None])
        children = module._modules
        if children:
            push([(prefix + name, child) for name, child in reversed(children.items()) if child is not None])
    # Whole lists at once from here: thousands of parameters, and no Python step for each.
    owners.update(zip(params, ["parameter " + name for name in params.values()], strict=True))
    buffer_names = ["buffer " + name for _, name in buffers]
    owners.update(zip(reversed([id(b) for b, _ in buffers]), reversed(buffer_names), strict=True))  # first one wins
    tensors += [buffer for buffer, _ in buffers]
    names.meta = any_meta(tensors)
    labels = list(map(owners.__getitem__, map(id, tensors)))
    starts: dict[int | None, str] = {}
    starts.update(zip(reversed(storage_starts(tensors)), reversed(labels), strict=True))  # the first owner wins
    starts.pop(0, None)  # empty storages share nothing
    starts.pop(None, None)  # no plain storage
    names.storages = cast(dict[int, str], starts)  # None is no key now
    return names


_data_ptr = torch.Tensor.data_ptr
# the stubs say int | SymInt: a SymInt comes only from symbolic tracing, which never walks a graph
_storage_offset = cast(Callable[[torch.Tensor], int], torch.Tensor.storage_offset)


def storage_starts(tensors: list[torch.Tensor]) -> list[int | None]:
    """Where each tensor's storage starts in memory (0: an empty one); None for a tensor without plain storage.

    Computed from the tensor, not read from ``untyped_storage()``: torch keeps a storage's Python object
    alive as long as the storage, so that would leave one more object per tensor for the collector.
    """
    try:
        pointers, offsets = list(map(_data_ptr, tensors)), list(map(_storage_offset, tensors))
        return [p - o * t.element_size() if o else p for p, o, t in zip(pointers, offsets, tensors, strict=True)]
    except Exception:  # sparse, nested, meta and wrapper tensors have no plain storage: one at a time
        starts: list[int | None] = []
        for t in tensors:
            try:
                starts.append(t.data_ptr() - _storage_offset(t) * t.element_size())
            except Exception:
                starts.append(None)
        return starts


class ParamNames:
    """Names of a model's parameters and buffers by identity: AccumulateGrad nodes, saved-tensor aliases."""

    def __init__(self, model: nn.Module | None, names: ModelNames | None = None) -> None:
        self._model = weakref.ref(model) if model is not None else lambda: None
        self._reread = False
        self._set(names if names is not None else read_names(model))
        self.swapped: dict[int, tuple[weakref.ref[nn.Parameter], str]] = {}
        """Parameters the model's modules swapped in during the forward walked (``CallTimeWatch.swapped``)."""

    def _set(self, names: ModelNames) -> None:
        self.by_id: dict[int, str] = names.params
        self.owners: dict[int, str] = names.owners
        self.scopes: dict[int, str] = names.param_scopes
        self.storages: dict[int, str] = names.storages

    def new_walk(self) -> None:
        """Allow one re-read of the names in the next walk."""
        self._reread = False

    def swapped_tensors(self) -> list[tuple[torch.Tensor, str]]:
        """The swapped-in parameters still alive, with their names."""
        return [(t, name) for ref, name in self.swapped.values() if (t := ref()) is not None]

    def name(self, tensor: torch.Tensor) -> str | None:
        name = self.by_id.get(id(tensor))
        if name is None and (swapped := self.swapped.get(id(tensor))) is not None and swapped[0]() is tensor:
            return swapped[1]
        if name is None and not self._reread:  # parameters replaced since: read them again, once per walk
            self._reread = True
            self._set(read_names(self._model()))
            name = self.by_id.get(id(tensor))
        return name
