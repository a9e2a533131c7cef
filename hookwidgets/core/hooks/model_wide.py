"""The global kinds on one model: the kind's hook on every module of the model, kept in step with its modules.

torch's own global module hooks run for every module of every model in the process (a global full
backward hook wraps every module's output in a view, which an in-place op elsewhere then breaks). Here
each global hook is a local hook on every module of this model instead, put first in the module's
hooks (``prepend=True``: torch runs global hooks before a module's own), a module reached by two paths
once, under its first path. ``sync()`` (each step's begin) puts the hooks on modules added to the model
since and takes them off modules that left it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from ..display import quoted
from ..gc_pause import no_gc
from . import notes
from .notes import NoteKind

if TYPE_CHECKING:
    from .info import HookInfo

Place = Callable[[nn.Module, list[RemovableHandle]], str | None]
"""Registers one global hook's torch hooks on a module, appending each handle; returns why not, or None."""


class _Placed:
    """One global hook: how it is placed, its handles by module id, and the modules that could not take it."""

    __slots__ = ("by_module", "info", "place", "refused")

    def __init__(self, info: HookInfo, place: Place) -> None:
        self.info = info
        self.place = place
        self.by_module: dict[int, list[RemovableHandle]] = {}
        self.refused: dict[int, tuple[str, str]] = {}  # module id -> (path, why)


class ModelWideHooks:
    """Every global hook of one registry, on every module of its model."""

    def __init__(self, root: nn.Module) -> None:
        self._root = weakref.ref(root)
        self.paths: dict[int, str] = {}
        """id(module) -> its first path, for the modules the hooks are on; the hooks read it, it is updated in place."""
        self._hooks: dict[int, _Placed] = {}  # id(info) -> its placement
        # the modules of ``paths``: one collected may leave its id to a new one
        self._refs: dict[int, weakref.ref[nn.Module]] = {}
        self._died: list[weakref.ref[nn.Module]] = []  # their references, as they die
        self._lock = threading.Lock()  # two threads may begin steps at once

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def add(self, info: HookInfo, place: Place) -> None:
        """Place ``info`` on every module of the model now; its handles join ``info._handles``."""
        root = self._root()
        if root is None:
            return
        with self._lock, no_gc():  # thousands of handles and ledger entries, no cycles among them
            modules = self._update(root)  # the other global hooks reach modules added since the last step first
            placed = self._hooks[id(info)] = _Placed(info, place)
            for key, (path, module) in modules.items():
                self._put(placed, key, path, module)
            _say_refused(placed)

    def discard(self, info: HookInfo) -> None:
        """Forget ``info``; the registry removes its handles (``info._handles``)."""
        with self._lock:
            self._hooks.pop(id(info), None)
            if not self._hooks:
                self.paths.clear()
                self._refs.clear()

    def sync(self) -> None:
        """Put the hooks on modules added to the model since the last sync; take them off modules that left."""
        root = self._root()
        if root is None or (not self._died and module_ids(root) == self.paths.keys()):
            return
        with self._lock, no_gc():
            self._update(root)

    def _update(self, root: nn.Module) -> dict[int, tuple[str, nn.Module]]:
        """Bring ``paths`` and every hook's placement up to date with the model's modules; returns them by id
        (first path each). Called with the lock held."""
        modules = {id(module): (path, module) for path, module in root.named_modules()}
        replaced = {key for key in self.paths.keys() & modules.keys() if self._refs[key]() is not modules[key][1]}
        known = set(self.paths) - replaced  # a module whose id a collected one had is new
        gone = set(self.paths) - modules.keys() | replaced
        for key in gone:
            del self.paths[key], self._refs[key]
        self.paths.update((key, path) for key, (path, _) in modules.items())
        self._refs.update(
            (key, weakref.ref(module, self._died.append)) for key, (_, module) in modules.items() if key not in known
        )
        self._died.clear()
        for placed in self._hooks.values():
            if not placed.info.active:
                continue
            for key in gone:
                placed.refused.pop(key, None)
                handles = placed.by_module.pop(key, ())
                for handle in handles:
                    handle.remove()
                if handles:
                    removed = {h.id for h in handles}
                    placed.info._handles[:] = [h for h in placed.info._handles if h.id not in removed]
            for key, (path, module) in modules.items():
                if key not in known:
                    self._put(placed, key, path, module)
            _say_refused(placed)
        return modules

    def _put(self, placed: _Placed, key: int, path: str, module: nn.Module) -> None:
        if isinstance(module, torch.jit.ScriptModule):
            return  # takes no Python hooks (listed in the explorer's ``unwatched``)
        handles: list[RemovableHandle] = []
        try:
            why = placed.place(module, handles)
        except Exception as exc:  # a module that refuses hooks: the others still get theirs
            why = f"registering the hook failed: {exc}"
        if why is not None:
            for handle in handles:
                handle.remove()
            placed.refused[key] = (path, why)
            return
        placed.by_module[key] = handles
        placed.info._handles.extend(handles)


def module_ids(root: nn.Module) -> set[int]:
    """Ids of ``root`` and every module under it: a walk with no path strings, for the check at each step."""
    seen = {id(root)}
    todo = [root]
    while todo:
        for child in todo.pop()._modules.values():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                todo.append(child)
    return seen


def _say_refused(placed: _Placed) -> None:
    """The hook's note names the modules it is not on, and why."""
    info = placed.info
    if not placed.refused:
        notes.drop(info, NoteKind.REFUSED)
        return
    listed = sorted(placed.refused.values())
    shown = "; ".join(f"{quoted(path or '(model)')}: {why}" for path, why in listed[:5])
    more = f"; and {len(listed) - 5} more" if len(listed) > 5 else ""
    text = f"{_REFUSED} {len(listed)} module(s) of the model, so it does not fire there: {shown}{more}"
    notes.add(info, text, NoteKind.REFUSED)


_REFUSED = "not on"
