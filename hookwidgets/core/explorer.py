"""The headless explorer: tree, hooks, runs and captures of one model, with no display code."""

from __future__ import annotations

import traceback
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from .capture import DEFAULT_MEMORY_BUDGET, CaptureStore
from .diagnose import first_nonfinite, summary_rows
from .hooks import HookInfo, HookRegistry, TimelineEvent
from .inputs import Inputs, Target, backward_score, call_model, describe_inputs
from .kinds import resolve_kind
from .modelstate import preserved_state
from .targets import resolve_target
from .tree import ProbeResult, build_tree, probe


class Explorer:
    """Hooks on a model, what they captured, and runs that leave the model as found.

    Use as a context manager or call ``close()``; a finalizer removes the hooks if the explorer is
    dropped unclosed.
    """

    def __init__(
        self,
        model: nn.Module,
        example_inputs: Inputs | None = None,
        *,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        on_error: str = "record",
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"HookExplorer needs a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.example_inputs = example_inputs
        self.captures = CaptureStore(memory_budget)
        self._registry = HookRegistry(model, self.captures, on_error=on_error)
        self._finalizer = weakref.finalize(self, self._registry.close)
        self.probe_error: str | None = None
        self.tree = build_tree(model, self._probe())

    def _probe(self) -> ProbeResult | None:
        if self.example_inputs is None:
            return None
        try:
            return probe(self.model, self.example_inputs)
        except Exception as exc:
            self.probe_error = explain_run_error(exc, self.example_inputs)
            warnings.warn(
                f"the probe run with example_inputs failed, so no output shapes are shown: {exc}", stacklevel=3
            )
            return None

    @property
    def hooks(self) -> list[HookInfo]:
        """The explorer's live hooks in attach order."""
        return self._registry.hooks

    @property
    def step(self) -> int:
        """How many root forwards the hooks have seen."""
        return self._registry.step

    def attach(
        self,
        target: str,
        kind: str | Sequence[str] = "forward",
        action: str | Callable = "capture",
        *,
        edit: Any = None,
        copy: bool = False,
        with_kwargs: bool = False,
    ) -> HookInfo | list[HookInfo]:
        """Attach hook(s) of ``kind`` on a module path or parameter name; re-attaching replaces.

        ``action`` is ``capture``, ``stats``, ``print`` or a callable with torch's signature for the
        kind; ``edit`` (e.g. ``("scale", 2.0)``) changes the value before the action sees it.
        """
        family, obj = resolve_target(self.model, target)
        kinds = [kind] if isinstance(kind, str) else list(kind)
        specs = [resolve_kind(k, target, family) for k in kinds]  # all validated before any is attached
        infos = [
            self._registry.attach(target, obj, spec, k, action, edit, copy, with_kwargs)
            for k, spec in zip(kinds, specs, strict=True)
        ]
        return infos[0] if isinstance(kind, str) else infos

    @property
    def timeline(self) -> list[TimelineEvent]:
        """Every hook firing in order (step, phase, target, kind, call); the newest 10,000 are kept."""
        return list(self._registry.timeline)

    def detach(self, target: str | None = None, kind: str | None = None) -> list[HookInfo]:
        """Remove one hook, all hooks of a target, or (no arguments) every hook."""
        if target is not None:
            resolve_target(self.model, target)
        return self._registry.detach(target, kind)

    def run(self, inputs: Inputs | None = None, target: Target = None) -> Any:
        """Forward ``inputs`` (default: the example inputs); with ``target``, backward from that score.

        The run leaves parameters' ``.grad``, buffers, RNG state and train/eval mode as found.
        """
        inputs = self._inputs(inputs)
        with preserved_state(self.model), torch.enable_grad():
            output = call_model(self.model, inputs)
            if target is not None:
                backward_score(output, target).backward()
        return _detached(output)

    def first_nonfinite(self, inputs: Inputs | None = None) -> str | None:
        """The first module, in the order forwards finish, whose output held NaN or Inf (None if none)."""
        return first_nonfinite(self.model, self._inputs(inputs))

    def summary(self) -> list[dict[str, Any]]:
        """Per-layer, per-step rows of activation and gradient statistics from ``stats`` hooks.

        ``ex.attach("", ["global_forward", "global_backward"], action="stats")`` fills it for every module.
        """
        return summary_rows(self.captures)

    def __repr__(self) -> str:
        modules = sum(1 for _ in self.model.modules())
        name, model = type(self).__name__, type(self.model).__name__
        return f"<{name} of {model}: {modules} modules, {len(self.hooks)} hooks, step {self.step}>"

    def _inputs(self, inputs: Inputs | None) -> Inputs:
        if inputs is not None:
            return inputs
        if self.example_inputs is None:
            raise ValueError("this needs inputs: pass them, or give HookExplorer example_inputs=")
        return self.example_inputs

    def close(self) -> None:
        """Remove every hook the explorer added; the model's hook dicts are as before."""
        self._finalizer()

    def __enter__(self) -> Explorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _detached(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return (
            type(value)(_detached(v) for v in value)
            if not hasattr(value, "_fields")
            else type(value)(*map(_detached, value))
        )
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value


def explain_run_error(exc: BaseException, inputs: Inputs) -> str:
    """The error of a failed run as text, with the inputs' shapes so a wrong shape is obvious."""
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return f"{type(exc).__name__}: {exc}\n(inputs were {describe_inputs(inputs)})\n\n{trace}"
