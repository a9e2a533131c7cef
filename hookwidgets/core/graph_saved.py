"""The tensors autograd nodes saved for backward: name, shape, dtype, bytes and what memory they share,
read from the nodes before a backward frees them, keeping no tensor.

Reading the nodes after the forward gives the numbers a ``saved_tensors_hooks`` pack hook would see
during it (tests/unit/test_graph_memory.py compares the two) without a Python call on every save,
and without the reference cycle a pack hook returning its own tensor makes through a saved output.
One difference: autograd saves a Python number (``x * 2.0``) as a 0-dim double tensor without calling
pack hooks; it is listed here, and counted (8 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.autograd.graph import Node

if TYPE_CHECKING:
    from .graph_names import ParamNames
    from .graph_walk import Table

_saved_names: dict[type, tuple[tuple[str, str], ...]] = {}
_SavedTensor = getattr(torch._C._autograd, "SavedTensor", None)  # what ``node._raw_saved_<name>`` gives


def _saved_attrs(node: Node) -> tuple[tuple[str, str], ...]:
    """``(name, "_raw_saved_<name>")`` for each tensor the node type saves (cached per type)."""
    kind = type(node)
    names = _saved_names.get(kind)
    if names is None:
        prefix = "_raw_saved_"
        names = tuple((a[len(prefix) :], a) for a in dir(kind) if a.startswith(prefix))
        _saved_names[kind] = names
    return names


_dtype_names: dict[torch.dtype, str] = {}


def _dtype_name(dtype: torch.dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return name


@dataclass
class Saved:
    """The tensors the nodes saved for backward, one entry per tensor, in flat lists (see ``Table``)."""

    rows: list[int] = field(default_factory=list)  # the row of the node that saved it
    labels: list[str] = field(default_factory=list)
    dims: list[int] = field(default_factory=list)  # every entry's shape, one after the other
    ndims: list[int] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    aliases: list[str | None] = field(default_factory=list)

    def by_row(self) -> dict[int, list[tuple[str, list[int], str, int, str | None]]]:
        """``row -> [(name, shape, dtype, bytes, alias), ...]`` in the order the node saved them."""
        result: dict[int, list[tuple[str, list[int], str, int, str | None]]] = {}
        dims, start = self.dims, 0
        for i, row in enumerate(self.rows):
            end = start + self.ndims[i]
            entry = (self.labels[i], dims[start:end], self.dtypes[i], self.nbytes[i], self.aliases[i])
            result.setdefault(row, []).append(entry)
            start = end
        return result


def read_saved(t: Table, params: ParamNames) -> None:
    """Fill ``t.saved``: name, shape, dtype, bytes and alias of each tensor a node saved; no tensor is kept.

    Read through ``_raw_saved_<name>.data``, which unlike ``_saved_<name>`` does not fail after an
    in-place op, before backward frees them. ``alias`` names what the tensor's memory belongs to when
    it is not its own: a parameter or buffer (the tensor itself or a view of it), or a tensor an
    earlier node saved (same storage). Memory shared with a parameter in other ways (``w.detach()``,
    ``w.data``) is not recognised unless a view of it was saved first.
    """
    # The hot loop of every recording (thousands of saved tensors): locals only, names formatted on use.
    saved = t.saved
    rows, labels, ndims, dtypes, sizes, aliases = (
        saved.rows,
        saved.labels,
        saved.ndims,
        saved.dtypes,
        saved.nbytes,
        saved.aliases,
    )
    add_dims = saved.dims.extend
    owner_of = params.owners.get  # by identity: parameters and buffers
    storages: dict[int, str | int] = {}  # by storage: an alias, or the entry of the first tensor saved there
    seqs, hidden, nodes, ids = t.seqs, t.hidden, t.nodes, t.ids
    order = sorted((k for k, seq in enumerate(seqs) if seq is not None and not hidden[k]), key=seqs.__getitem__)
    attrs_of, dtype_of = _saved_names.get, _dtype_names.get
    tensor_type, saved_type = torch.Tensor, _SavedTensor
    for k in order:
        node = nodes[k]
        attrs = attrs_of(type(node))
        if attrs is None:
            attrs = _saved_attrs(node)
        for name, attr in attrs:
            try:
                raw = getattr(node, attr)
            except Exception:  # freed by a backward, or not readable for this node
                continue
            items: Any = _numbered(name, raw) if isinstance(raw, (tuple, list)) else ((name, raw),)
            for label, item in items:
                tensor = item.data if type(item) is saved_type else getattr(item, "data", None)
                if not isinstance(tensor, tensor_type):  # None (an optional input), or packed by other hooks
                    continue
                alias = owner_of(id(tensor))
                if alias is None:
                    base = tensor._base
                    if base is not None:
                        alias = owner_of(id(base))
                try:  # where its memory starts, without making a storage object
                    key = tensor.data_ptr() - tensor.storage_offset() * tensor.element_size() or None
                except Exception:  # sparse, nested and wrapper tensors have no plain storage
                    key = None
                if key is not None:
                    if alias is not None:
                        storages.setdefault(key, alias)
                    else:
                        first = storages.get(key)
                        if first is None:
                            storages[key] = len(rows)
                        else:
                            if not isinstance(first, str):
                                first = storages[key] = f"{ids[rows[first]]} {labels[first]}"
                            alias = first
                shape = tensor.shape
                dtype = tensor.dtype
                rows.append(k)
                labels.append(label)
                add_dims(shape)
                ndims.append(len(shape))
                dtypes.append(dtype_of(dtype) or _dtype_name(dtype))
                sizes.append(tensor.nbytes)
                aliases.append(alias)


def _numbered(name: str, tensors: tuple | list) -> list[tuple[str, Any]]:
    return [(f"{name}.{i}", item) for i, item in enumerate(tensors)]
