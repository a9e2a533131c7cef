"""Snapshot and restore what a run can change: ``.grad``, buffers, RNG state, train/eval mode."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def preserved_state(model: nn.Module, *, eval_mode: bool = True) -> Iterator[None]:
    """Run the body (in eval mode by default) and put the model's observable state back.

    Parameters keep their ``.grad`` objects, buffers their values (BatchNorm running
    statistics), the CPU and CUDA random generators their state, and every module its
    ``training`` flag, also when the body raises.
    """
    modes = [(m, m.training) for m in model.modules()]
    grads = [(p, p.grad) for p in model.parameters()]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    for param, _ in grads:
        param.grad = None  # parked: a backward in the body would otherwise accumulate into it in place
    try:
        if eval_mode:
            model.eval()
        yield
    finally:
        with torch.no_grad():
            for buf, saved in buffers:
                if buf.shape == saved.shape:
                    buf.copy_(saved)
        for param, grad in grads:
            param.grad = grad
        for module, training in modes:
            module.training = training
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
