"""A forward hook's edit when op-node hooks are placed: its own nodes must not take the model's addresses."""

from collections.abc import Sequence
from typing import Any

from .edit_tensor import Edit, _edit
from .op_nodes import _hiding, _note_scope, _scope_stack

# --- generated code ---


def _edit_hidden(value: Any, edits: Sequence[Edit]) -> Any:
    """_edit in a forward hook: the edit's own nodes take no address, so the model's nodes keep theirs."""
    if not _scope_stack:
        return _edit(value, edits)  # outside a forward of the model: nothing to number
    _hiding[0] += 1
    _note_scope()
    try:
        return _edit(value, edits)
    finally:
        _hiding[0] -= 1
        _note_scope()
