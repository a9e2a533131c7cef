"""HookExplorer: the headless Explorer with a notebook view, kept in step by a controller listening to its events."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from IPython.display import display
from torch import nn

from ..core.capture.store import DEFAULT_MEMORY_BUDGET
from ..core.diagnostics.patching import DEFAULT_BATCH, Metric, Progress
from ..core.explorer import Explorer
from ..core.model.inputs import Inputs
from .controller import ViewController
from .snapshot import closed_html, snapshot_html, standalone_page
from .snapshot_display import SnapshotDisplay
from .training_panel import ddp_source
from .view import ExplorerView

if TYPE_CHECKING:
    from ..distributed import DDPInspector


class HookExplorer(Explorer):
    """Explore a model's hooks in a notebook: ``ex = HookExplorer(model, example_inputs=x); ex``.

    Every ``Explorer`` method, unchanged; ``view`` is the widget, which a controller keeps in step with the
    explorer's events, so a call from Python and a click in the page act on the same state. Where widgets do not run
    (GitHub, nbviewer, ``jupyter nbconvert``) the notebook shows a static snapshot, kept current while the kernel runs
    (an output under the widget, hidden where the widget shows); ``save_html`` writes it as a page.
    """

    def __init__(
        self,
        model: nn.Module,
        example_inputs: Inputs | None = None,
        *,
        tokens: Sequence[str] | Sequence[Sequence[str]] | None = None,
        tokenizer: Any = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        offload: str | None = None,
        on_error: str = "record",
        collective: bool = False,
    ) -> None:
        super().__init__(
            model,
            example_inputs,
            tokens=tokens,
            tokenizer=tokenizer,
            memory_budget=memory_budget,
            offload=offload,
            on_error=on_error,
            collective=collective,
        )
        self._controller = ViewController(self)  # follows the explorer's events once the view is open
        self._snapshot: SnapshotDisplay | None = None  # the snapshot output under the widget, once displayed

    @property
    def view(self) -> ExplorerView:
        """The widget showing this explorer (created on first use)."""
        return self._controller.open(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget's own output: its mime bundle, with the explorer's repr as text (a console shows that)."""
        if self._model is None:  # closed: its view is gone, its repr says so
            return {"text/plain": repr(self), "text/html": closed_html(repr(self))}
        bundle = self.view._repr_mimebundle_(**kwargs)
        # ipywidgets gives (data, metadata), older versions data alone. No text/html here: where widgets do not run,
        # the snapshot output under it shows the explorer (``_display``).
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = repr(self)
        return bundle

    def _ipython_display_(self) -> None:
        self._display()

    def _display(self, plain: str | None = None) -> None:
        """Show the widget, then its static snapshot (``snapshot_display``); ``plain``: the widget's text instead of
        the repr (``%load_ext hookwidgets`` shows a module's own)."""
        bundle = self._repr_mimebundle_()
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        if plain is not None:
            data = {**data, "text/plain": plain}
        display(data, metadata=metadata, raw=True)
        if self._model is None:
            return
        if self._snapshot is None:
            self._snapshot = SnapshotDisplay(self.view, _weak_repr(self))
        self._snapshot.show()

    def save_html(self, path: str | os.PathLike[str]) -> Path:
        """Write what the widget shows now as a standalone HTML page (no script): the tree with its hook badges, the
        selection's figures, the summary table. Returns the file's path."""
        target = Path(path)
        if target.is_dir():
            raise IsADirectoryError(
                f"save_html: {str(target)!r} is a folder: give a file path, e.g. {str(target / 'explorer.html')!r}"
            )
        if not target.parent.is_dir():
            raise FileNotFoundError(
                f"save_html: the folder {str(target.parent)!r} does not exist: create it first "
                "(Path(...).mkdir(parents=True)) or choose a path in an existing folder"
            )
        page = standalone_page(snapshot_html(self.view, repr(self)), repr(self))
        target.write_text(page, encoding="utf-8")
        return target

    def patch_sweep(
        self,
        clean: Inputs,
        corrupted: Inputs,
        *,
        layers: Sequence[str] | None = None,
        metric: Metric | str | None = None,
        batch_size: int = DEFAULT_BATCH,
        progress: Progress | None = None,
        edits: bool = True,
    ) -> torch.Tensor:
        """``Explorer.patch_sweep``, with its progress and then its figure shown in the widget's patching panel."""

        def sweep(report: Progress | None) -> torch.Tensor:
            return super(HookExplorer, self).patch_sweep(
                clean, corrupted, layers=layers, metric=metric, batch_size=batch_size, progress=report, edits=edits
            )

        return self._controller.patch_sweep(sweep, progress)

    def show_ddp(self, source: DDPInspector | list[dict[str, Any]] | str | os.PathLike) -> None:
        """Show DDP records in the widget's Training panel, in place of what it showed of DDP before.

        ``source``: a ``DDPInspector`` (followed live), its records (``DDPInspector.load(log_dir, records=None)``,
        ``insp.gather()``), or the ``log_dir`` the ranks wrote to (read with ``DDPInspector.load``).
        """
        self.model  # noqa: B018 -- a closed explorer says so, as every method does
        self._controller.show_ddp(ddp_source(source))

    def close(self) -> None:
        """``Explorer.close``; the widget then says "closed: hooks removed, model as found" in place of its panels."""
        self._controller.close()  # first: the view follows no event of the closing
        super().close()
        if self._snapshot is not None:  # a shown snapshot says, once, that the explorer closed
            self._snapshot.close(repr(self))


def _weak_repr(explorer: HookExplorer) -> Callable[[], str | None]:
    """The explorer's repr while it lives: its snapshot display keeps no explorer alive."""
    ref = weakref.ref(explorer)
    return lambda: None if (live := ref()) is None else repr(live)
