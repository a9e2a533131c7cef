"""Snapshot and restore what a run can change: ``.grad``, buffers, RNG state, train/eval mode."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

import torch
from torch import nn
from torch.nn.parameter import is_lazy


@contextlib.contextmanager
def preserved_state(
    model: nn.Module, *, mode: Literal["eval", "train"] | None = "eval", rng: bool = True
) -> Iterator[None]:
    """Run the body in ``mode`` (None: the modes as found) and put the model's observable state back.

    Parameters keep their ``.grad`` objects, buffers their objects and values (BatchNorm running
    statistics; also a buffer the forward replaced, ``self.n = self.n + 1``), the CPU and CUDA random
    generators their state (unless ``rng=False``), and every module its ``training`` flag, also when
    the body raises.
    """
    modes = [(m, m.training) for m in model.modules()]
    grads = [(p, p.grad) for p in model.parameters()]
    slots = [(m, dict(m._buffers)) for m in model.modules() if m._buffers]  # which tensor each name holds
    # a lazy module's buffer that is not materialized has no values yet: the body may give it its first ones
    buffers = [(b, b.detach().clone()) for b in model.buffers() if not is_lazy(b)]
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    for param, _ in grads:
        param.grad = None  # parked: a backward in the body would otherwise accumulate into it in place
    try:
        if mode is not None:
            model.train(mode == "train")
        yield
    finally:
        for module, entries in slots:
            now = module._buffers
            if len(now) != len(entries) or any(now.get(name) is not buf for name, buf in entries.items()):
                now.clear()  # a buffer replaced, added or removed: the objects it held before, in their order
                now.update(entries)
        with torch.no_grad():
            for buf, saved in buffers:
                if buf.shape != saved.shape:  # resized in place: its old size first, then its values
                    buf.resize_(saved.shape)
                buf.copy_(saved)
        for param, grad in grads:
            param.grad = grad
        for module, training in modes:
            module.training = training
        if rng:
            torch.set_rng_state(cpu_rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
