"""Autograd node hooks that survive new forwards: placed by node id on the graph of every forward.

Autograd nodes live only as long as the graph of one forward, so a hook on a node would fire in one
backward at most. While node hooks exist, a lean ``GraphRecorder`` (no saved-tensor metadata) follows
every forward of the model, the user's own loop included, and at the end of each forward hooks the
node that has each hook's id. An id missing from a forward's graph is said on the hook's note.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.autograd.graph import Node

from ..display import quoted
from ..graph.record import GraphRecorder, GraphRecording
from ..model.scope import op_name
from . import notes
from .actions import Firing, named_tensors
from .clock import Clock
from .notes import NoteKind
from .own_runs import OWN_RUN, silent

if TYPE_CHECKING:
    from torch import nn

    from .info import HookInfo

Fire = Callable[..., Any]
"""``Dispatch.fire``: performs one firing of a hook."""

_MARK = "hookwidgets.placed"  # key in node.metadata: id of each HookInfo placed there -> [step it belongs to]


class NodeHooks:
    """The node hooks of one registry, and the recorder that places them on every forward's graph.

    Their firings are numbered by the registry's ``clock`` and performed by its ``fire``.
    """

    def __init__(self, clock: Clock, fire: Fire) -> None:
        self._clock = clock
        self._fire = fire
        self._infos: dict[str, HookInfo] = {}  # by kind + path, in attach order
        self._recorder: GraphRecorder | None = None
        # hooked AccumulateGrad nodes: torch holds them only weakly, and a node let go never fires
        self._kept: dict[str, Node] = {}

    def __bool__(self) -> bool:
        return bool(self._infos)

    def add(self, info: HookInfo, model: nn.Module) -> None:
        """Place ``info`` on every later forward's node with its id; starts the recorder with the first hook."""
        self._infos[f"{info.kind} {info.path}"] = info
        if self._recorder is None:
            self._recorder = GraphRecorder(model, saved_tensors=False, on_graph=self._place)
            self._recorder.start()

    def discard(self, info: HookInfo) -> None:
        """Forget ``info`` (its handles are removed by the registry); stops the recorder with the last hook."""
        key = f"{info.kind} {info.path}"
        if self._infos.get(key) is info:
            del self._infos[key]
            self._kept.pop(key, None)
        if not self._infos and self._recorder is not None:
            self._recorder.stop()
            self._recorder = None

    def _place(self, recording: GraphRecording) -> None:
        """At the end of a forward: hook each id's node in this graph, or say on the hook that it is missing."""
        step = self._clock.step
        for key, info in list(self._infos.items()):
            if silent(info.edit):  # the explorers' own runs get no node hooks, but those with an edit in an edits run
                continue
            node = recording.find(info.path)
            if OWN_RUN.depth:  # an analysis's run (maybe without grad) says nothing about the user's steps
                if node is not None:
                    self._hook(key, info, node, step)
                continue
            if node is None:
                notes.add(info, _missing_note(info.path, recording, step), NoteKind.NODE_MISSING)
                continue
            notes.drop(info, NoteKind.NODE_MISSING)
            self._hook(key, info, node, step)

    def _hook(self, key: str, info: HookInfo, node: Node, step: int) -> None:
        placed = node.metadata.setdefault(_MARK, {})  # type: ignore[attr-defined]  # torch stubs declare Node.metadata a method; it is a dict property
        if id(info) in placed:  # the same node again (a kept AccumulateGrad): its firings now belong to this step
            placed[id(info)][0] = step
            return
        current = placed[id(info)] = [step]
        if info.kind == "node_pre":
            handle = node.register_prehook(self._pre_hook(info, current))
        else:
            handle = node.register_hook(self._post_hook(info, current))
        # handles of nodes whose graph is gone point at nothing: drop them so the list stays short
        info._handles[:] = [h for h in info._handles if h.hooks_dict_ref() is not None]
        info._handles.append(handle)
        if op_name(node) == "AccumulateGrad":
            self._kept[key] = node

    def _pre_hook(self, info: HookInfo, step: list[int]) -> Callable[[tuple[Any, ...]], Any]:
        next_call, fire, user = self._clock.next_call, self._fire, info.action

        def node_pre(grad_outputs: tuple[Any, ...]) -> Any:
            if not info.active:
                return None
            call = 0 if OWN_RUN.depth else next_call(info.path, info.kind, step[0])  # an own run counts nothing
            firing = Firing(info.path, info.kind, step[0], call)
            call_user = user if callable(user) else None
            return fire(info, "backward", firing, grad_outputs, _grad_outputs, call_user)

        return node_pre

    def _post_hook(self, info: HookInfo, step: list[int]) -> Callable[[tuple[Any, ...], tuple[Any, ...]], Any]:
        next_call, fire, user = self._clock.next_call, self._fire, info.action

        def node(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> Any:
            if not info.active:
                return None
            call = 0 if OWN_RUN.depth else next_call(info.path, info.kind, step[0])  # an own run counts nothing
            firing = Firing(info.path, info.kind, step[0], call)
            call_user = (lambda g: user(g, grad_outputs)) if callable(user) else None
            tensors_of = lambda g: {**_grad_outputs(grad_outputs), **named_tensors("grad_input", g)}  # noqa: E731
            return fire(info, "backward", firing, grad_inputs, tensors_of, call_user)

        return node


def _grad_outputs(grad_outputs: Any) -> dict[str, torch.Tensor]:
    return named_tensors("grad_output", grad_outputs)


def _missing_note(node_id: str, recording: GraphRecording, step: int) -> str:
    """Why a node hook did not fire in this step: its id is not in the graph, with the closest ids."""
    close = difflib.get_close_matches(node_id, recording.ids(), n=3, cutoff=0.6)
    hint = "; closest ids now: " + ", ".join(quoted(c) for c in close) if close else ""
    return (
        f"not placed in step {step}: the forward's graph has no node {quoted(node_id)} (control flow or shapes "
        f"changed, or an op moved){hint}; it is placed again whenever a forward makes that node"
    )
