"""The tensors autograd nodes saved for backward: name, shape, dtype, bytes and what memory they share,
read from the nodes before a backward frees them, keeping no tensor.

Reading the nodes after the forward gives the numbers a ``saved_tensors_hooks`` pack hook would see
during it (tests/unit/core/graph/test_memory.py compares the two) without a Python call on every save,
and without the reference cycle a pack hook returning its own tensor makes through a saved output.
One difference: autograd saves a Python number (``x * 2.0``) as a 0-dim double tensor without calling
pack hooks; it is listed here, and counted (8 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import torch
from torch.autograd.graph import Node

from .._torch import SAVED_TENSOR, raw_saved_attrs, saved_tensors_readable
from ..model.names import storage_starts

if TYPE_CHECKING:
    from ..model.names import ParamNames

_saved_names: dict[type, tuple[tuple[str, str], ...]] = {}
_shape, _dtype, _nbytes = attrgetter("shape"), attrgetter("dtype"), attrgetter("nbytes")


def _saved_attrs(node: Node) -> tuple[tuple[str, str], ...]:
    """``(name, attribute)`` for each tensor the node type saves, read without unpacking (cached per type)."""
    kind = type(node)
    names = _saved_names.get(kind)
    if names is None:
        names = _saved_names[kind] = raw_saved_attrs(kind)
    return names


_dtype_names = {d: str(d).removeprefix("torch.") for d in vars(torch).values() if isinstance(d, torch.dtype)}


def _dtype_name(dtype: torch.dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return name


@dataclass
class Saved:
    """The tensors the nodes saved for backward, one entry per tensor, in flat lists (as the walk's ``Table``).

    ``aliases`` holds, for an entry whose memory is not its own, the parameter or buffer it shares
    (a string) or the index of the entry first saved on the same storage (an int, named on use).
    """

    rows: list[int] = field(default_factory=list)  # the row of the node that saved it
    labels: list[str] = field(default_factory=list)
    dims: list[int] = field(default_factory=list)  # every entry's shape, one after the other
    ndims: list[int] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    aliases: list[str | int | None] = field(default_factory=list)

    def alias(self, i: int, ids: list[str]) -> str | None:
        """What entry ``i``'s memory belongs to if not itself: ``"parameter fc.weight"``, ``"<node id> <name>"``."""
        alias = self.aliases[i]
        if isinstance(alias, int):
            return f"{ids[self.rows[alias]]} {self.labels[alias]}"
        return alias

    def by_row(self, ids: list[str]) -> dict[int, list[tuple[str, list[int], str, int, str | None]]]:
        """``row -> [(name, shape, dtype, bytes, alias), ...]`` in the order the node saved them."""
        result: dict[int, list[tuple[str, list[int], str, int, str | None]]] = {}
        dims, start = self.dims, 0
        for i, row in enumerate(self.rows):
            end = start + self.ndims[i]
            entry = (self.labels[i], dims[start:end], self.dtypes[i], self.nbytes[i], self.alias(i, ids))
            result.setdefault(row, []).append(entry)
            start = end
        return result


def read_saved(saved: Saved, nodes: list[Node], order: list[int], params: ParamNames) -> None:
    """Fill ``saved`` with name, shape, dtype, bytes and alias of each tensor ``nodes`` saved, read in ``order``
    (creation order; indexes into ``nodes``); no tensor is kept.

    Read through ``_raw_saved_<name>.data``, which unlike ``_saved_<name>`` does not fail after an
    in-place op and calls no unpack hook (checkpointing's would recompute), before backward frees them.
    ``alias`` names what the tensor's memory belongs to when it is not its own: a parameter or buffer
    (the tensor itself, or any tensor on its storage: a view, ``w.detach()``, ``w.data``), or a tensor an
    earlier node saved (same storage). Where several parameters share one storage, a tensor on it that
    is none of them is named after the first.
    """
    if not saved_tensors_readable():
        return  # said in Explorer.diagnostics
    rows, labels = saved.rows, saved.labels
    tensors: list[torch.Tensor] = []
    # Per saved tensor, the loop only finds it; its metadata is read afterwards by map() over the whole
    # list, which runs the C getters without a Python step per tensor.
    add_row, add_label, add_tensor = rows.append, labels.append, tensors.append
    attrs_of = _saved_names.get
    tensor_type = torch.Tensor
    saved_type: Any = SAVED_TENSOR  # torch._C._autograd.SavedTensor, untyped: its ``data`` is read below
    for k in order:  # creation order: the first tensor saved on a storage owns its memory
        node = nodes[k]
        attrs = attrs_of(type(node))
        if attrs is None:
            attrs = _saved_attrs(node)
        for name, attr in attrs:
            try:
                raw = getattr(node, attr)
            except Exception:  # freed by a backward, or not readable for this node
                continue
            if type(raw) is saved_type:
                tensor = raw.data
                if isinstance(tensor, tensor_type):  # None: an optional input, or packed by other hooks
                    add_row(k)
                    add_label(name)
                    add_tensor(tensor)
            elif isinstance(raw, (tuple, list)):
                for i, item in enumerate(raw):
                    tensor = item.data if type(item) is saved_type else getattr(item, "data", None)
                    if isinstance(tensor, tensor_type):
                        add_row(k)
                        add_label(f"{name}.{i}")
                        add_tensor(tensor)
            else:
                tensor = getattr(raw, "data", None)
                if isinstance(tensor, tensor_type):
                    add_row(k)
                    add_label(name)
                    add_tensor(tensor)
    if tensors:
        _metadata(saved, tensors, params)


def _metadata(saved: Saved, tensors: list[torch.Tensor], params: ParamNames) -> None:
    """Shapes, dtypes, bytes and aliases of the saved tensors, in the order of ``saved.rows``."""
    try:
        shapes = list(map(_shape, tensors))
        nbytes = list(map(_nbytes, tensors))
    except Exception:  # a tensor without plain sizes (nested, some wrapper subclasses): one at a time
        shapes, nbytes = [], []
        for tensor in tensors:
            try:
                shapes.append(tensor.shape)
                nbytes.append(tensor.nbytes)
            except Exception:
                shapes.append(())
                nbytes.append(0)
    saved.dims = list(chain.from_iterable(shapes))
    saved.ndims = list(map(len, shapes))
    dtypes = list(map(_dtype, tensors))
    try:
        saved.dtypes = list(map(_dtype_names.__getitem__, dtypes))
    except KeyError:  # a dtype torch did not have when this module was imported
        saved.dtypes = list(map(_dtype_name, dtypes))
    saved.nbytes = nbytes
    # A parameter or buffer itself is named by identity; any other tensor by its storage: memory a parameter
    # or buffer owns (a view, .detach(), .data), or that an earlier saved tensor owns. Where each storage
    # starts is read anyway, and reading ``_base`` as well would touch one more cold object per tensor.
    owners = params.owners
    storages: dict[int, str | int] = dict(params.storages)  # its start -> its owner, or the first entry
    swapped = params.swapped_tensors()
    if swapped:  # weights an offload hook swapped in for the call: theirs, as the placeholders' would be
        labels = ["parameter " + name for _, name in swapped]
        owners = {**owners, **{id(t): label for (t, _), label in zip(swapped, labels, strict=True)}}
        starts = storage_starts([t for t, _ in swapped])
        storages.update((start, label) for start, label in zip(starts, labels, strict=True) if start)
    aliases: list[Any] = list(map(owners.get, map(id, tensors)))
    for i, key in enumerate(storage_starts(tensors)):
        if key and aliases[i] is None:  # None: no plain storage; 0: an empty one, no memory to share
            first = storages.get(key)
            if first is None:
                storages[key] = i
            else:
                aliases[i] = first
    saved.aliases = aliases
