"""Token attributions: saliency, input×gradient and integrated gradients on the embedding of the input ids."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.autograd.graph import get_gradient_edge

from ..display import quoted
from ..graph.stops import Stops, check_path
from ..model.inputs import Inputs, call_model, describe_inputs, token_ids
from ..model.nested import rebuilt_mapping
from ..model.preserved_state import preserved_state
from ..model.scores import resolve_score

TOKEN_METHODS = ("saliency", "input_x_grad", "integrated_gradients")
"""The methods that give one score per input token ``(N, T)`` on a model fed token ids."""


def holds_image(inputs: Inputs) -> bool:
    """Whether the inputs hold a floating-point tensor ``(N, C, H, W)`` (the pixel methods' and CAMs' input)."""
    if isinstance(inputs, torch.Tensor):
        return inputs.is_floating_point() and inputs.dim() == 4
    values = inputs.values() if isinstance(inputs, Mapping) else inputs if isinstance(inputs, (tuple, list)) else ()
    return any(holds_image(value) for value in values)


class EmbeddingTap:
    """Forward hooks on every ``nn.Embedding``: the one called on the token ids gives its output ``E``, which
    ``replace`` (a function of ``E``) may swap for another tensor inside the forward."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.ids: torch.Tensor | None = None
        self.replace: Callable[[torch.Tensor], torch.Tensor] | None = None
        self.module: nn.Embedding | None = None
        self.output: torch.Tensor | None = None
        self._handles: list[Any] = []

    def watch(self, ids: torch.Tensor | None, replace: Callable[[torch.Tensor], torch.Tensor]) -> EmbeddingTap:
        self.ids, self.replace, self.output = ids, replace, None
        return self

    def __enter__(self) -> EmbeddingTap:
        for module in self.model.modules():
            if isinstance(module, nn.Embedding):
                self._handles.append(module.register_forward_hook(self._hook, with_kwargs=True))
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, module: nn.Embedding, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> Any:
        given = args[0] if args else kwargs.get("input")
        if self.replace is None or self.output is not None or not isinstance(output, torch.Tensor):
            return None  # not watching, or done
        if not _same_ids(given, self.ids):
            return None
        self.module = module
        self.output = self.replace(output)
        return self.output


def _same_ids(given: Any, ids: torch.Tensor | None) -> bool:
    """``given`` is the ids tensor or a view of all of it (GPT-2 embeds ``input_ids.view(-1, T)``)."""
    if given is ids:
        return True
    return (
        isinstance(given, torch.Tensor)
        and ids is not None
        and given.numel() == ids.numel()
        and given.dtype == ids.dtype
        and given.data_ptr() == ids.data_ptr()
    )


def token_attribution(
    model: nn.Module,
    inputs: Inputs,
    target: Any,
    position: int | None,
    method: str,
    *,
    n_steps: int = 50,
    baseline: int | None = None,
    internal_batch_size: int | None = None,
) -> tuple[torch.Tensor, str, list[int] | None, str]:
    """``(N, T)`` scores of ``method`` per input token, the embedding's path, the classes and the score in words.

    The gradients are taken at the output of the ``nn.Embedding`` called on the ids and summed over its hidden
    dimension; runs in eval mode with gradients enabled and leaves the model as found.
    """
    ids = token_ids(inputs)
    if ids is None:
        raise ValueError(
            f"token attributions need token ids: an integer tensor (N, T), alone or as the input_ids of a mapping; "
            f"got {describe_inputs(inputs)}"
        )
    _check_options(method, n_steps, internal_batch_size)
    with preserved_state(model), torch.enable_grad(), EmbeddingTap(model) as tap:
        tap.watch(ids, _leaf)
        with torch.set_grad_enabled(method != "integrated_gradients"), Stops(model) as stops:
            output = call_model(model, inputs)  # IG's gradients come from its steps' runs
        embedding, module = tap.output, tap.module
        if embedding is None or module is None:  # the tap sets both
            raise ValueError(
                f"found no nn.Embedding called on the input_ids {tuple(ids.shape)} of {describe_inputs(inputs)} in "
                f"the forward of {type(model).__name__}: token attributions are taken at the output of the "
                "nn.Embedding module whose forward receives the input_ids tensor itself; a functional embedding or "
                "a one-hot product has none: embed the ids with an nn.Embedding, or attribute a floating input"
            )
        path = _path(model, module)
        score, chosen = resolve_score(output, target, position, model=model, per_item=True)
        if method == "integrated_gradients":
            base = _baseline(module, ids, embedding, baseline)
            # The classes are fixed by the actual input's run, as Captum's IG takes a given target: re-picking the
            # top class at every step along the path would integrate the gradients of different scores.
            fixed = chosen.classes if chosen.classes is not None else target
            steps = _Steps(model, inputs, tap, fixed, position, len(ids), path)
            grads = steps.integrated(embedding.detach(), base, n_steps, internal_batch_size)
            scores = ((embedding.detach() - base) * grads).sum(-1)
        else:
            check_path(method, f"the embedding {quoted(path)}", score, [get_gradient_edge(embedding).node], stops)
            (grad,) = torch.autograd.grad(score, [embedding], allow_unused=True)
            grad = torch.zeros_like(embedding) if grad is None else grad
            scores = grad.abs().sum(-1) if method == "saliency" else (embedding.detach() * grad).sum(-1)
    return scores.detach(), path, chosen.classes, chosen.description


def _leaf(output: torch.Tensor) -> torch.Tensor:
    """The embedding as a leaf that requires grad: the gradient stops there, frozen embeddings or not."""
    return output.detach().requires_grad_(True)


def _check_options(method: str, n_steps: int, internal_batch_size: int | None) -> None:
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive int (the integration points), got {n_steps!r}")
    if internal_batch_size is not None and (not isinstance(internal_batch_size, int) or internal_batch_size < 1):
        raise ValueError(
            f"internal_batch_size must be a positive int (items per forward) or None, got {internal_batch_size!r}"
        )


def _path(model: nn.Module, module: nn.Module) -> str:
    path: str = next(name for name, child in model.named_modules() if child is module)  # torch: untyped
    return path


def _baseline(module: nn.Embedding, ids: torch.Tensor, embedding: torch.Tensor, baseline: int | None) -> torch.Tensor:
    """The zero embedding, or token ``baseline``'s embedding at every position."""
    if baseline is None:
        return torch.zeros_like(embedding).detach()
    vocab = module.num_embeddings
    if isinstance(baseline, bool) or not isinstance(baseline, (int, np.integer)) or not 0 <= baseline < vocab:
        raise ValueError(
            f"baseline={baseline!r} is not a token id of the embedding {type(module).__name__}, whose vocabulary "
            f"size is {vocab}: pass a token id from 0 to {vocab - 1} (e.g. the pad token), or None for zeros"
        )
    with torch.no_grad():
        embedded: torch.Tensor = module(torch.full_like(ids, int(baseline)))
        return embedded.reshape(embedding.shape).to(embedding.dtype)


def gauss_legendre(n_steps: int) -> tuple[list[float], list[float]]:
    """Captum's ``gausslegendre`` points in [0, 1] and their weights."""
    points, weights = np.polynomial.legendre.leggauss(n_steps)
    return (0.5 * (1 + points)).tolist(), (0.5 * weights).tolist()


class _Steps:
    """The forwards of integrated gradients: many steps in one batch, the other inputs repeated along it."""

    def __init__(
        self,
        model: nn.Module,
        inputs: Inputs,
        tap: EmbeddingTap,
        target: Any,
        position: int | None,
        items: int,
        path: str,
    ) -> None:
        self.model, self.inputs, self.tap = model, inputs, tap
        self.target, self.position, self.items, self.path = target, position, items, path

    def integrated(
        self, embedding: torch.Tensor, base: torch.Tensor, n_steps: int, internal_batch_size: int | None
    ) -> torch.Tensor:
        """The weighted sum over the path's points of the gradient at each (Captum's chunks of steps)."""
        alphas, weights = gauss_legendre(n_steps)
        per_batch = n_steps if internal_batch_size is None else max(1, internal_batch_size // self.items)
        total = torch.zeros_like(embedding)
        for start in range(0, n_steps, per_batch):
            chunk = slice(start, start + per_batch)
            total = total + self._chunk(embedding, base, alphas[chunk], weights[chunk], checked=start > 0)
        return total

    def _chunk(
        self, embedding: torch.Tensor, base: torch.Tensor, alphas: list[float], weights: list[float], checked: bool
    ) -> torch.Tensor:
        """The weighted gradients at one chunk of the path's points; the first chunk (not ``checked``) also checks
        that the gradient reaches the embedding."""
        steps = len(alphas)
        shape = (steps, *[1] * embedding.dim())
        alpha = torch.tensor(alphas, dtype=embedding.dtype, device=embedding.device).reshape(shape)
        path = (base + alpha * (embedding - base)).reshape(steps * len(embedding), *embedding.shape[1:])
        path.requires_grad_(True)
        inputs = _repeated(self.inputs, self.items, steps)
        stops = None if checked else Stops(self.model)
        watching = stops if stops is not None else contextlib.nullcontext()
        with self.tap.watch(token_ids(inputs), lambda _: path), watching:
            output = call_model(self.model, inputs)
        score, _ = resolve_score(output, self._target(steps), self.position, model=self.model, per_item=True)
        if stops is not None:
            where = f"the embedding {quoted(self.path)}"
            check_path("integrated_gradients", where, score, [get_gradient_edge(path).node], stops)
        if self.target == "loss":
            score = score * steps  # the loss is a mean over the batch: each step's own loss has `steps` times its grad
        (grad,) = torch.autograd.grad(score, [path], allow_unused=True)
        if grad is None:
            return torch.zeros_like(embedding)
        weight = torch.tensor(weights, dtype=grad.dtype, device=grad.device).reshape(shape)
        return (grad.reshape(steps, *embedding.shape) * weight).sum(0)

    def _target(self, steps: int) -> Any:
        return list(self.target) * steps if isinstance(self.target, list) else self.target


def _repeated(inputs: Inputs, items: int, steps: int) -> Inputs:
    """The inputs with every tensor of ``items`` rows repeated ``steps`` times along the batch (step-major)."""

    def repeat(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == items:
            return value.repeat(steps, *[1] * (value.dim() - 1))
        if isinstance(value, Mapping):
            return rebuilt_mapping(value, {key: repeat(v) for key, v in value.items()})
        if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
            return type(value)(repeat(v) for v in value)
        return value

    repeated: Inputs = repeat(inputs)
    return repeated


def check_token_call(
    method: str, ids: torch.Tensor | None, layer: Any, options: dict[str, Any], inputs: Inputs | None = None
) -> None:
    """A ValueError for a method that does not fit the inputs: a CAM on token ids, integrated gradients on no ids
    (``ids`` None; ``inputs`` tell whether they hold ids beside an image), a layer or integrated gradients' options
    given to a method that takes none."""
    given = ", ".join(f"{name}=" for name, value in options.items() if value is not None)
    if ids is None:
        beside = None if inputs is None else token_ids(inputs)
        if method == "integrated_gradients" and beside is not None:
            raise ValueError(
                f"integrated_gradients attributes input tokens, but the inputs hold an image (N, C, H, W) beside the "
                f"token ids {tuple(beside.shape)}, and attributions on such inputs explain the image: use "
                "method='saliency', 'input_x_grad' or a CAM"
            )
        if method == "integrated_gradients":
            raise ValueError(
                "integrated_gradients attributes input tokens: it needs integer token ids (N, T), as input_ids in a "
                "dict or alone; for an image use method='saliency', 'input_x_grad' or a CAM"
            )
        if given:
            raise ValueError(f"{given} apply to method='integrated_gradients' on token ids; leave them out")
        return
    if method not in TOKEN_METHODS:
        raise ValueError(
            f"{method} needs an image input (N, C, H, W) to draw a map on, but the inputs hold token ids "
            f"{tuple(ids.shape)}; for one score per token use method= {', '.join(repr(m) for m in TOKEN_METHODS)}, "
            "or an attention rollout ('attention_rollout', 'grad_attention_rollout')"
        )
    if layer is not None:
        raise ValueError(f"{method} attributes input tokens at the embedding of the input_ids; leave layer=None")
    if given and method != "integrated_gradients":
        raise ValueError(f"{given} apply to method='integrated_gradients'; {method} takes none, leave them out")
