"""What hookwidgets has put on modules, process-wide: hook handles, backward-hook flags, and copies without them.

Every explorer registers its module hooks through ``own()`` / ``own_backward()``. The ledger counts, per
module, the live hookwidgets handles on it and the backward hooks that set torch's private
``_is_full_backward_hook`` flag, with the flag's value before the first of them: when the last one goes
(whichever explorer closes or is dropped last) the flag is put back, unless a backward hook someone else
attached still needs it. While anything of ours is on a module, the module carries an instance attribute
``__reduce_ex__`` (pickle and ``copy`` look it up on the instance first): the class's own reduction with
our hooks, our flag and that attribute left out, so copies and saved models carry nothing of hookwidgets.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle

from .._torch import FULL_BACKWARD_FLAG, compiled_inner, forwards_writes, full_backward_flag, set_full_backward_flag
from ..model.hook_dicts import HOOK_DICTS

REDUCE = "__reduce_ex__"
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
        self._module: weakref.ref[nn.Module] | None = weakref.ref(module)
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
        flag = full_backward_flag(owner)
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


def owned_ids() -> set[int]:
    """Ids of every live hookwidgets handle on a module, all explorers together."""
    with _lock:
        return set(_own_ids)


def flag_owner(module: nn.Module) -> nn.Module:
    """The module whose ``_is_full_backward_hook`` torch sets when ``module`` gets a backward hook.

    A ``torch.compile`` wrapper (OptimizedModule) reads its own attribute but, from some torch after 2.3 on,
    forwards every write to the module it wraps: then the flag to save and put back is the wrapped one's.
    """
    inner = compiled_inner(module)
    while inner is not None and forwards_writes(module):
        module, inner = inner, compiled_inner(inner)
    return module


def _entry(module: nn.Module) -> _Entry:
    """The module's entry, made (with its ``__reduce_ex__``) when it has none. Call with ``_lock`` held."""
    entry = _entries.get(id(module))
    if entry is None or entry.ref() is not module:  # none, or one of a dead module whose id was reused
        entry = _entries[id(module)] = _Entry(module)
        if REDUCE not in module.__dict__:  # a reduction the user set on the instance stays theirs
            object.__setattr__(module, REDUCE, _Reducer(module))
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
            set_full_backward_flag(owner, entry.flag_before)
        entry.holders = None
    _drop_if_empty(owner, entry)


def _drop_if_empty(module: nn.Module, entry: _Entry) -> None:
    if entry.handles == 0 and entry.flags == 0:
        if _entries.get(id(module)) is entry:
            del _entries[id(module)]
        if isinstance(module.__dict__.get(REDUCE), _Reducer):
            del module.__dict__[REDUCE]


def _forget(key: int) -> None:
    """A module with an entry was collected: drop the entry (unless a new module took its id already)."""
    with _lock:
        entry = _entries.get(key)
        if entry is not None and entry.ref() is None:
            del _entries[key]


class _Reducer:
    """A module's ``__reduce_ex__`` while hookwidgets has hooks or a flag on it: the class's reduction, filtered."""

    __slots__ = ("_module",)

    def __init__(self, module: nn.Module) -> None:
        self._module = weakref.ref(module)  # the module holds this object: no cycle back

    def __call__(self, protocol: int) -> Any:
        module = self._module()
        if module is None:
            raise TypeError("this module's copy helper outlived its module")
        reduced = type(module).__reduce_ex__(module, protocol)
        if not isinstance(reduced, tuple) or len(reduced) < 3:
            return reduced  # no state to filter (a string, or a class rebuilt from its arguments only)
        return (*reduced[:2], _state_without_ours(module, reduced[2]), *reduced[3:])

    def __deepcopy__(self, memo: dict[int, Any]) -> _Reducer:
        """A class with its own ``__deepcopy__`` may copy ``__dict__`` as it is, this helper included: the
        copy's helper must reduce the copy (found in the memo), not the original."""
        module = self._module()
        copied = memo.get(id(module)) if module is not None else None
        return _Reducer(copied) if isinstance(copied, nn.Module) else self


def _state_without_ours(module: nn.Module, state: Any) -> Any:
    """``state`` (the module's ``__dict__`` as its class saves it) without our hooks, flag or reducer."""
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):  # (__dict__, slots)
        return (_state_without_ours(module, state[0]), state[1])
    if not isinstance(state, dict):
        return state
    state = dict(state)  # a copy: the class may hand out the module's own __dict__
    state.pop(REDUCE, None)
    with _lock:
        entry = _entries.get(id(module))
        flag_held = entry is not None and entry.ref() is module and entry.flags > 0
        for name in HOOK_DICTS:
            hooks = state.get(name)
            if hooks:
                items = list(hooks.items())  # a snapshot: a finalizer may remove a hook meanwhile
                if any(key in _own_ids for key, _ in items):
                    state[name] = type(hooks)((key, hook) for key, hook in items if key not in _own_ids)
        if flag_held and entry is not None and FULL_BACKWARD_FLAG in state and not state.get("_backward_hooks"):
            state[FULL_BACKWARD_FLAG] = entry.flag_before  # as before hookwidgets: no hook left needs it
    return state
