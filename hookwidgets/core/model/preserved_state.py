"""Snapshot and restore what a run can change: ``.grad``, buffers, RNG state, train/eval mode."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Literal

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from ..._warnings import FixedModeWarning
from .._torch import copy_each
from ..display import display_name
from .modules import modules_of


@contextlib.contextmanager
def preserved_state(
    model: nn.Module, *, mode: Literal["eval", "train"] | None = "eval", rng: bool = True
) -> Iterator[None]:
    """Run the body in ``mode`` (None: the modes as found) and put the model's observable state back.

    Parameters keep their ``.grad`` objects, buffers their objects and values (BatchNorm running
    statistics; also a buffer the forward replaced, ``self.n = self.n + 1``), the CPU and CUDA random
    generators their state (unless ``rng=False``), and every module its ``training`` flag, also when
    the body raises. A module that refuses ``train()`` (torch.export's module) runs as it is; a FixedModeWarning
    says so when ``mode`` is "train".
    """
    modules = modules_of(model)  # one walk for modes, parameters and buffers: the explorer's every run pays it
    modes = [m.training for m in modules]
    params = [p for m in modules for p in m._parameters.values() if p is not None]
    grads = [p.grad for p in params]
    slots = [(m, dict(m._buffers)) for m in modules if m._buffers]  # which tensor each name holds
    buffers = _buffers(slots)
    with torch.no_grad():
        # every value is copied: a buffer's version counter would miss BatchNorm's running statistics (updated
        # in its kernel) and writes through .data or numpy(), which do not move it
        saved = [b.clone() for b in buffers]
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]  # unannotated in torch
    for param, grad in zip(params, grads, strict=True):
        if grad is not None:
            param.grad = None  # parked: a backward in the body would otherwise accumulate into it in place
    try:
        if mode is not None:
            training = mode == "train"
            # a model already in that mode is not walked again; but a training run asks even so, as a module that
            # refuses train() may have been built for eval whatever its flags say
            if training or any(flag is not training for flag in modes):
                refused: list[nn.Module] = []
                _train(model, training, refused)
                if refused and training:
                    _say_refused(refused)
        yield
    finally:
        for module, entries in slots:
            now = module._buffers
            if len(now) != len(entries) or any(now.get(name) is not buf for name, buf in entries.items()):
                now.clear()  # a buffer replaced, added or removed: the objects it held before, in their order
                now.update(entries)
        with torch.no_grad():
            for buf, old in zip(buffers, saved, strict=True):
                if buf.shape != old.shape:  # resized in place: its old size first, then its values
                    buf.resize_(old.shape)
            copy_each(buffers, saved)
        for param, grad in zip(params, grads, strict=True):
            if param.grad is not grad:
                param.grad = grad
        for module, training in zip(modules, modes, strict=True):
            if getattr(module, "training", None) is not training:  # nn.Module's setattr is slow: only what changed
                module.training = training
        if rng:
            torch.set_rng_state(cpu_rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)


def _say_refused(refused: list[nn.Module]) -> None:
    names = ", ".join(sorted({display_name(type(m).__name__) for m in refused}))
    warnings.warn(
        f"{names} refuses train(), so this run used the mode its forward was built in, which need not be training "
        "mode: a torch.export program fixes how its ops (Dropout, BatchNorm) behave when it is exported; export the "
        "model in training mode for a training run, or explore it before export",
        FixedModeWarning,
        stacklevel=5,
    )


def _train(module: nn.Module, training: bool, refused: list[nn.Module]) -> None:
    """``module.train(training)``; a module that refuses it (NotImplementedError, as torch.export's module raises) keeps
    its modes and goes to ``refused``, and the modules around it still switch."""
    try:
        module.train(training)
    except NotImplementedError:
        if "train" in vars(module) or type(module).train is not nn.Module.train:  # its own train() refused
            refused.append(module)
            return
        module.training = training  # a submodule refused: the others still switch
        for child in module.children():
            _train(child, training, refused)


def _buffers(slots: list[tuple[nn.Module, dict[str, torch.Tensor | None]]]) -> list[torch.Tensor]:
    """Each buffer once, as ``model.buffers()`` gives them; a lazy module's buffer that is not materialized has no
    values yet (the body may give it its first ones)."""
    seen: set[int] = set()
    found = []
    for _, entries in slots:
        for buf in entries.values():
            if buf is not None and id(buf) not in seen and not is_lazy(buf):
                seen.add(id(buf))
                found.append(buf)
    return found
