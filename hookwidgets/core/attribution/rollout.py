"""Attention rollout (Abnar & Zuidema 2020) and gradient-weighted rollout (Chefer et al. 2021) over the
self-attention layers of one stack: one row of the rolled-out relevance, per token or as a ViT's patch grid."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch
from torch import nn

from ..display import display_name
from ..graph.stops import Stops, check_path
from ..model.attention_record import attention_graph_runner
from ..model.inputs import Inputs
from ..model.meta import no_values
from ..model.preserved_state import preserved_state
from ..model.scores import resolve_score
from ..model.tokens import leading_tokens, patch_grid

ROLLOUT_METHODS = ("attention_rollout", "grad_attention_rollout")
"""The attention-based methods: ``(N, T)`` relevance per token, ``(N, h, w)`` for a ViT's patches."""


class Rollout(NamedTuple):
    """A rollout's relevance, the stack it rolled out, and the score explained (gradient rollout only)."""

    relevance: torch.Tensor
    stack: str
    classes: list[int] | None
    target: str


def rollout(model: nn.Module, inputs: Inputs, target: Any, position: int | None, method: str) -> Rollout:
    """The relevance of ``method`` on ``inputs``: the row ``position`` of the rolled-out attention (default: row 0
    for bidirectional attention, the last row for causal), raw values; ``target`` (gradient rollout only) is the
    score whose gradients weigh the attention, read at ``position`` as ``resolve_score`` reads it."""
    grad = method == "grad_attention_rollout"
    try:
        run = attention_graph_runner(model, display_name(type(model).__name__), grad=grad)
    except ValueError as exc:
        raise ValueError(f"{method} rolls out attention probabilities, but {exc}") from None
    with preserved_state(model), _parameters_requiring_grad(model, grad):
        with Stops(model) as stops:
            found, output = run(inputs)
        stack, probabilities = self_attention_stack(found)
        if probabilities[0].is_meta:
            raise ValueError(no_values(method, f"the attention of {stack}"))
        row = _row_index(probabilities, position)  # an IndexError before any score is read at a wrong position
        classes, described = None, ""
        if grad:
            score, chosen = resolve_score(
                output, "top" if target is None else target, position, model=model, per_item=True
            )
            classes, described = chosen.classes, chosen.description
            sources = [t.grad_fn for t in map(_multiplied, probabilities) if t.grad_fn is not None]
            check_path(method, "the attention probabilities", score, sources, stops)
            relevance = gradient_rollout(probabilities, _gradients(score, probabilities), row)
        else:
            relevance = attention_rollout(probabilities, row)
    return Rollout(_as_grid(relevance.detach(), model, inputs), stack, classes, described)


def attention_rollout(probabilities: list[torch.Tensor], row: int) -> torch.Tensor:
    """Row ``row`` of ``Ã_L ··· Ã_1``, ``Ã_l = 0.5·mean_heads(A_l) + 0.5·I`` with rows renormalized: ``(N, T)``."""
    relevance = None
    for attention in reversed(probabilities):  # one row times each matrix, last layer first: no T×T products
        mixed = 0.5 * attention.float().mean(dim=1) + 0.5 * torch.eye(attention.shape[-1], device=attention.device)
        mixed = mixed / mixed.sum(dim=-1, keepdim=True)
        relevance = mixed[:, row] if relevance is None else (relevance[:, None] @ mixed)[:, 0]
    return relevance  # type: ignore[return-value]  # a stack has at least one layer


def gradient_rollout(probabilities: list[torch.Tensor], gradients: list[torch.Tensor], row: int) -> torch.Tensor:
    """Row ``row`` of ``R``: ``R = I``, then ``R ← R + mean_heads((∇A_l ⊙ A_l)⁺)·R`` for each layer in forward
    order, so ``R = (I + W_L) ··· (I + W_1)``: ``(N, T)``."""
    first = probabilities[0]
    relevance = torch.zeros(first.shape[0], first.shape[-1], device=first.device)
    relevance[:, row] = 1.0
    for attention, gradient in zip(reversed(probabilities), reversed(gradients), strict=True):
        weighted = (gradient.float() * attention.detach().float()).clamp(min=0).mean(dim=1)
        relevance = relevance + (relevance[:, None] @ weighted)[:, 0]
    return relevance


def self_attention_stack(found: dict[str, torch.Tensor]) -> tuple[str, list[torch.Tensor]]:
    """The stack of self-attention layers the first one to run belongs to, as ``a.layers.*.attn``, and its
    probabilities in execution order: the encoder's for an encoder-decoder model, whose decoder runs after it."""
    square = [(path, p) for path, p in found.items() if p.shape[-1] == p.shape[-2]]  # cross-attention is not
    if not square:
        shapes = ", ".join(f"{path}: {tuple(p.shape)}" for path, p in list(found.items())[:3])
        raise ValueError(f"rollout needs self-attention (as many keys as queries), but the attention found is {shapes}")
    parts = [(path.split("#")[0].split("."), p) for path, p in square]  # a module called again: one more layer
    first = parts[0][0]
    alike = [(names, p) for names, p in parts if _differ(first, names) is not None]
    varying = sorted({i for names, _ in alike for i in _differ(first, names)})  # type: ignore[union-attr]
    at = varying[0] if varying else None  # the outermost index that varies: the blocks', not a sublayer's
    layers = [p for names, p in alike if set(_differ(first, names)) <= {at}]  # type: ignore[arg-type]
    stack = ".".join("*" if i == at else name for i, name in enumerate(first))
    lengths = {p.shape[-1] for p in layers}
    if len(lengths) > 1:
        raise ValueError(f"the layers of {stack} attend over sequences of different lengths {sorted(lengths)}")
    return stack, layers


def _differ(first: list[str], names: list[str]) -> list[int] | None:
    """Where ``names`` differs from ``first`` if only in indices (``layers.0`` and ``layers.3``), else None."""
    if len(names) != len(first):
        return None
    where = [i for i, (a, b) in enumerate(zip(first, names, strict=True)) if a != b]
    return where if all(first[i].isdigit() and names[i].isdigit() for i in where) else None


def _gradients(score: torch.Tensor, probabilities: list[torch.Tensor]) -> list[torch.Tensor]:
    """∂score/∂A_l for each layer (zeros where the score does not depend on it), through ``torch.autograd.grad``."""
    if not score.requires_grad:
        return [torch.zeros_like(p) for p in probabilities]
    # nn.MultiheadAttention returns a view of the probabilities it multiplied: the gradient flows to its base.
    used = [_multiplied(p) for p in probabilities]
    grads = torch.autograd.grad(score, used, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g.reshape(p.shape) for p, g in zip(probabilities, grads, strict=True)]


def _multiplied(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor a returned view of the probabilities reshapes (same values in the same order), else ``tensor``."""
    base = tensor._base
    if base is None:
        return tensor
    reshaped = base.numel() == tensor.numel() and base.is_contiguous() and tensor.is_contiguous()
    return base if reshaped and base.requires_grad else tensor


def _row_index(probabilities: list[torch.Tensor], position: int | None) -> int:
    """The row of the relevance to return: ``position``; by default 0, or the last row for causal attention."""
    length = probabilities[0].shape[-1]
    if position is None:
        causal = all(not torch.triu(p, diagonal=1).any() for p in probabilities)
        position = length - 1 if causal else 0
    if not -length <= position < length:
        raise IndexError(
            f"position {position} is out of range for a sequence of T={length} tokens: positions go from "
            f"{-length} to {length - 1}"
        )
    return position


def _as_grid(row: torch.Tensor, model: nn.Module, inputs: Inputs) -> torch.Tensor:
    """A vision transformer's patch tokens as ``(N, h, w)`` (the tokens before them dropped); ``row`` as it is
    otherwise."""
    grid = patch_grid(model, inputs)
    extra = leading_tokens(row.shape[-1], grid)
    if grid is None or extra is None:
        return row
    return row[:, extra:].reshape(row.shape[0], *grid)


@contextlib.contextmanager
def _parameters_requiring_grad(model: nn.Module, grad: bool) -> Iterator[None]:
    """For gradient rollout, every floating parameter requires grad (a frozen model's attention would be out of the
    graph); the flags are put back as found."""
    frozen = [p for p in model.parameters() if grad and not p.requires_grad and p.is_floating_point()]
    for param in frozen:
        param.requires_grad_(True)
    try:
        with torch.set_grad_enabled(grad):
            yield
    finally:
        for param in frozen:
            param.requires_grad_(False)
