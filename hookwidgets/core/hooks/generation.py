"""Generations: the steps one call of a method of the model makes when it calls the model several times.

transformers' ``generate()`` calls the model once for the prompt, then once per new token, each call a step. What
ties them together is the caller, not the call's arguments (their names and caches change between versions): the
model's call is made from inside a method of the model itself (a frame on the stack whose code is one of its class's
functions and whose ``self`` is the model). The *driver* of a generation is the innermost such frame that two of its
steps share: its ``generate`` frame, while the helpers below it (``_prefill``, ``_sample``) may differ from step to
step. A frame's identity is its address and code, and the objects its variables hold, held weakly: a new call of
``generate()`` may reuse the address of the last one's frame, but not the objects its own variables hold (its
parameters may be the same objects, passed again). A method calling the model only once (a training step) makes no
generation; nor does one whose own variables change between its calls of the model (a loop written in the method
itself, where ``generate()`` hands its loop to a helper), nor one whose variables hold no object of its own.
"""

from __future__ import annotations

import inspect
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import torch
from torch import nn

from ..capture.store import Generation

LABELS_KEPT = 10_000
"""Steps whose generation is remembered for lookups (the timeline keeps as many firings)."""
GENERATIONS_KEPT = 100
"""Generations whose steps and token ids are remembered (``Explorer.generations``)."""


@dataclass
class _Frame:
    """A frame of the model's own code on the stack at one step: its address, code and variables (weakly)."""

    key: int
    code: CodeType
    refs: dict[str, weakref.ref[Any]] = field(default_factory=dict)


@dataclass
class _Group:
    """The steps one driver made so far on one thread."""

    first: int  # its first step
    chain: list[_Frame]  # the model's own frames at its latest step, outermost first
    driver: _Frame | None = None  # known from its second step on
    call: int = 0
    index: int = 0


@dataclass
class GenerationInfo:
    """One generation: its steps in order (``steps[k]`` is decode index k) and the token ids each step fed."""

    call: int
    steps: list[int] = field(default_factory=list)
    ids: list[list[list[int]] | None] = field(default_factory=list)
    """Per decode index, one list per item of the token ids the step fed that the one before had not (the prompt at
    index 0; the new token after it); None where the call held no token ids."""


class Generations:
    """Which steps of one explorer's model belong to a generation, and where: ``of(step)``.

    ``begin(step)`` runs as each step begins (on its thread), ``inputs(args, kwargs)`` then reads the token ids of the
    call that began it. ``on_prompt(step, generation)`` is told when a step turns out to have been a prompt step.
    """

    def __init__(self, root: nn.Module, on_prompt: Callable[[int, Generation], None]) -> None:
        self._root = weakref.ref(root)
        self._on_prompt = on_prompt
        self._local = threading.local()
        self._lock = threading.Lock()
        self._labels: OrderedDict[int, Generation] = OrderedDict()
        self._infos: OrderedDict[int, GenerationInfo] = OrderedDict()
        self._calls = 0
        self._codes: tuple[type, frozenset[CodeType]] | None = None

    def of(self, step: int) -> Generation | None:
        """Where ``step`` stands in a generation, or None (not part of one, or no longer remembered)."""
        return self._labels.get(step)

    def infos(self) -> list[GenerationInfo]:
        """The generations remembered, oldest first."""
        with self._lock:
            return list(self._infos.values())

    def as_data(self, names: Callable[[list[int]], list[str] | None]) -> list[dict[str, Any]]:
        """``Explorer.generations``: each generation as plain data, its token ids labelled by ``names(ids)``
        (``tokens`` None where some id has no label)."""
        found = []
        for info in self.infos():
            tokens = [None if rows is None else [names(row) for row in rows] for rows in info.ids]
            labelled = all(t is None or all(r is not None for r in t) for t in tokens)
            found.append(
                {
                    "call": info.call,
                    "steps": list(info.steps),
                    "ids": [None if rows is None else [list(r) for r in rows] for rows in info.ids],
                    "tokens": tokens if labelled else None,
                }
            )
        return found

    def begin(self, step: int) -> None:
        """``step`` began on this thread: part of the generation going on here, the first of a new one, or neither."""
        local = self._local
        local.awaiting = None
        chain = self._chain()
        group: _Group | None = getattr(local, "group", None)
        if not chain:
            local.group = None
            return
        local.awaiting = step
        if group is not None and group.driver is not None:
            frame = _find(group.driver, chain)
            if frame is not None:
                group.driver, group.chain = frame, chain
                group.index += 1
                self._label(step, Generation(group.call, group.index))
                with self._lock:
                    info = self._infos.get(group.call)
                    if info is not None:
                        info.steps.append(step)
                        info.ids.append(None)
                return
        elif group is not None:
            driver = _shared(group.chain, chain)
            if driver is not None:
                with self._lock:
                    self._calls += 1
                    group.call = self._calls
                    info = GenerationInfo(group.call, [group.first, step], [getattr(local, "ids", None), None])
                    self._infos[group.call] = info
                    while len(self._infos) > GENERATIONS_KEPT:
                        self._infos.popitem(last=False)
                group.driver, group.chain, group.index = driver, chain, 1
                prompt = Generation(group.call, 0)
                self._label(group.first, prompt)
                self._on_prompt(group.first, prompt)
                self._label(step, Generation(group.call, 1))
                return
        local.group = _Group(step, chain)

    def inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None, ids_of: Callable[..., Any]) -> None:
        """The args of the call that began this thread's latest step: its token ids (``ids_of(args, kwargs)``, an
        ``(N, T)`` tensor or None), kept for a step of a generation."""
        local = self._local
        step, local.awaiting = getattr(local, "awaiting", None), None
        if step is None:
            return
        ids = ids_of(args, kwargs)
        rows = ids.tolist() if isinstance(ids, torch.Tensor) else None
        group: _Group | None = getattr(local, "group", None)
        previous = getattr(local, "rows", None)
        local.rows = rows
        generation = self._labels.get(step)
        if generation is None or group is None:
            local.ids = rows  # a first step: its ids are the prompt's if a second step follows
            return
        with self._lock:
            info = self._infos.get(generation.call)
            if info is not None and info.steps and info.steps[-1] == step:
                info.ids[-1] = _new_tokens(rows, previous)

    def _label(self, step: int, generation: Generation) -> None:
        with self._lock:
            self._labels[step] = generation
            while len(self._labels) > LABELS_KEPT:
                self._labels.popitem(last=False)

    def _chain(self) -> list[_Frame]:
        """The frames of the model's own code on this thread's stack, outermost first (the model's call and the
        explorer's own frames are not the model's code)."""
        root = self._root()
        if root is None:
            return []
        codes = self._own_codes(root)
        found = []
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if frame.f_code in codes:
                names = frame.f_locals
                if names.get("self") is root:
                    found.append(_Frame(id(frame), frame.f_code, _weak(names, _arguments(frame.f_code))))
            frame = frame.f_back
        found.reverse()
        return found

    def _own_codes(self, root: nn.Module) -> frozenset[CodeType]:
        """The code of every function the model's classes define (not ``nn.Module``'s: its call machinery)."""
        cls = type(root)
        if self._codes is None or self._codes[0] is not cls:
            codes = set()
            for klass in cls.__mro__:
                if klass in (nn.Module, object):
                    continue
                for value in vars(klass).values():
                    function = getattr(value, "__func__", value)  # static and class methods
                    if callable(function):
                        code = getattr(inspect.unwrap(function), "__code__", None)  # generate() is decorated
                        if isinstance(code, CodeType):
                            codes.add(code)
            self._codes = (cls, frozenset(codes))
        return self._codes[1]


def _arguments(code: CodeType) -> frozenset[str]:
    """The names of a function's parameters (what its caller passed, which may outlive the call)."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return frozenset(code.co_varnames[:count])


def _weak(names: dict[str, Any], arguments: frozenset[str]) -> dict[str, weakref.ref[Any]]:
    """Weak references to the objects the frame's own variables hold (not its parameters: a caller may pass the same
    objects to the next call), where they take one (numbers, strings and plain containers do not)."""
    refs = {}
    for name, value in names.items():
        if name in arguments:
            continue
        try:
            refs[name] = weakref.ref(value)
        except TypeError:
            continue
    return refs


def _continued(old: _Frame, frame: _Frame) -> bool:
    """Whether ``frame`` (seen now) is the frame ``old`` was at the last step: every object its variables held still
    held (a new call at the same address made its own, and the last call's are gone); a frame whose variables held
    none cannot tell, and is taken for a new call."""
    if not old.refs:
        return False
    return all(
        (value := ref()) is not None and name in frame.refs and frame.refs[name]() is value
        for name, ref in old.refs.items()
    )


def _shared(before: list[_Frame], now: list[_Frame]) -> _Frame | None:
    """The innermost frame of ``now`` that was in ``before`` (the first step's), still running: the driver."""
    for frame in reversed(now):
        old = next((o for o in before if o.key == frame.key and o.code is frame.code), None)
        if old is not None and _continued(old, frame):
            return frame
    return None


def _find(driver: _Frame, chain: list[_Frame]) -> _Frame | None:
    """The frame of ``chain`` that is ``driver``, still running, or None."""
    return next((f for f in chain if f.key == driver.key and f.code is driver.code and _continued(driver, f)), None)


def _new_tokens(rows: list[list[int]] | None, previous: list[list[int]] | None) -> list[list[int]] | None:
    """The ids a decode step fed that the step before had not: those past its length when the sequence grew (no
    cache), else all it fed (a cache holds the rest)."""
    if rows is None:
        return None
    if previous is not None and rows and previous and len(rows[0]) > len(previous[0]):
        return [row[len(previous[0]) :] for row in rows]
    return rows
