"""A stand-in for a full backward pre-hook on a module whose output is a dict or a dataclass."""

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .header import _named

# The hook stood in for: torch's full backward pre-hook hook(module, grad_output), or one given {key: grad};
# it returns the new gradients, as it was given them, or None.
PreHook = Callable[[nn.Module, Any], tuple[torch.Tensor | None, ...] | dict[str, torch.Tensor] | None]

# --- generated code ---


def _on_dict_output(hook: PreHook, as_tuple: bool = False) -> Callable[[nn.Module, Any, Any], None]:
    """A forward hook standing in for the full backward pre-hook `hook`, which torch never fires on a dict or
    dataclass output: a tensor hook on each output tensor calls hook(module, grad_output) with its gradient
    alone, as {key: grad} (recorded as grad_output.<key>) or, for a hook of yours, as torch's (grad,)."""

    def one_grad(module: nn.Module, key: str, grad: torch.Tensor) -> torch.Tensor | None:
        result = hook(module, (grad,) if as_tuple else {key: grad})
        if isinstance(result, dict):
            return next(iter(result.values()))
        return result[0] if isinstance(result, (tuple, list)) else result  # None leaves the gradient as is

    def arm(module: nn.Module, args: Any, output: Any) -> None:
        if isinstance(output, dict) or (dataclasses.is_dataclass(output) and not isinstance(output, type)):
            for name, tensor in _named("grad_output", output).items():
                if tensor.requires_grad:
                    key = name.removeprefix("grad_output.")
                    tensor.register_hook(lambda grad, key=key: one_grad(module, key, grad))  # type: ignore[no-untyped-call]  # torch: unannotated

    return arm
