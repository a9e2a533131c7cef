"""One forward that records the attention probabilities ``(N, H, T_q, T_k)`` of every attention source, with
eager attention, per-head ``nn.MultiheadAttention`` weights and torch's MHA fast path off for that run only."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ..display import display_name, quoted
from .attention_returned import returned_attention_and_output, returns_attentions
from .attention_sources import LOOKED_FOR, AttentionSource, attention_sources
from .attn_impl import eager_attention, reachable_configs
from .inputs import Inputs, call_model

_Records = list[tuple[AttentionSource, torch.Tensor | None]]  # what the hooks recorded, in call order
_MHA_ARGUMENTS = ("key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal")
"""MultiheadAttention.forward's arguments after query, key and value, in order."""


class Attentions(dict[str, torch.Tensor]):
    """What ``attention()`` returns: ``{module path: probabilities (N, H, T_q, T_k)}``, and ``edits``, the sentence
    saying whether the run had the user's edits (``edits_note``; "" when none is attached)."""

    edits: str = ""


def no_attention_message(model: nn.Module, model_name: str) -> str:
    """The error of ``attention()`` on a model with no attention source."""
    text = f"attention() found no attention in {model_name}: it looked for {LOOKED_FOR}"
    if reachable_configs(model):  # a transformers model that declares nothing to record
        text += (
            "; this transformers model declares no attentions to record and returned none with eager attention and "
            "output_attentions=True (or takes no such argument): hook the module that computes its softmax over keys"
        )
    return text


def attention_runner(model: nn.Module, model_name: str) -> Callable[[Inputs], dict[str, torch.Tensor]]:
    """How to get ``model``'s attention probabilities from inputs: its attention sources recorded in one forward,
    or, for an older transformers model that declares nothing to record, the attentions it returns when asked; a
    ValueError naming what was looked for when it has neither."""
    run = attention_graph_runner(model, model_name, grad=False)
    return lambda inputs: run(inputs)[0]


def attention_graph_runner(
    model: nn.Module, model_name: str, *, grad: bool = True
) -> Callable[[Inputs], tuple[dict[str, torch.Tensor], Any]]:
    """As ``attention_runner``, with the model's output too; with ``grad`` the forward runs with autograd on, so the
    probabilities stay in the graph of the output (for gradients of a score with respect to them)."""
    sources = attention_sources(model)
    if sources:
        return lambda inputs: _record(model, inputs, sources, grad)
    if not returns_attentions(model):
        raise ValueError(no_attention_message(model, model_name))

    def returned(inputs: Inputs) -> tuple[dict[str, torch.Tensor], Any]:
        found, output = returned_attention_and_output(model, inputs, grad=grad)
        if not found:
            raise ValueError(no_attention_message(model, model_name))
        return found, output

    return returned


def record_attention(model: nn.Module, inputs: Inputs, sources: list[AttentionSource]) -> dict[str, torch.Tensor]:
    """``{path: probabilities}`` of one forward of ``model`` on ``inputs``, in the order the sources ran (a module
    called again gets ``path#2``, ``path#3``); the hooks it adds are removed and the settings it changes restored
    before it returns or raises."""
    return _record(model, inputs, sources, grad=False)[0]


def _record(
    model: nn.Module, inputs: Inputs, sources: list[AttentionSource], grad: bool
) -> tuple[dict[str, torch.Tensor], Any]:
    """``record_attention`` and the model's output, the forward run with autograd on when ``grad``."""
    records: _Records = []
    handles = []
    try:
        for source in sources:
            handles.extend(_hooks(source, records))
        with eager_attention(model), _mha_fast_path_off(), torch.set_grad_enabled(grad):
            output = call_model(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    hidden = [source for source, value in records if value is None]
    if hidden:
        raise ValueError(_hidden_message(hidden[0]))
    if not records:
        names = ", ".join(quoted(s.path) for s in sources[:5]) + (", …" if len(sources) > 5 else "")
        raise ValueError(
            f"attention() found attention modules ({names}) but none of them ran in the forward on these inputs; "
            "pass inputs that reach them (an encoder-decoder also needs its decoder inputs)"
        )
    result: dict[str, torch.Tensor] = {}
    calls: dict[str, int] = {}
    for source, value in records:
        calls[source.path] = calls.get(source.path, 0) + 1
        key = source.path if calls[source.path] == 1 else f"{source.path}#{calls[source.path]}"
        result[key] = value  # type: ignore[assignment]  # None was refused above
    return result, output


def _hooks(source: AttentionSource, records: _Records) -> list[Any]:
    """The handles of the hooks that record ``source``'s probabilities into ``records``: forward hooks run first,
    so they read what the module returned before any other hook of the model changes it."""
    if source.how == "softmax":
        child = source.module.get_submodule(source.child)
        return [child.register_forward_hook(lambda _m, _a, output: records.append((source, output)), prepend=True)]
    if source.how == "mha":
        return _mha_hooks(source, records)
    index = source.index

    def read(_module: nn.Module, _args: Any, output: Any) -> None:
        value = output[index] if isinstance(output, (tuple, list)) else output
        records.append((source, value if isinstance(value, torch.Tensor) else None))

    return [source.module.register_forward_hook(read, prepend=True)]


def _mha_hooks(source: AttentionSource, records: _Records) -> list[Any]:
    """Ask an ``nn.MultiheadAttention`` for per-head weights, record them, and give its caller what it asked for."""
    asked: list[tuple[bool, bool]] = []  # the caller's (need_weights, average_attn_weights), per call

    def before(
        _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kwargs = {**dict(zip(_MHA_ARGUMENTS, args[3:], strict=False)), **kwargs}  # past query, key, value: by name
        args = args[:3]
        asked.append((kwargs.get("need_weights", True), kwargs.get("average_attn_weights", True)))
        kwargs.update(need_weights=True, average_attn_weights=False)
        return args, kwargs

    def after(_module: nn.Module, _args: Any, _kwargs: Any, output: tuple[Any, ...]) -> tuple[Any, ...]:
        need, average = asked.pop()
        attn, weights = output
        records.append((source, weights.unsqueeze(0) if weights.dim() == 3 else weights))  # unbatched: one item
        if not need:
            return attn, None
        return attn, weights.mean(dim=-3) if average else weights

    return [  # ``after`` first: the model's other forward hooks see what the caller asked for
        source.module.register_forward_pre_hook(before, with_kwargs=True),
        source.module.register_forward_hook(after, with_kwargs=True, prepend=True),
    ]


@contextlib.contextmanager
def _mha_fast_path_off() -> Iterator[None]:
    """MultiheadAttention's fused fast path (eval, no grad) computes the weights with another kernel, a few ulps
    from the ones a call with autograd on returns: off for the run, as found after."""
    enabled = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(enabled)


def _hidden_message(source: AttentionSource) -> str:
    name = display_name(type(source.module).__name__)
    return (
        f"{quoted(source.path)} ({name}) returned no attention probabilities (output.{source.index} is None) although "
        "its config was set to eager attention: its class computes attention with a kernel of its own; build the "
        "model with attn_implementation='eager', or hook the module that computes the softmax over keys"
    )
