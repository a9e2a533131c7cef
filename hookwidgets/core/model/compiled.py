"""Models that run through ``torch.compile``: recognised, so the explorer's hooks and runs stay out of the compiler."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn

from .._torch import compiled_in_place, eager_stance, is_compile_wrapper
from .modules import modules_of


def is_compiled(model: nn.Module) -> bool:
    """Whether ``model`` is, or holds, a ``torch.compile`` wrapper (OptimizedModule) or a module compiled in
    place (``module.compile()``)."""
    return any(is_compile_wrapper(m) or compiled_in_place(m) for m in modules_of(model))


@contextlib.contextmanager
def run_eagerly(model: nn.Module) -> Iterator[None]:
    """Inside the body a compiled ``model`` runs its Python code: no compiled code is made or reused for it.

    For the explorer's own runs (probe, checks, diagnostics): they run with other grad modes, train/eval
    modes and temporary hooks than the user's calls, so compiling them would cost a compilation each and
    leave graphs (with graph breaks at those hooks) that the user's next calls could pick up. torch's
    stance is process-wide: while the body runs, other compiled code of the process runs eagerly too. A torch
    without ``set_stance`` runs the body as it is (``_torch.COMPILER_STANCE_OFF`` says so).
    """
    if not is_compiled(model):
        yield
        return
    with eager_stance():
        yield
