"""A stand-in for a full backward pre-hook on a module whose output is a dict or a dataclass."""

import dataclasses

from .header import _named

# --- generated code ---


def _on_dict_output(hook, as_tuple=False):
    """A forward hook standing in for the full backward pre-hook `hook`, which torch never fires on a dict or
    dataclass output: a tensor hook on each output tensor calls hook(module, grad_output) with its gradient
    alone, as {key: grad} (recorded as grad_output.<key>) or, for a hook of yours, as torch's (grad,)."""

    def one_grad(module, key, grad):
        result = hook(module, (grad,) if as_tuple else {key: grad})
        if isinstance(result, dict):
            return next(iter(result.values()))
        return result[0] if isinstance(result, (tuple, list)) else result  # None leaves the gradient as is

    def arm(module, args, output):
        if isinstance(output, dict) or (dataclasses.is_dataclass(output) and not isinstance(output, type)):
            for name, tensor in _named("grad_output", output).items():
                if tensor.requires_grad:
                    key = name.removeprefix("grad_output.")
                    tensor.register_hook(lambda grad, key=key: one_grad(module, key, grad))

    return arm
