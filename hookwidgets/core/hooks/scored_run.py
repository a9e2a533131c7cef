"""``run()``'s forward and the backward of its score: the user's hooks see both, and a hook whose gradient stops at a
module that passes none (a quantized one) is told where."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..graph.no_graph import no_graph_reason
from ..graph.stops import Stops
from ..model.inputs import Inputs, Target, call_model
from ..model.nested import tensors_in
from ..model.packed import holds_packed
from ..model.scores import Score, resolve_score
from .info import HookInfo
from .stop_notes import note_stopped, stopped_notes


def forward_backward(
    model: nn.Module,
    inputs: Inputs,
    target: Target,
    position: int | None,
    hooks: list[HookInfo],
    recorder: contextlib.AbstractContextManager[Any] | None = None,
    forward_done: Callable[[], None] | None = None,
) -> tuple[Any, Score | None]:
    """The output of a forward of ``inputs`` inside ``recorder``, and with ``target`` the score backpropagated after
    it (``position`` as in ``resolve_score``); ``forward_done()`` runs once the forward is over (or raised), before
    the backward frees what the graph saved. ``hooks``: the explorer's, which the stop notes concern."""
    # a model keeping packed weights (a quantized one): its hooks say where gradients stop, if they do
    stops = Stops(model, True) if target is not None and holds_packed(model) else None
    try:
        with recorder or contextlib.nullcontext(), stops or contextlib.nullcontext():
            output = call_model(model, inputs)
    finally:
        if forward_done is not None:
            forward_done()
    if target is None:
        return output, None
    score, chosen = resolve_score(output, target, position, model=model)
    if not score.requires_grad:  # torch would only say "element 0 of tensors does not require grad"
        raise ValueError(_why_no_backward(model, output, inputs))
    roots = [] if score.grad_fn is None else [score.grad_fn]  # a leaf score has no node to start from
    stopped = [] if stops is None else stopped_notes(hooks, model, stops, roots)
    score.backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward is unannotated
    note_stopped(stopped)  # after the firings, whose notes only see a None gradient
    return output, chosen


def _why_no_backward(model: nn.Module, output: Any, inputs: Inputs) -> str:
    """Why a run's score has no gradient to propagate, and what to do about it."""
    grad_mode = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
    inputs_grad = any(t.requires_grad for t in tensors_in(inputs))
    reason = no_graph_reason(model, output, grad_mode, inputs_grad).removeprefix("no graph: ")
    return f"run(target=...) has nothing to backpropagate: {reason}"
