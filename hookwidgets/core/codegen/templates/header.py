"""Where the generated code keeps what its hooks record and their handles, and how it names nested tensors."""

import dataclasses
from collections import defaultdict
from collections.abc import Iterable

import torch
from torch.autograd.graph import Node
from torch.utils.hooks import RemovableHandle

captures: defaultdict[tuple[str, str], list[dict[str, torch.Tensor | float]]]
handles: list[RemovableHandle]
kept: list[Node]

# --- generated code ---

captures = defaultdict(list)  # (path, kind) -> records: dicts of detached tensors, or of statistics
handles = []  # one RemovableHandle per registered hook
kept = []  # autograd nodes that carry hooks and that torch alone would let go


def _named(prefix: str, value: object) -> dict[str, torch.Tensor]:
    """The tensors inside a (nested) tuple, list, dict or dataclass, named prefix, prefix.0, prefix.key, ..."""
    if isinstance(value, torch.Tensor):
        return {prefix: value}
    if isinstance(value, (tuple, list)):
        items: Iterable[tuple[object, object]] = enumerate(value)
    elif isinstance(value, dict):  # before dataclasses: HF's ModelOutput is both, and a dict first
        items = value.items()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    else:
        return {}
    found: dict[str, torch.Tensor] = {}
    for key, item in items:
        found.update(_named(f"{prefix}.{key}", item))
    return found
