"""Where a model's attention probabilities come from: the modules transformers records attentions from, every
``nn.MultiheadAttention``, and attention modules whose softmax over keys is a module of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from torch import nn

from .attention import is_attention_module
from .attn_impl import hidden_attention_note, hides_probabilities, implementation_at

LOOKED_FOR = (
    "the modules transformers records attentions from (a model's _can_record_outputs), nn.MultiheadAttention "
    "modules, modules named …Attention with an nn.Softmax child module, and the attentions a transformers model "
    "returns when called with output_attentions=True"
)
"""What ``attention_sources`` looks for, in words for the error of a model with none."""


@dataclass(frozen=True)
class AttentionSource:
    """One module the attention probabilities of a run are read from, and how."""

    path: str
    """The attention module's path: the key of its probabilities."""
    module: nn.Module
    """The attention module."""
    how: Literal["output", "mha", "softmax"]
    """``output``: an element of its output (``index``); ``mha``: nn.MultiheadAttention asked for per-head weights;
    ``softmax``: the output of its ``nn.Softmax`` child ``child``."""
    index: int = 1
    """For ``output``: the element of a tuple output holding the probabilities (transformers' recorder index)."""
    child: str = ""
    """For ``softmax``: the child's name."""


def attention_sources(model: nn.Module) -> list[AttentionSource]:
    """Every attention source of ``model``, in the order of ``named_modules``."""
    recorded = recorded_attention(model)
    sources = []
    for path, module in model.named_modules():
        if id(module) in recorded:
            sources.append(AttentionSource(path, module, "output", index=recorded[id(module)]))
        elif isinstance(module, nn.MultiheadAttention):
            sources.append(AttentionSource(path, module, "mha"))
        elif is_attention_module(module):
            child = softmax_child(module)
            if child is not None:
                sources.append(AttentionSource(path, module, "softmax", child=child))
    return sources


def softmax_child(module: nn.Module) -> str | None:
    """The name of ``module``'s one ``nn.Softmax`` child (the softmax over keys), or None."""
    names = [name for name, child in module.named_children() if isinstance(child, nn.Softmax)]
    return names[0] if len(names) == 1 else None


_Spec = tuple[Any, int, str | None, str | None]  # target_class, index, layer_name, class_name


def recorded_attention(model: nn.Module) -> dict[int, int]:
    """``{id(module): index}`` of the modules transformers records attentions from with ``output_attentions=True``:
    each model's ``_can_record_outputs`` entries whose key ends in ``attentions``, matched as transformers matches
    them (class, class-name suffix of the path, ``layer_name`` in the path), a nested pretrained model using its own."""
    found: dict[int, int] = {}
    _match(model, "", [], found)
    return found


def _match(module: nn.Module, path: str, specs: list[_Spec], found: dict[int, int]) -> None:
    own = _attention_specs(module)
    if own is not None:  # a pretrained (sub)model: its own entries apply to it and below
        specs = own
    dotted = f".{path}" if path else ""
    for target_class, index, layer_name, class_name in specs:
        by_class = target_class is not None and isinstance(module, target_class)
        by_name = class_name is not None and dotted.endswith(class_name)
        if not (by_class or by_name):
            continue
        if layer_name is not None and f".{layer_name.strip('.')}." not in dotted + ".":
            continue
        found.setdefault(id(module), index)
    for name, child in module.named_children():
        _match(child, f"{path}.{name}" if path else name, specs, found)


def _attention_specs(module: nn.Module) -> list[_Spec] | None:
    """``(target_class, index, layer_name, class_name)`` of each attention entry of a transformers model's
    ``_can_record_outputs`` (read as transformers reads it), or None when ``module`` is no such model."""
    if not hasattr(type(module), "_can_record_outputs") or not hasattr(module, "config"):
        return None
    table: dict[str, Any] = (
        getattr(type(module), "_can_record_outputs", None) or {}
    )  # a pretrained model without entries records nothing below it
    specs: list[_Spec] = []
    for key, entries in table.items():
        if not key.endswith("attentions"):
            continue
        for entry in entries if isinstance(entries, list) else [entries]:
            if isinstance(entry, str):  # a class name, matched as a suffix of the path
                specs.append((None, 1, None, entry))
            elif isinstance(entry, type):
                specs.append((entry, 1, None, None))
            else:  # an OutputRecorder
                specs.append(
                    (
                        getattr(entry, "target_class", None),
                        getattr(entry, "index", 1),
                        getattr(entry, "layer_name", None),
                        getattr(entry, "class_name", None),
                    )
                )
    return specs


def hidden_probabilities_note(model: nn.Module, path: str, module: nn.Module) -> str | None:
    """The note of a forward hook on an attention module whose config runs an implementation that computes no
    probabilities (sdpa, flash), or None: its hook sees None where eager attention gives them."""
    if not is_attention_module(module):
        return None
    implementation = implementation_at(model, path)
    if implementation is None or not hides_probabilities(implementation):
        return None
    return hidden_attention_note(path, implementation, recorded_attention(model).get(id(module)))
