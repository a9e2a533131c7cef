"""HookExplorer: the headless Explorer plus its notebook view, kept in sync through messages."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

from ..core.capture import DEFAULT_MEMORY_BUDGET
from ..core.explorer import Explorer, explain_run_error
from ..core.hooks import HookInfo
from ..core.inputs import Inputs, Target
from ..core.kinds import WIDGET_KINDS
from .captures import plot_items
from .view import ExplorerView


class HookExplorer(Explorer):
    """Explore a model's hooks in a notebook: ``ex = HookExplorer(model, example_inputs=x); ex``.

    Everything the view does is also a method here (attach, detach, run, captures, close).
    """

    def __init__(
        self,
        model: nn.Module,
        example_inputs: Inputs | None = None,
        *,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        offload: str | None = None,
        on_error: str = "record",
    ) -> None:
        super().__init__(model, example_inputs, memory_budget=memory_budget, offload=offload, on_error=on_error)
        self._view: ExplorerView | None = None

    @property
    def view(self) -> ExplorerView:
        """The widget showing this explorer (created on first use)."""
        if self._view is None:
            view = ExplorerView(
                tree=self.tree,
                hook_kinds=list(WIDGET_KINDS),
                error=self.probe_error or "",
            )
            # The view is kept alive by the widget registry; it must not keep the explorer alive.
            on_msg = weakref.WeakMethod(self._on_message)
            view.on_msg(lambda widget, content, buffers: (m := on_msg()) and m(content))
            selected = weakref.WeakMethod(self._on_selected)
            view.observe(lambda change: (m := selected()) and m(change), names="selected")
            weakref.finalize(self, view.close)
            self._view = view
            self._sync()
        return self._view

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = self.view._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict):
            bundle["text/plain"] = repr(self)  # what a console without widgets shows
        return bundle

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
        info = super().attach(target, kind, action, edit=edit, copy=copy, with_kwargs=with_kwargs)
        self._sync()
        return info

    def detach(self, target: str | None = None, kind: str | None = None) -> list[HookInfo]:
        removed = super().detach(target, kind)
        self._sync()
        return removed

    def run(self, inputs: Inputs | None = None, target: Target = None) -> Any:
        try:
            return super().run(inputs, target)
        finally:
            self._sync()

    def close(self) -> None:
        super().close()
        if self._view is not None:
            self._view.close()

    # View side: messages from the browser, and pushing state back.
    def _on_message(self, content: dict[str, Any]) -> None:
        view = self.view
        kind = content.get("kind") if isinstance(content, dict) else None
        try:
            if kind == "attach":
                self.attach(content["target"], content["hook"])
            elif kind == "detach":
                self.detach(content["target"], content["hook"])
            elif kind == "run":
                self._run_from_view()
            elif kind == "dismiss_error":
                view.error = ""
                if view.status.get("state") == "error":
                    view.status = {"state": "idle", "message": ""}
            else:
                raise ValueError(f"the widget sent an unknown message kind {kind!r}")
        except Exception as exc:  # shown in the widget; the kernel stays usable
            view.error = f"{type(exc).__name__}: {exc}"
            view.status = {"state": "error", "message": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
            self._sync()

    def _run_from_view(self) -> None:
        view = self.view
        if self.example_inputs is None:
            raise ValueError("Run needs example inputs: create the explorer with HookExplorer(model, example_inputs=x)")
        view.status = {"state": "busy", "message": "running forward and backward…"}
        explained = len(self.diagnostics)
        try:
            output = Explorer.run(self, self.example_inputs, target="top")
        except Exception as exc:
            new = self.diagnostics[explained:]  # what the engine understood about this failure comes first
            view.error = "\n\n".join([*new, explain_run_error(exc, self.example_inputs)])
            view.status = {"state": "error", "message": f"run failed: {type(exc).__name__}"}
            self._sync()
            return
        top = output.argmax(dim=1).tolist() if hasattr(output, "argmax") and output.dim() == 2 else None
        message = (
            f"step {self.step}: forward and backward from the top class {top}" if top else f"step {self.step} done"
        )
        view.error = ""
        view.status = {"state": "idle", "message": message}
        self._sync()

    def _on_selected(self, change: dict[str, Any]) -> None:
        self._sync_plots()

    def _sync(self) -> None:
        if self._view is None:
            return
        self._view.hooks = [info.as_dict() for info in self.hooks if not info.foreign]
        self._sync_plots()

    def _sync_plots(self) -> None:
        view = self._view
        if view is None:
            return
        try:
            view.plots = {"target": view.selected, "items": plot_items(self.captures, view.selected)}
        except Exception as exc:
            view.error = f"could not draw the captures of {view.selected!r}: {type(exc).__name__}: {exc}"
