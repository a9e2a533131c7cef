"""Where a failed run failed: the model's module whose code raised, read from the exception's traceback."""

from __future__ import annotations

import traceback

from torch import nn

from ..core.display import display_name, quoted


def failing_module(exc: BaseException, model: nn.Module) -> str | None:
    """The path of the innermost module of ``model`` whose method was running when ``exc`` was raised; None when
    no frame of the traceback belongs to one (the error came before the model ran, or after)."""
    paths = {id(module): path for path, module in model.named_modules()}
    found = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        owner = frame.f_locals.get("self")  # a module's forward, or torch's call machinery around it
        path = paths.get(id(owner)) if isinstance(owner, nn.Module) else None
        if path is not None:
            found = path
    return found


def failure_line(path: str, model: nn.Module) -> str:
    """The line that names the failing module first in the errors panel."""
    cls = display_name(type(model.get_submodule(path)).__name__)
    return f"failed in module {quoted(path)} ({cls})" if path else f"failed in the model's own forward ({cls})"
