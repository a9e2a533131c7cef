"""HookExplorer: the headless Explorer with a notebook view, kept in step by a controller listening to its events."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..core.capture.store import DEFAULT_MEMORY_BUDGET
from ..core.diagnostics.patching import DEFAULT_BATCH, Metric, Progress
from ..core.explorer import Explorer
from ..core.model.inputs import Inputs
from .controller import ViewController
from .training_panel import ddp_source
from .view import ExplorerView

if TYPE_CHECKING:
    from ..distributed import DDPInspector


class HookExplorer(Explorer):
    """Explore a model's hooks in a notebook: ``ex = HookExplorer(model, example_inputs=x); ex``.

    Every ``Explorer`` method, unchanged; ``view`` is the widget, which a controller keeps in step with the
    explorer's events, so a call from Python and a click in the page act on the same state.
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

    @property
    def view(self) -> ExplorerView:
        """The widget showing this explorer (created on first use)."""
        return self._controller.open(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = self.view._repr_mimebundle_(**kwargs)
        # ipywidgets gives (data, metadata), older versions data alone; a console without widgets shows text/plain
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = repr(self)
        return bundle

    def patch_sweep(
        self,
        clean: Inputs,
        corrupted: Inputs,
        *,
        layers: Sequence[str] | None = None,
        metric: Metric | None = None,
        batch_size: int = DEFAULT_BATCH,
        progress: Progress | None = None,
        edits: bool = True,
    ) -> torch.Tensor:
        """``Explorer.patch_sweep``, with its progress and then its figure shown in the widget's patching panel."""

        def sweep(report: Progress | None) -> torch.Tensor:
            return super(HookExplorer, self).patch_sweep(
                clean, corrupted, layers=layers, metric=metric, batch_size=batch_size, progress=report, edits=edits
            )

        return self._controller.patch_sweep(sweep, progress, default_metric=metric is None)

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
