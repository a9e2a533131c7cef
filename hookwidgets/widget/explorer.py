"""HookExplorer: the headless Explorer plus its notebook view, kept in sync through messages."""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..core.capture.store import DEFAULT_MEMORY_BUDGET
from ..core.diagnostics.notes import SCRIPTED_ROOT, unwatched_note
from ..core.display import display_name, quoted
from ..core.explorer import Explorer, explain_run_error
from ..core.hooks.optim import UpdateRatioMonitor
from ..core.hooks.registry import HookInfo
from ..core.model.inputs import Inputs, Target
from ..core.model.lazy import materialize_notices
from ..core.model.tree import ProbeResult
from .attribution_panel import EMPTY as EMPTY_ATTRIBUTION
from .attribution_panel import attribution_payload
from .captures import plot_items
from .graph_panel import record_from_view, sync_graph
from .live import LiveUpdates, top_classes
from .state import ALL_KINDS, class_choice, hooks_payload, memory_payload, parse_edit, selection_payload
from .summary_panel import summary_payload
from .training_panel import DDPSource, ddp_source, training_payload, training_version
from .view import ExplorerView

if TYPE_CHECKING:
    from ..distributed import DDPInspector


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
        self._probe_top: list[list[float]] = []  # filled by _probe, which the base class calls
        super().__init__(model, example_inputs, memory_budget=memory_budget, offload=offload, on_error=on_error)
        self._view: ExplorerView | None = None
        self._plot_steps: dict[str, tuple[int, int | None]] = {}  # kind -> (step, call) the inspector's slider shows
        self._plot_views: dict[str, str] = {}  # kind -> maps or histogram
        self._plot_cost = 0.1  # seconds the last drawing of the selection's images took (live updates budget it)
        self._summary_choice: dict[str, Any] = {"field": "grad_norm", "step": None, "first_nonfinite": None}
        self._live: LiveUpdates | None = None
        self._ddp_shown: DDPSource | None = None  # what the Training panel shows of DDP (show_ddp, watch_ddp)
        self._training_version: tuple[Any, ...] | None = None  # the panel is redrawn only when this changes

    def _probe(self) -> ProbeResult | None:
        """The base class's probe run, also noting the top classes of its output for the run bar's target picker."""
        if self.example_inputs is None or isinstance(self.model, torch.jit.ScriptModule):
            return super()._probe()  # a scripted model takes no hooks, so no top classes: the view names it
        top: list[list[float]] = []

        def note_top(module: nn.Module, args: Any, output: Any) -> None:
            if not top:  # the root's first call is the model's output
                top.extend(top_classes(output))

        handle = self.model.register_forward_hook(note_top)
        try:
            return super()._probe()
        finally:
            handle.remove()
            self._probe_top = top

    @property
    def view(self) -> ExplorerView:
        """The widget showing this explorer (created on first use)."""
        if self._view is None:
            notes = [self.probe_error, unwatched_note(self.unwatched)]
            view = ExplorerView(tree=self.tree, hook_kinds=ALL_KINDS, error="\n\n".join(n for n in notes if n))
            view.status = {"state": "idle", "message": "", "top": self._probe_top}  # Run can pick a class at once
            # The view is kept alive by the widget registry; it must not keep the explorer alive.
            on_msg = weakref.WeakMethod(self._on_message)
            view.on_msg(lambda widget, content, buffers: (m := on_msg()) and m(content))
            selected = weakref.WeakMethod(self._on_selected)
            view.observe(lambda change: (m := selected()) and m(change), names="selected")
            weakref.finalize(self, view.close)
            self._view = view
            self._live = LiveUpdates(self, self._registry)
            self._sync()
            self._sync_summary()
            self._sync_training(follow=True)
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
        self._sync(plots=False)  # captures are unchanged: the images need no redraw
        return info

    def detach(self, target: str | None = None, kind: str | None = None) -> list[HookInfo]:
        removed = super().detach(target, kind)
        self._sync(plots=False)
        return removed

    def run(
        self, inputs: Inputs | None = None, target: Target = None, *, record_graph: bool = False, train: bool = False
    ) -> Any:
        try:
            return super().run(inputs, target, record_graph=record_graph, train=train)
        finally:
            self._sync()
            self._sync_summary()  # only runs add statistics: the heatmap is redrawn after them, not on clicks
            self._sync_training()  # a run of a DDP model adds bucket records

    def graph(self, inputs: Inputs | None = None, *, saved_tensors: bool = True) -> dict[str, Any]:
        data = super().graph(inputs, saved_tensors=saved_tensors)
        if self._view is not None:
            sync_graph(self._view, data)
        return data

    def watch_optimizer(
        self, optimizer: torch.optim.Optimizer | None = None, *, scope: str = "local", every: int = 1
    ) -> UpdateRatioMonitor:
        monitor = super().watch_optimizer(optimizer, scope=scope, every=every)
        self._sync_training(follow=True)
        return monitor

    def watch_ddp(self, hook: Callable | None = None, log_dir: str | os.PathLike | None = None, **options: Any) -> Any:
        inspector = super().watch_ddp(hook, log_dir, **options)
        self.show_ddp(inspector)
        return inspector

    def show_ddp(self, source: DDPInspector | list[dict[str, Any]] | str | os.PathLike) -> None:
        """Show DDP records in the widget's Training panel, in place of what it showed of DDP before.

        ``source``: a ``DDPInspector`` (followed live), its records (``DDPInspector.load(log_dir, records=None)``,
        ``insp.gather()``), or the ``log_dir`` the ranks wrote to (read with ``DDPInspector.load``).
        """
        self.model  # noqa: B018 -- a closed explorer says so, as every method does
        self._ddp_shown = ddp_source(source)
        self._sync_training(follow=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.close()
        super().close()
        if self._view is not None:
            self._view.close()

    # View side: messages from the browser, and pushing state back.
    def _on_message(self, content: dict[str, Any]) -> None:
        kind = content.get("kind") if isinstance(content, dict) else None
        handler = _HANDLERS.get(kind)
        view = self.view
        if view.status.get("state") == "error" and kind != "dismiss_error":
            # The status says how the latest action went; the errors panel keeps the text until dismissed.
            view.status = {**view.status, "state": "idle", "message": ""}
        try:
            if handler is None:
                raise ValueError(f"the widget sent an unknown message kind {kind!r}")
            handler(self, content)
        except Exception as exc:  # shown in the widget; the kernel stays usable
            self._show_error(f"{type(exc).__name__}: {_message(exc)}", str(exc))

    def _show_error(self, text: str, summary: str) -> None:
        view = self.view
        view.error = text
        view.status = {"state": "error", "message": summary.splitlines()[0].strip("'\"") if summary else text}
        self._sync()

    def _msg_attach(self, content: dict[str, Any]) -> None:
        action = content.get("action") or "capture"
        self.attach(content["target"], content["hook"], action, edit=parse_edit(content.get("edit")))

    def _msg_detach(self, content: dict[str, Any]) -> None:
        self.detach(content["target"], content["hook"])

    def _msg_dismiss_error(self, content: dict[str, Any]) -> None:
        view = self.view
        view.error = ""
        if view.status.get("state") == "error":
            view.status = {**view.status, "state": "idle", "message": ""}

    def _msg_plot_step(self, content: dict[str, Any]) -> None:
        step, call = content.get("step"), content.get("call")
        if step is None:
            self._plot_steps.pop(content["hook"], None)
        else:
            self._plot_steps[content["hook"]] = (int(step), None if call is None else int(call))
        self._sync_plots()

    def _msg_plot_view(self, content: dict[str, Any]) -> None:
        self._plot_views[content["hook"]] = str(content.get("view") or "maps")
        self._sync_plots()

    def _msg_summary(self, content: dict[str, Any]) -> None:
        """Refresh the summary; ``field`` picks the heatmap's statistic and ``step`` the table's step."""
        for key in ("field", "step"):
            if key in content:
                self._summary_choice[key] = content[key]
        self._sync_summary()

    def _msg_find_nonfinite(self, content: dict[str, Any]) -> None:
        """Run the example inputs once and name the first module whose output holds NaN or Inf."""
        found = self.first_nonfinite()
        self._summary_choice["first_nonfinite"] = found
        name = display_name(found or "(model)")  # the root's path is "", named as the tree and the plots name it
        message = f"first NaN/Inf output: {name}" if found is not None else "no module output held NaN or Inf"
        self.view.status = {**self.view.status, "state": "idle", "message": message}
        self._sync_summary()

    def _msg_attribute(self, content: dict[str, Any]) -> None:
        """ "Attribution here": the chosen method's map at the selected layer, or the error, in the panel."""
        view = self.view
        layer, method, target = content.get("layer"), content.get("method", "gradcam"), content.get("target", "top")
        view.status = {**view.status, "state": "busy", "message": f"computing {method}…"}
        explained = len(self.diagnostics)
        try:
            view.attribution = attribution_payload(self, layer, method, target)
        except Exception as exc:
            view.attribution = {**EMPTY_ATTRIBUTION, "layer": layer, "method": method, "error": _message(exc)}
        caption = view.attribution.get("caption") or f"{method} failed: see the attribution panel"
        view.status = {**view.status, "state": "idle", "message": caption}
        if len(self.diagnostics) != explained:  # a hook of ours was detached (in-place collision): badges follow
            self._sync(plots=False)

    def _msg_run(self, content: dict[str, Any]) -> None:
        """Forward the example inputs; with mode "backward" (the default), backward from the chosen class."""
        view = self.view
        if self.example_inputs is None:
            raise ValueError("Run needs example inputs: create the explorer with HookExplorer(model, example_inputs=x)")
        backward = content.get("mode", "backward") != "forward"
        target = _run_target(content.get("target")) if backward else None
        train = _run_train(content.get("train"))
        what = ("forward and backward" if backward else "forward") + (" in training mode" if train else "")
        view.status = {**view.status, "state": "busy", "message": f"running {what}…"}
        explained, notices = len(self.diagnostics), []
        try:
            with (
                self._live.paused() if self._live is not None else contextlib.nullcontext(),
                materialize_notices(self.model, notices),
            ):
                output = Explorer.run(self, None, target=target, train=train)  # a copy of the example inputs
        except Exception as exc:
            new = self.diagnostics[explained:]  # what the engine understood about this failure comes first
            view.error = "\n\n".join([*notices, *new, explain_run_error(exc, self.example_inputs)])
            view.status = {"state": "error", "message": f"run failed: {type(exc).__name__}"}
            self._sync()
            return
        top = top_classes(output)
        mode = " in training mode" if train else ""
        if not backward:
            message = f"step {self.step}: forward{mode}"
        elif target == "top":
            message = f"step {self.step}: forward{mode}, then backward from each item's top class"
        else:
            message = f"step {self.step}: forward{mode}, then backward from class {target}"
        view.error = "\n\n".join(notices)  # the model changed for good: said where it is seen, not in a log
        view.status = {"state": "idle", "message": message, "top": top}
        self._sync()
        self._sync_summary()
        self._sync_training()

    def _on_selected(self, change: dict[str, Any]) -> None:
        self._plot_steps.clear()  # a new selection starts at its newest captures
        self._sync()

    def _sync_summary(self) -> None:
        if self._view is not None and self._model is not None:
            self._view.summary = summary_payload(self, **self._summary_choice)

    def _sync_training(self, follow: bool = False) -> bool:
        """Redraw the Training panel if what it shows changed; returns whether it drew.

        With ``follow``, live updates also follow optimizer steps (a loop may have no module hook to signal it).
        """
        view = self._view
        if view is None or self._model is None:
            return False
        monitors = [monitor for _, monitor in self._monitors]
        live_ddp = self._ddp_shown is not None and self._ddp_shown.inspector is not None
        if follow and self._live is not None and (monitors or live_ddp):
            self._live.follow_optimizers()
        version = training_version(monitors, self._ddp_shown)
        if version == self._training_version:
            return False
        try:
            view.training = training_payload(monitors, self._ddp_shown, _ddp_prefix(self._model))
        except Exception as exc:  # shown in the widget; the user's loop goes on
            view.error = f"could not draw the Training panel: {type(exc).__name__}: {exc}"
        self._training_version = version
        return True

    def _sync(self, plots: bool = True) -> None:
        """Push hooks, selection, memory, diagnostics and a new graph; the images too unless ``plots`` is False."""
        view = self._view
        if view is None or self._model is None:
            return
        view.hooks = hooks_payload(self.hooks)  # first: the badge a click waits for leaves before the rest
        view.tree = self.tree  # new parameter counts once a forward materialized lazy modules
        view.selection = self._selection(view.selected)
        view.memory = memory_payload(self)
        view.diagnostics = self.diagnostics
        sync_graph(view, self._graph.data)  # a run with record_graph=True recorded a new one
        if plots:
            self._sync_plots()

    def _selection(self, target: str) -> dict[str, Any]:
        """The ``selection`` payload; on a scripted model no kinds, since torch refuses even get_submodule there."""
        if isinstance(self.model, torch.jit.ScriptModule):
            return {
                "target": target,
                "family": "none",
                "kinds": [],
                "details": [],
                "params": [],
                "problem": SCRIPTED_ROOT,
            }
        return selection_payload(self, target)

    def _sync_plots(self) -> None:
        view = self._view
        if view is None:
            return
        try:
            started = time.monotonic()
            items = plot_items(self.captures, view.selected, self._plot_steps, self._plot_views)
            if items:
                self._plot_cost = time.monotonic() - started
            view.plots = {"target": view.selected, "items": items}
        except Exception as exc:
            view.error = f"could not draw the captures of {quoted(view.selected)}: {type(exc).__name__}: {exc}"


def _message(exc: BaseException) -> str:
    """An exception's message without the quotes KeyError adds."""
    return exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)


def _run_train(value: Any) -> bool:
    """Whether a Run message asks for training mode: true, false or missing (eval, the default)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    raise ValueError(f"Run's train must be true or false, got {value!r}")


def _run_target(value: Any) -> str | int:
    """The class a Run message backpropagates from: "top" or an integer class index (see ``class_choice``)."""
    chosen = class_choice(value, "run target")
    return "top" if chosen is None else chosen


_HANDLERS: dict[str | None, Callable[[HookExplorer, dict[str, Any]], None]] = {
    "attach": HookExplorer._msg_attach,
    "detach": HookExplorer._msg_detach,
    "run": HookExplorer._msg_run,
    "plot_step": HookExplorer._msg_plot_step,
    "plot_view": HookExplorer._msg_plot_view,
    "summary": HookExplorer._msg_summary,
    "find_nonfinite": HookExplorer._msg_find_nonfinite,
    "attribute": HookExplorer._msg_attribute,
    "dismiss_error": HookExplorer._msg_dismiss_error,
    "graph": record_from_view,
}
"""Messages the browser sends (docs/widget-protocol.md), by their ``kind``."""


def _ddp_prefix(model: torch.nn.Module) -> str:
    """``"module."`` when the explored model is the DDP wrapper: DDP records name ``ddp.module``'s
    parameters, and the tree and ratio table name the wrapper's (``module.0.weight``)."""
    from torch.nn.parallel import DistributedDataParallel  # the class only: no process group is touched

    return "module." if isinstance(model, DistributedDataParallel) else ""
