"""The view's controller: keeps an ExplorerView in step with its explorer by listening to the engine's events.

Every payload is built by the pure functions of ``payloads.py`` and the panels from the explorer's public state;
what the page sends is answered by ``messages.py``. The controller holds the explorer weakly: the explorer
holds it, and the view and the explorer's event hub hold only the controller.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..core.explorer import Explorer
from ..core.graph.plain import GraphData
from ..core.hooks.events import Event
from ..core.model.tree import unwatched_note
from .attention_heads import AttentionHeads
from .drawing import drawing_for
from .graph_panel import graph_payload
from .lens_panel import lens_offer
from .live import LiveUpdates
from .messages import handle, message_text
from .page_choices import PageChoices
from .patching_panel import ProgressPush, patching_offer, patching_payload, without_sweep
from .payloads import hooks_payload, kinds_payload, memory_payload, selection_payload, status_payload
from .protocol import reply
from .selection_images import draw_selection
from .summary_panel import summary_payload
from .training_panel import DDPSource, training_payload, training_version
from .view import CLOSED, ExplorerView

EMPTIED_ON_CLOSE = (
    "tree",
    "hooks",
    "selection",
    "plots",
    "diagnostics",
    "summary",
    "training",
    "attribution",
    "lens",
    "patching",
    "error",
    "graph",
)
"""The traitlets a closed view empties: what it showed of the model, images included, goes with the explorer."""


class ViewController:
    """Opens the view of one explorer, pushes what its events change, and answers the page's messages.

    What the page chose lives in ``choices``, which the page's messages write (``messages.py``); the controller draws
    from it. The DDP records the Training panel shows are chosen from Python (``show_ddp``, ``watch_ddp``).
    """

    def __init__(self, explorer: Explorer) -> None:
        self._explorer = weakref.ref(explorer)
        self._view: ExplorerView | None = None
        self._closed = False
        self._unsubscribe: Callable[[], None] = lambda: None
        self._live: LiveUpdates | None = None
        self._choices = PageChoices(output=dict(explorer.probe_output))
        self._attention_heads = AttentionHeads()
        self._ddp: DDPSource | None = None  # what the Training panel shows of DDP (show_ddp, watch_ddp)
        self._training_version: tuple[Any, ...] | None = None  # the panel is redrawn only when this changes
        self._graph_shown: GraphData | None = None  # the recorded graph the view shows, by identity
        self._redraws: dict[str, Callable[[], None]] = {}  # panels drawn once (attribution, patching), by name

    @property
    def explorer(self) -> Explorer | None:
        """The explorer, or None once it is closed or gone."""
        return None if self._closed else self._explorer()

    @property
    def view(self) -> ExplorerView | None:
        """The view, once opened (None before)."""
        return self._view

    @property
    def choices(self) -> PageChoices:
        """What the page chose; the page's messages write it, the drawing reads it."""
        return self._choices

    @property
    def attention_heads(self) -> AttentionHeads:
        """An attention module's heads, shown when it is selected (a Run makes it forget them)."""
        return self._attention_heads

    def open(self, explorer: Explorer) -> ExplorerView:
        """The view, created on first use; from then on the controller follows the explorer's events."""
        if self._view is not None:
            return self._view
        explorer.model  # noqa: B018 -- a closed explorer says so, as every method does
        notes = [explorer.probe_error, unwatched_note(explorer.unwatched)]
        view = ExplorerView(tree=explorer.tree, hook_kinds=kinds_payload(), error="\n\n".join(n for n in notes if n))
        output = self._choices.output
        view.status = status_payload("idle", "", output["top"], output, step=explorer.step)
        view.lens = lens_offer(explorer)
        view.patching = patching_offer(explorer)
        # With example inputs the graph panel records them on its first visit (a graph from ex.graph() comes below).
        view.graph = graph_payload(None, recordable=explorer.example_inputs is not None)
        # The view is kept alive by the widget registry: it must hold the controller weakly, as it holds the explorer.
        on_message = weakref.WeakMethod(self.on_message)
        view.on_msg(lambda widget, content, buffers: (m := on_message()) and m(content))
        on_selected = weakref.WeakMethod(self._on_selected)
        view.observe(lambda change: (m := on_selected()) and m(change), names="selected")
        on_theme = weakref.WeakMethod(self._on_theme)
        view.observe(lambda change: (m := on_theme()) and m(change), names=["theme", "frame"])
        weakref.finalize(explorer, self.close)  # an explorer dropped unclosed closes its view too
        self._view = view
        if self._ddp is None and explorer.ddp_inspector is not None:  # watch_ddp() came before the view
            self._ddp = DDPSource(inspector=explorer.ddp_inspector)
        self._live = LiveUpdates(self)
        self._unsubscribe = explorer.subscribe(self._on_event)
        self.sync()
        self.sync_summary()
        self.sync_training(follow=True)
        return view

    def close(self) -> None:
        """Stop following the explorer; the view lets go of what it showed and says it is closed (``CLOSED``).

        Its comm stays open: a closed widget would vanish from the notebook, with nothing saying why.
        """
        if self._closed:
            return
        self._closed = True
        self._unsubscribe()
        if self._live is not None:
            self._live.close()
        self._redraws.clear()
        view = self._view
        if view is not None:
            view.closed = CLOSED  # sent first: the page puts the placeholder in place of the panels
            with view.hold_sync():  # then what they showed goes, in one message the page no longer renders
                for name in EMPTIED_ON_CLOSE:
                    setattr(view, name, view.trait_defaults(name))

    # The engine's events.
    def _on_event(self, event: Event) -> None:
        # Compared as event["type"], not through a variable, so that mypy knows which event's keys each branch reads.
        if event["type"] in ("attached", "detached"):
            self.sync(plots=False)  # captures are unchanged: the images need no redraw
        elif event["type"] == "watching":
            if event["watch"] == "ddp":
                explorer = self.explorer
                if explorer is not None and explorer.ddp_inspector is not None:
                    self.show_ddp(DDPSource(inspector=explorer.ddp_inspector))
            else:
                self.sync_training(follow=True)
        elif event["type"] == "step" and self._live is not None:
            if not event["done"]:
                self._live.on_step(event["step"])
            elif not self._live.is_paused:  # a run() from Python ended: what it changed, at once
                self.sync()
                self.sync_summary()  # only runs add statistics: the heatmap is redrawn after them, not on clicks
                self.sync_training()  # a run of a DDP model adds bucket records
        elif event["type"] == "graph":
            self.sync_graph()

    # The page's messages.
    def on_message(self, content: Any) -> None:
        """Handle one message of the page; one that carries a ``request_id`` gets exactly one reply."""
        view = self._view
        explorer = self.explorer
        if view is None:
            return
        request_id = content.get("request_id") if isinstance(content, dict) else None
        error = ""
        if view.status.get("state") == "error" and isinstance(content, dict) and content.get("type") != "dismiss_error":
            # The status says how the latest action went; the errors panel keeps the text until dismissed.
            self.set_status("idle", "")
        try:
            if explorer is None:
                raise RuntimeError("this explorer is closed: create a new HookExplorer(model)")
            error = handle(self, explorer, content)
        except Exception as exc:  # shown in the widget; the kernel stays usable
            error = f"{type(exc).__name__}: {message_text(exc)}"
            self.show_error(error, str(exc))
        finally:
            if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
                view.send(reply(request_id, error))

    def show_error(self, text: str, summary: str) -> None:
        """Put ``text`` in the errors panel and its first line in the status."""
        view = self._view
        if view is None:
            return
        view.error = text
        self.set_status("error", summary.splitlines()[0].strip("'\"") if summary else text)
        self.sync()

    def set_status(self, state: str, message: str) -> None:
        """Say in the status line what the latest action did (``state``: idle, busy, live or error)."""
        explorer = self.explorer
        if self._view is not None:
            output = self._choices.output
            self._view.status = status_payload(
                state,
                message,
                output["top"],
                output,
                cell=self._live is not None and self._live.cell_running,
                step=explorer.step if explorer is not None else 0,
                failed=self._choices.failed_module,
            )

    def restate(self) -> None:
        """Send the status again with its state and message, with what changed besides (a cell started or ended)."""
        view = self._view
        if view is not None:
            self.set_status(view.status.get("state", "idle"), view.status.get("message", ""))

    @contextlib.contextmanager
    def page_run(self) -> Iterator[None]:
        """A run the page asked for: no live pushes inside, the view is updated when it ends."""
        with self._live.paused() if self._live is not None else contextlib.nullcontext():
            yield

    def _on_selected(self, change: dict[str, Any]) -> None:
        self._choices.new_selection()  # which views fit, the elements and the heads were another path's
        self._attention_heads.forget()  # the user may have trained since: a selection shows what the model does now
        self.sync()  # the attribution stays: it names its layer, and the page says which module is selected

    def _on_theme(self, change: dict[str, Any]) -> None:
        """The page's theme or figure pane changed: every image the view shows is drawn again for it."""
        self._training_version = None  # its records did not change, its colours did
        try:
            self.sync_plots()
            self.sync_summary()
            self.sync_training()
            with self.drawing():
                for redraw in list(self._redraws.values()):
                    redraw()
        except Exception as exc:  # shown in the widget; the old images stay
            if self._view is not None:
                self._view.error = f"could not redraw the images in the new theme: {type(exc).__name__}: {exc}"

    def drawing(self) -> contextlib.AbstractContextManager[Any]:
        """A block whose figures are drawn in the page's theme and for its figure pane (``drawing_for``)."""
        return drawing_for(self._view)

    def keep_redraw(self, panel: str, redraw: Callable[[], None] | None) -> None:
        """Remember how ``panel``'s images are drawn again when the theme changes (None: it has none now)."""
        if redraw is None:
            self._redraws.pop(panel, None)
        else:
            self._redraws[panel] = redraw

    # Pushing state: each payload from the explorer's public state.
    def sync(self, plots: bool = True) -> None:
        """Push hooks, selection, memory, diagnostics and a new graph; the images too unless ``plots`` is False."""
        view, explorer = self._view, self.explorer
        if view is None or explorer is None:
            return
        view.hooks = hooks_payload(explorer.hooks)  # first: the badge a click waits for leaves before the rest
        view.tree = explorer.tree  # new parameter counts once a forward materialized lazy modules
        view.selection = selection_payload(explorer, view.selected)
        view.memory = memory_payload(explorer)
        view.diagnostics = explorer.diagnostics
        self.sync_graph()  # a run with record_graph=True recorded a new one
        if plots:
            self.sync_plots()

    def sync_graph(self) -> None:
        """Send the recorded graph unless the view already shows that very graph (recording makes a new dict)."""
        view, explorer = self._view, self.explorer
        data = explorer.recorded_graph if explorer is not None else None
        if view is None or explorer is None or data is None or data is self._graph_shown:
            return
        view.graph = graph_payload(data, recordable=explorer.example_inputs is not None)
        self._graph_shown = data

    def sync_plots(self) -> float | None:
        """Redraw the selection's images as the page chose them (``draw_selection``); returns the seconds it took,
        which live updates expect the next drawing to take (None: nothing to draw)."""
        view, explorer = self._view, self.explorer
        if view is None or explorer is None:
            return None
        spent = draw_selection(view, explorer, self._choices, self._attention_heads)
        if spent is not None and self._live is not None:
            self._live.drew(spent)
        return spent

    def patch_sweep(self, sweep: Callable[[Callable[[int, int], Any]], torch.Tensor], progress: Any) -> torch.Tensor:
        """Run ``sweep(progress)`` showing its progress in the patching panel, then its figure (or its error)."""
        view = self._view
        if view is None:
            return sweep(progress)

        def show(done: int, total: int) -> None:
            view.patching = without_sweep(view.patching, progress=[done, total], caption="patch sweep running…")
            self.set_status("busy", f"patch sweep: {done}/{total} patched positions")

        try:
            result = sweep(ProgressPush(show, progress))
        except Exception as exc:  # the user's cell gets the exception; the panel says it too
            view.patching = without_sweep(view.patching, error=f"{type(exc).__name__}: {message_text(exc)}")
            self.keep_redraw("patching", None)  # a theme change must not bring the previous sweep back over the error
            self.set_status("error", "the patch sweep failed: see the patching panel")
            raise
        edits = str(getattr(result, "edits", ""))  # what the sweep itself says it ran with
        redraw = functools.partial(self._show_patching, result, edits)  # an (L, T) tensor: small
        redraw()
        self.keep_redraw("patching", redraw)
        self.set_status("idle", f"patch sweep: {result.shape[0]} layers × {result.shape[1]} positions")
        return result

    def _show_patching(self, result: torch.Tensor, edits: str) -> None:
        if self._view is not None:
            with self.drawing():
                self._view.patching = patching_payload(result, self._view.patching, edits)

    def sync_summary(self) -> None:
        """Redraw the summary's table and heatmap with the page's chosen field and step."""
        view, explorer = self._view, self.explorer
        if view is not None and explorer is not None:
            with self.drawing():
                view.summary = summary_payload(explorer, **self._choices.summary())

    def show_ddp(self, source: DDPSource) -> None:
        """Show ``source`` in the Training panel, in place of what it showed of DDP before."""
        self._ddp = source
        self.sync_training(follow=True)

    def sync_training(self, follow: bool = False) -> bool:
        """Redraw the Training panel if what it shows changed; returns whether it drew.

        With ``follow``, live updates also follow optimizer steps (a loop may have no module hook to signal it).
        """
        view, explorer = self._view, self.explorer
        if view is None or explorer is None:
            return False
        monitors = explorer.monitors
        live_ddp = self._ddp is not None and self._ddp.inspector is not None
        if follow and self._live is not None and (monitors or live_ddp):
            self._live.follow_optimizers()
        version = training_version(monitors, self._ddp)
        if version == self._training_version:
            if view.training.get("visible") and view.training.get("step") != explorer.step:
                view.training = {**view.training, "step": explorer.step}  # no new record: it is current at this step
            return False
        try:
            with self.drawing():
                view.training = training_payload(monitors, self._ddp, _ddp_prefix(explorer.model), explorer.step)
        except Exception as exc:  # shown in the widget; the user's loop goes on
            view.error = f"could not draw the Training panel: {type(exc).__name__}: {exc}"
        self._training_version = version
        return True


def _ddp_prefix(model: torch.nn.Module) -> str:
    """``"module."`` when the explored model is the DDP wrapper: DDP records name ``ddp.module``'s
    parameters, and the tree and ratio table name the wrapper's (``module.0.weight``)."""
    from torch.nn.parallel import DistributedDataParallel  # the class only: no process group is touched

    return "module." if isinstance(model, DistributedDataParallel) else ""
