"""What hookwidgets has put on modules, process-wide: hook handles and backward-hook flags.

Every explorer registers its module hooks through ``own()`` / ``own_backward()``. The ledger counts, per
module, the live hookwidgets handles on it and the backward hooks that set torch's private
``_is_full_backward_hook`` flag, with the flag's value before the first of them: when the last one goes
(whichever explorer closes or is dropped last) the flag is put back, unless a backward hook someone else
attached still needs it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from torch import nn
from torch.utils.hooks import RemovableHandle

_lock = threading.RLock()  # reentrant: a finalizer set off by a collection inside a locked section removes handles
_entries: dict[int, _Entry] = {}  # id(module) -> what is ours on it
_own_ids: set[int] = set()  # ids of every live hookwidgets handle on a module, all explorers together


class _Entry:
    """Ours on one module: live handles, flag-setting hooks, the flag found before the first, their holders."""

    __slots__ = ("flag_before", "flags", "handles", "holders", "ref")

    def __init__(self, module: nn.Module) -> None:
        key = id(module)
        self.ref = weakref.ref(module, lambda _: _forget(key))
        self.handles = 0
        self.flags = 0
        self.flag_before: bool | None = None
        self.holders: weakref.WeakSet[nn.Module] | None = None  # modules holding those hooks (made with the first)


class OwnedHandle(RemovableHandle):
    """The handle of a hook hookwidgets put on a module: removing it updates the ledger (once)."""

    def __init__(self, handle: RemovableHandle, module: nn.Module, flag_owner: nn.Module | None = None) -> None:
        # the torch handle's own id and dict references: no new id is drawn
        self.hooks_dict_ref = handle.hooks_dict_ref
        self.id = handle.id
        self.extra_dict_ref = handle.extra_dict_ref
        self._module: weakref.ref | None = weakref.ref(module)
        self._flag_owner = None if flag_owner is None else weakref.ref(flag_owner)

    def remove(self) -> None:
        super().remove()
        with _lock:
            module_ref, self._module = self._module, None
            if module_ref is None:
                return  # removed before
            _own_ids.discard(self.id)
            module = module_ref()
            if module is not None:
                _release(module, handles=1)
            owner = self._flag_owner() if self._flag_owner is not None else None
            if owner is not None:
                _release_flag(owner)


def own(module: nn.Module, handle: RemovableHandle) -> OwnedHandle:
    """``handle`` of a hook just registered on ``module``, counted in the ledger until it is removed."""
    with _lock:
        _entry(module).handles += 1
        _own_ids.add(handle.id)
    return OwnedHandle(handle, module)


def own_backward(module: nn.Module, register: Callable[[], RemovableHandle]) -> OwnedHandle:
    """``register()`` a full or legacy backward hook on ``module``, noting the flag torch sets before it does."""
    owner = flag_owner(module)
    with _lock:
        entry = _entry(owner)
        flag = owner._is_full_backward_hook
        try:
            handle = register()  # torch refuses mixing legacy and full hooks: then nothing is counted
        except BaseException:
            _drop_if_empty(owner, entry)
            raise
        if entry.flags == 0:
            entry.flag_before = flag
        entry.flags += 1
        if entry.holders is None:
            entry.holders = weakref.WeakSet()
        entry.holders.add(module)
        _entry(module).handles += 1
        _own_ids.add(handle.id)
    return OwnedHandle(handle, module, flag_owner=owner)


def flag_owner(module: nn.Module) -> nn.Module:
    """The module whose ``_is_full_backward_hook`` torch sets when ``module`` gets a backward hook.

    A ``torch.compile`` wrapper (OptimizedModule) reads its own attribute but forwards every write to
    the module it wraps, so the flag to save and put back is the wrapped one's.
    """
    while type(module).__name__ == "OptimizedModule" and isinstance(module._modules.get("_orig_mod"), nn.Module):
        module = module._modules["_orig_mod"]
    return module


def _entry(module: nn.Module) -> _Entry:
    """The module's entry, made when it has none. Call with ``_lock`` held."""
    entry = _entries.get(id(module))
    if entry is None or entry.ref() is not module:  # none, or one of a dead module whose id was reused
        entry = _entries[id(module)] = _Entry(module)
    return entry


def _release(module: nn.Module, handles: int) -> None:
    entry = _entries.get(id(module))
    if entry is None or entry.ref() is not module:
        return
    entry.handles -= handles
    _drop_if_empty(module, entry)


def _release_flag(owner: nn.Module) -> None:
    """One flag-setting hook fewer on ``owner``; with the last, the flag as found, unless others' hooks need it."""
    entry = _entries.get(id(owner))
    if entry is None or entry.ref() is not owner:
        return
    entry.flags -= 1
    if entry.flags == 0:
        holders = {owner, *(entry.holders or ())}
        if not any(key not in _own_ids for holder in holders for key in holder._backward_hooks):
            owner._is_full_backward_hook = entry.flag_before
        entry.holders = None
    _drop_if_empty(owner, entry)


def _drop_if_empty(module: nn.Module, entry: _Entry) -> None:
    if entry.handles == 0 and entry.flags == 0 and _entries.get(id(module)) is entry:
        del _entries[id(module)]


def _forget(key: int) -> None:
    """A module with an entry was collected: drop the entry (unless a new module took its id already)."""
    with _lock:
        entry = _entries.get(key)
        if entry is not None and entry.ref() is None:
            del _entries[key]
