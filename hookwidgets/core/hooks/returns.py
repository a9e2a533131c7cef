"""What a user's hook callable may return, checked by torch's own rules before torch sees it.

torch checks a hook's return value inside autograd, where its error stops the backward half way; checked
here first, a bad value is an error of the hook like any other (``on_error``) and torch gets None instead.
Each error starts with torch's own message for the same value, then says which hook returned what.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping
from typing import Any

import torch

Slots = tuple[int, ...] | None
"""Positions of grad_input/grad_output that torch passes on (the module's tensors); () none; None unknown."""


def check_return(rule: str, result: Any, original: Any, name: str, where: str, slots: Slots = None) -> None:
    """Raise what torch would raise for ``result`` returned by the hook ``name`` (``where`` says which hook);
    ``original`` is the value the hook was given. No rule for ``rule``: anything goes."""
    check = RULES.get(rule)
    if check is not None and result is not None:
        check(result, original, name, where, slots)


def _gradient(result: Any, original: Any, name: str, where: str, slots: Slots = None) -> None:
    """A tensor hook: a tensor of the gradient's size, dtype, layout and device type."""
    if not isinstance(result, torch.Tensor):
        raise TypeError(
            f"expected Variable, but hook returned '{type(result).__name__}' ({where} returned "
            f"{_short(result)}: return None to keep the gradient, or a tensor like it)"
        )
    _same_tensor_type(result, original, name, where)


def _node_values(result: Any, original: tuple[Any, ...], name: str, where: str, slots: Slots = None) -> None:
    """An autograd node hook (and a legacy module backward hook, which is one): a tuple of the same length."""
    if not isinstance(result, tuple):
        raise TypeError(
            f"expected tuple, but hook returned '{type(result).__name__}' ({where} must return None or a tuple "
            f"of {len(original)} gradients or None)"
        )
    if len(result) != len(original):
        raise RuntimeError(
            f"hook '{name}' has returned an incorrect number of values (got {len(result)}, but expected "
            f"{len(original)}) ({where}: return one gradient or None for each of the {len(original)} it was given)"
        )
    for value, given in zip(result, original, strict=True):
        _value(value, given, name, where)


def _grad_input(result: Any, original: tuple[Any, ...], name: str, where: str, slots: Slots = None) -> None:
    """A module's full backward hook: None, or one value per input (only the tensor inputs' are used)."""
    if slots == ():
        if not (isinstance(result, tuple) and all(value is None for value in result)):
            raise RuntimeError(
                "Backward hook for Modules where no input requires gradient should always return None or None "
                f"for all gradients. ({where} returned {_short(result)}; no input of the module requires grad "
                "(e.g. the first layer), so it has no grad_input to replace: change grad_output with a "
                "'backward_pre' hook instead)"
            )
        return
    _sized(result, where)
    if len(result) != len(original):
        raise RuntimeError(
            f"Backward hook returned an invalid number of grad_input, got {len(result)}, but expected "
            f"{len(original)} ({where}: return a tuple with one gradient or None per input)"
        )
    _slot_values(result, original, name, where, slots)


def _grad_output(result: Any, original: tuple[Any, ...], name: str, where: str, slots: Slots = None) -> None:
    """A module's full backward pre-hook: None, or one value per output (only the tensor outputs' are used)."""
    _sized(result, where)
    if len(result) != len(original):
        raise RuntimeError(
            f"Backward pre hook returned an invalid number of grad_output, got {len(result)}, but expected "
            f"{len(original)} ({where}: return a tuple with one gradient or None per output)"
        )
    _slot_values(result, original, name, where, slots)


def _forward_pre_with_kwargs(result: Any, original: Any, name: str, where: str, slots: Slots = None) -> None:
    """A forward pre-hook taking kwargs: None or ``(new_args, new_kwargs)``."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(
            f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got {_short(result)}. "
            f"({where})"
        )
    if not isinstance(result[1], Mapping):
        raise TypeError(
            f"argument after ** must be a mapping, not {type(result[1]).__name__} ({where} returned "
            "(new_args, new_kwargs): the forward is called with **new_kwargs, so new_kwargs must be a dict)"
        )


def _nothing(result: Any, original: Any, name: str, where: str, slots: Slots = None) -> None:
    """A post-accumulate-grad hook: None only (it changes ``param.grad`` in place, if at all)."""
    raise RuntimeError(
        f"Tensor post accumulate grad hooks should return None. ({where} returned {_short(result)}; "
        "change param.grad in place instead)"
    )


def _slot_values(result: Any, original: tuple[Any, ...], name: str, where: str, slots: Slots) -> None:
    """The values torch passes on (those at ``slots``; every one when unknown), each checked as a node's."""
    for i in range(len(original)) if slots is None else slots:
        _value(result[i], original[i], name, where)


def _sized(result: Any, where: str) -> None:
    """torch takes ``len()`` of a module backward hook's return value: say so when it has none."""
    if not hasattr(result, "__len__"):
        raise TypeError(
            f"object of type '{type(result).__name__}' has no len() ({where} must return None or a tuple of "
            "gradients, one per value it was given)"
        )


def _value(value: Any, given: Any, name: str, where: str) -> None:
    """One gradient of a tuple: None, or a tensor like the one given (which must not be None)."""
    if value is None:
        return
    if given is None:
        raise RuntimeError(
            f"can't replace a None gradient with a non-None value ({where} returned {_short(value)} where it was "
            "given None: keep None there)"
        )
    _gradient(value, given, name, where)


def _same_tensor_type(result: torch.Tensor, original: torch.Tensor, name: str, where: str) -> None:
    if (result.dtype, result.layout, result.device.type) != (original.dtype, original.layout, original.device.type):
        raise RuntimeError(
            f"hook '{name}' has changed the type of value (was {_type(original)} got {_type(result)}) ({where} "
            f"returned a {_described(result)} tensor for a {_described(original)} gradient: return one like it)"
        )
    if result.shape != original.shape:
        raise RuntimeError(
            f"hook '{name}' has changed the size of value ({where} returned shape {list(result.shape)} for a "
            f"gradient of shape {list(original.shape)}: return None, or a tensor of the gradient's shape)"
        )


def _type(t: torch.Tensor) -> str:
    """torch's name for a tensor's type in its messages, e.g. ``torch.FloatTensor``."""
    try:
        return t.type()
    except Exception:  # a dtype or device without a legacy type name
        return f"{t.dtype} on {t.device.type}"


def _described(t: torch.Tensor) -> str:
    layout = "" if t.layout == torch.strided else f" {t.layout}"
    return f"{str(t.dtype).removeprefix('torch.')}{layout} {t.device.type}"


def _short(value: Any) -> str:
    """A short repr (a tensor by its shape and dtype): an error message must not print a whole tensor."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)} ({str(value.dtype).removeprefix('torch.')})"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_short(v) if isinstance(v, torch.Tensor) else reprlib.repr(v) for v in value[:4])
        more = ", …" if len(value) > 4 else ""
        return f"a {type(value).__name__} ({inner}{more})"
    return reprlib.repr(value)


RULES: dict[str, Callable[..., None]] = {
    "grad": _gradient,
    "global_grad": _gradient,
    "param_grad": _gradient,
    "node": _node_values,
    "node_pre": _node_values,
    "legacy_backward": _node_values,
    "backward": _grad_input,
    "global_backward": _grad_input,
    "backward_pre": _grad_output,
    "global_backward_pre": _grad_output,
    "forward_pre_with_kwargs": _forward_pre_with_kwargs,
    "post_accumulate": _nothing,
}
"""By the hook's kind (the engine's name): forward hooks and forward pre-hooks without kwargs may return anything."""
