"""What each message of the page does (docs/widget-protocol.md, shapes in ``protocol.py``), through the
explorer's public methods; each handler writes what the page chose into ``PageChoices`` and returns the error its
reply carries ("" when it did what was asked)."""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable
from typing import Any, Protocol

from ..core.attribution import method_name
from ..core.display import display_name
from ..core.explorer import Explorer
from ..core.kind_table import has
from ..core.model.inputs import explain_run_error
from ..core.model.lazy import materialize_notices
from ..core.model.scores import output_summary
from .attention_heads import AttentionHeads
from .attribution_panel import EMPTY as EMPTY_ATTRIBUTION
from .attribution_panel import AttributionImages, attribution_and_redraw
from .edit_choices import with_recorded_run
from .graph_panel import EMPTY as EMPTY_GRAPH
from .lens_panel import DEFAULT_TOP_K, lens_payload
from .message_values import parse_edit, position_choice, score_choice
from .page_choices import PageChoices
from .patching_inputs import METRIC_CHOICES, page_inputs
from .patching_panel import without_sweep
from .protocol import MESSAGES, Attribution
from .run_errors import failing_module, failure_line
from .summary_filter import LayerFilter
from .tensor_views import ATTENTION_SCALES
from .view import ExplorerView


class PageController(Protocol):
    """What the handlers need of the view they answer for (its controller): they write ``choices`` and the view's
    panels, and ask for the rest to be drawn again."""

    @property
    def choices(self) -> PageChoices: ...
    @property
    def attention_heads(self) -> AttentionHeads: ...
    @property
    def view(self) -> ExplorerView | None: ...
    def set_status(self, state: str, message: str) -> None: ...
    def sync(self, plots: bool = True) -> None: ...
    def sync_plots(self) -> float | None: ...
    def sync_summary(self) -> None: ...
    def sync_training(self, follow: bool = False) -> bool: ...
    def sync_graph(self) -> None: ...
    def drawing(self) -> contextlib.AbstractContextManager[Any]: ...
    def keep_redraw(self, panel: str, redraw: Callable[[], None] | None) -> None: ...
    def page_run(self) -> contextlib.AbstractContextManager[None]: ...
    def patch_sweep(self, sweep: Callable[[Callable[[int, int], Any]], Any], progress: Any) -> Any: ...


Handler = Callable[[PageController, Explorer, dict[str, Any]], str]


def handle(controller: PageController, explorer: Explorer, content: Any) -> str:
    """Do what the message ``content`` asks; returns the error to reply with. Raises for a message it cannot read."""
    message_type = content.get("type") if isinstance(content, dict) else None
    handler = HANDLERS.get(message_type) if isinstance(message_type, str) else None
    if handler is None:
        known = ", ".join(MESSAGES)
        raise ValueError(f"the widget sent an unknown message type {message_type!r}; the types are {known}")
    return handler(controller, explorer, content)


def _view(controller: PageController) -> ExplorerView:
    """The view the message came from: open, since only an open view sends messages (``ViewController.on_message``)."""
    view = controller.view
    if view is None:
        raise RuntimeError("the widget's view is not open: display the explorer again")
    return view


def attach(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    action, path = content.get("action") or "capture", content["path"]
    edit = with_recorded_run(explorer, path, parse_edit(content.get("edit")))
    explorer.attach(path, content["kind"], action, edit=edit)
    return ""


def reattach(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """Give the hooks at ``path`` attached from the page (its own, with a built-in action, not the global kinds "Stats
    on every layer" attaches) the picked action and edit, in place: one attach of them all, records kept."""
    path = content["path"]
    action = content.get("action") or "capture"
    old = [
        h
        for h in explorer.hooks
        if h.path == path and not h.foreign and isinstance(h.action, str) and not has(h.kind, family="global")
    ]
    if not old:
        return ""
    edit = with_recorded_run(explorer, path, parse_edit(content.get("edit")))
    try:
        explorer.attach(path, [h.kind for h in old], action, edit=edit)
    except Exception:
        for h in old:  # a refused edit leaves the hooks as they were, not detached
            explorer.attach(path, h.kind, h.action, edit=h.edit or None, copy=h.copy, with_kwargs=h.with_kwargs)
        raise
    return ""


def detach(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    explorer.detach(content["path"], content["kind"])
    return ""


def dismiss_error(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    view = _view(controller)
    view.error = ""
    controller.choices.failed_module = None  # the tree's mark goes with the error it explained
    if view.status.get("state") == "error":
        controller.set_status("idle", "")
    else:
        controller.set_status(view.status.get("state", "idle"), view.status.get("message", ""))
    return ""


def plot_step(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    step, call, steps = content.get("step"), content.get("call"), controller.choices.plot_steps
    if step is None:
        steps.pop(content["kind"], None)
    else:
        steps[content["kind"]] = (int(step), None if call is None else int(call))
    controller.sync_plots()
    return ""


def plot_view(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """Choose how one kind's capture is drawn: its ``view``, its ``element`` (of a tuple or dict output),
    ``head`` (the heads view; None: all heads) and ``scale`` (the heads view's colour scale); what the message
    leaves out stays as chosen."""
    choice = controller.choices.plot_views.setdefault(content["kind"], {})
    for key in ("view", "element"):
        if content.get(key) is not None:
            choice[key] = str(content[key])
    if "head" in content:
        head = content["head"]
        if head is not None and (isinstance(head, bool) or not isinstance(head, int)):
            raise ValueError(f"plot_view's head must be a head number or null (all heads), got {head!r}")
        choice["head"] = head
    if "scale" in content:
        scale = content["scale"]
        if scale not in ATTENTION_SCALES:
            raise ValueError(f"plot_view's scale must be one of {', '.join(ATTENTION_SCALES)}, got {scale!r}")
        choice["scale"] = scale
    controller.sync_plots()
    return ""


def summary(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """Refresh the summary; ``field`` picks the heatmap's statistic, ``step`` the table's step, and ``filter``,
    ``blocks_only`` and ``module_class`` the layers both show."""
    choices = controller.choices
    if "field" in content:
        choices.summary_field = content["field"]
    if "step" in content:
        choices.summary_step = content["step"]
    chosen = choices.summary_filter
    choices.summary_filter = LayerFilter(
        text=str(content.get("filter", chosen.text)),
        blocks_only=bool(content.get("blocks_only", chosen.blocks_only)),
        module_class=str(content.get("module_class", chosen.module_class)),
    )
    controller.sync_summary()
    return ""


def find_nonfinite(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """Run the example inputs once and name the first module whose output holds NaN or Inf."""
    found = explorer.first_nonfinite()
    controller.choices.first_nonfinite = found
    name = display_name(found or "(model)")  # the root's path is "", named as the tree and the plots name it
    message = f"first NaN/Inf output: {name}" if found is not None else "no module output held NaN or Inf"
    controller.set_status("idle", message)
    controller.sync_summary()
    return ""


def attribute(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """ "Attribution here": the chosen method's result for the selected layer, or the error, in the panel."""
    view = _view(controller)
    layer, method, target = content.get("layer"), content.get("method", "gradcam"), content.get("target", "top")
    controller.set_status("busy", f"computing {method_name(str(method))}…")
    error = ""
    try:
        if not isinstance(layer, str):
            raise ValueError(f"attribute needs the selected layer's path as its layer, got {layer!r}")
        with controller.drawing():
            payload, redraw = attribution_and_redraw(explorer, layer, method, target, content.get("position"))
        view.attribution = payload
        controller.keep_redraw("attribution", redraw and _redraw_attribution(controller, payload, redraw))
    except Exception as exc:
        error = message_text(exc)
        view.attribution = {**EMPTY_ATTRIBUTION, "layer": layer, "method": method, "error": error}
    caption = view.attribution.get("caption") or f"{method_name(str(method))} failed: see the attribution panel"
    controller.set_status("idle", caption)
    return error


def _redraw_attribution(
    controller: PageController, shown: Attribution, draw: Callable[[], AttributionImages]
) -> Callable[[], None]:
    """Redraw ``shown``'s images while the panel still shows that attribution (a new one replaces it)."""

    def redraw() -> None:
        view = controller.view
        if view is not None and view.attribution.get("caption") == shown["caption"] and view.attribution.get("png"):
            view.attribution = {**view.attribution, **draw()}

    return redraw


def lens(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """The logit lens of the example inputs into the lens panel; a failure stays in the panel until the next lens."""
    view = _view(controller)
    controller.set_status("busy", "reading the logit lens…")
    try:
        view.lens = lens_payload(explorer, content.get("top_k", DEFAULT_TOP_K))
    except Exception as exc:
        error = f"{type(exc).__name__}: {message_text(exc)}"
        view.lens = {**view.lens, "cells": [], "layers": [], "positions": [], "caption": "", "error": error}
        controller.set_status("idle", "the logit lens failed: see its panel")
        return error
    controller.set_status("idle", f"logit lens: {len(view.lens['layers'])} rows")
    return ""


def patch(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """A patch sweep of the page's clean and corrupted inputs with the chosen metric, its progress then its figure in
    the patching panel; a refused input (lengths that differ, an empty box) or a failed sweep stays in the panel."""
    view = _view(controller)
    metric = content.get("metric", METRIC_CHOICES[0])
    try:
        if metric not in METRIC_CHOICES:
            known = ", ".join(METRIC_CHOICES)
            raise ValueError(f"the widget sent the patching metric {metric!r}; expected one of {known}")
        clean, corrupted = page_inputs(explorer, content.get("clean"), content.get("corrupted"))
    except ValueError as exc:
        error = message_text(exc)
        view.patching = without_sweep(view.patching, error=error)
        controller.keep_redraw("patching", None)  # a theme change must not bring the previous sweep back
        controller.set_status("idle", "the patch sweep did not start: see the patching panel")
        return error
    view.patching = {**view.patching, "clean": content["clean"], "corrupted": content["corrupted"], "metric": metric}
    controller.set_status("busy", "patch sweep…")
    try:
        with controller.page_run():  # the engine's sweep, shown by the controller (HookExplorer's would show it twice)
            sweep = functools.partial(Explorer.patch_sweep, explorer, clean, corrupted, metric=metric)
            controller.patch_sweep(lambda progress: sweep(progress=progress), None)
    except Exception as exc:  # the controller showed it in the panel
        return f"{type(exc).__name__}: {message_text(exc)}"
    return ""


def run(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """Forward the example inputs; with mode "backward" (the default), backward from the chosen target ("top": each
    item's top class or next token at ``position``). An output with no scores runs the default forward only."""
    view = _view(controller)
    if explorer.example_inputs is None:
        raise ValueError("Run needs example inputs: create the explorer with HookExplorer(model, example_inputs=x)")
    backward = content.get("mode", "backward") != "forward"
    target = score_choice(content.get("target"), "run target") if backward else None
    position = position_choice(content.get("position")) if backward else None
    train = _run_train(content.get("train"))
    skipped = ""
    choices = controller.choices
    if target == "top" and position is None and choices.output["kind"] in ("none", "scalar"):
        # the default Run on an output with no class or token scores: the loss it is, else a forward only
        target = "loss" if choices.output["loss"] else None
        backward, skipped = target is not None, "" if target else FORWARD_ONLY
    what = ("forward and backward" if backward else "forward") + (" in training mode" if train else "")
    controller.set_status("busy", f"running {what}…")
    explained = len(explorer.diagnostics)
    notices: list[str] = []
    try:
        with controller.page_run(), materialize_notices(explorer.model, notices):
            output = explorer.run(None, target=target, position=position, train=train)  # a copy of the example inputs
            controller.attention_heads.forget()  # the heads are drawn anew, with what the model computes now
    except Exception as exc:
        new = explorer.diagnostics[explained:]  # what the engine understood about this failure comes first
        failed = choices.failed_module = failing_module(exc, explorer.model)
        where = [failure_line(failed, explorer.model)] if failed is not None else []
        view.error = "\n\n".join([*notices, *new, *where, explain_run_error(exc, explorer.example_inputs)])
        controller.set_status("error", f"run failed: {type(exc).__name__}")
        controller.sync()
        return f"run failed: {type(exc).__name__}: {message_text(exc)}"
    choices.output = output_summary(output, explorer.model, id_names=explorer.sequences.id_names)
    choices.failed_module = None
    mode = " in training mode" if train else ""
    score = explorer.last_score
    if not backward or score is None:
        message = f"step {explorer.step}: forward{mode}{skipped}"
    else:
        message = f"step {explorer.step}: forward{mode}, then backward from {score.description}"
    view.error = "\n\n".join(notices)  # the model changed for good: said where it is seen, not in a log
    controller.set_status("idle", message)
    controller.sync()
    controller.sync_summary()
    controller.sync_training()
    return ""


def record_graph(controller: PageController, explorer: Explorer, content: dict[str, Any]) -> str:
    """Record the example inputs' graph into the graph panel; a failure goes to ``graph.error``."""
    view = _view(controller)
    if explorer.example_inputs is None:
        text = "Record graph needs example inputs: HookExplorer(model, example_inputs=x)"
        view.graph = {**EMPTY_GRAPH, "error": text, "recordable": False}
        controller.set_status("error", text)
        return text
    controller.set_status("busy", "recording the autograd graph…")
    explained = len(explorer.diagnostics)
    notices: list[str] = []
    try:
        with materialize_notices(explorer.model, notices), warnings.catch_warnings():
            # a partial graph's error, and a hook detached after an in-place collision, are shown in the page instead
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.filterwarnings("ignore", message="the full backward hook")
            data = explorer.graph(explorer.example_copy())  # recorded again, on a copy the model may change
    except Exception as exc:  # "no graph: …" and failures of the recorder: shown in the panel, kernel alive
        text = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        # the previous graph stays in ex.graph(), not on screen
        view.graph = {**EMPTY_GRAPH, "error": text, "recordable": True}
        summary_line = text.splitlines()[0] if text else "recording the graph failed"
        controller.set_status("error", summary_line)
        if notices:
            view.error = "\n\n".join(notices)
            controller.sync(plots=False)  # the tree's new parameter counts
        return summary_line
    detached = explorer.diagnostics[explained:]  # full backward hooks an in-place op broke: explained, detached
    if notices or detached:  # the model changed for good (lazy modules), or hooks left: said in the page
        view.error = "\n\n".join([*notices, *detached])
        controller.sync(plots=False)  # detached hooks' badges leave, the tree gets its new parameter counts
    controller.sync_graph()
    nodes = len(data["nodes"])
    if data.get("error"):
        message = f"partial graph ({nodes} nodes): the forward failed"
        controller.set_status("error", message)
        return message
    controller.set_status("idle", f"graph recorded: {nodes} autograd nodes")
    return ""


FORWARD_ONLY = (
    " only: the output holds no class or token scores and no loss to backpropagate from; "
    "call ex.run(target=callable) with a function of the output returning a scalar"
)


def message_text(exc: BaseException) -> str:
    """An exception's message without the quotes KeyError adds."""
    return exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)


def _run_train(value: Any) -> bool:
    """Whether a Run message asks for training mode: true, false or missing (eval, the default)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    raise ValueError(f"Run's train must be true or false, got {value!r}")


HANDLERS: dict[str, Handler] = {
    "attach": attach,
    "reattach": reattach,
    "detach": detach,
    "run": run,
    "plot_step": plot_step,
    "plot_view": plot_view,
    "summary": summary,
    "find_nonfinite": find_nonfinite,
    "attribute": attribute,
    "lens": lens,
    "patch": patch,
    "dismiss_error": dismiss_error,
    "graph": record_graph,
}
"""What each message type does; ``protocol.MESSAGES`` declares their shapes (a test checks both name the same)."""
