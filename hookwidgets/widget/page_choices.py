"""What the page chose that the engine does not know: one object the page's messages write and the drawing reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .captures import Choice
from .summary_filter import LayerFilter


@dataclass
class PageChoices:
    """The page's choices of one view; its message handlers write here, the controller draws from here."""

    output: dict[str, Any]
    """What the run bar offers: the latest output's summary (as ``Explorer.probe_output``), replaced by each Run."""
    plot_steps: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    """Kind -> the (step, call) the inspector's slider shows; a kind not in it shows its newest capture."""
    plot_views: dict[str, Choice] = field(default_factory=dict)
    """Kind -> the view, element and head the page chose for its image; a kind not in it is drawn its default way."""
    summary_field: str = "grad_norm"
    """The statistic the summary's heatmap shows."""
    summary_step: int | None = None
    """The step the summary's table shows (None: the newest)."""
    summary_filter: LayerFilter = field(default_factory=LayerFilter)
    """The layers the summary's table and heatmap show."""
    first_nonfinite: str | None = None
    """The module the latest "find first NaN/Inf" found (None: none found, or not asked)."""
    failed_module: str | None = None
    """The module the latest Run failed in, marked in the tree until a Run succeeds or the error is dismissed."""

    def new_selection(self) -> None:
        """A new selection starts at its newest captures, in their default views (the old ones were another's)."""
        self.plot_steps.clear()
        self.plot_views.clear()

    def summary(self) -> dict[str, Any]:
        """The summary's arguments as chosen: ``field``, ``step``, ``first_nonfinite`` and ``layers`` (the filter)."""
        return {
            "field": self.summary_field,
            "step": self.summary_step,
            "first_nonfinite": self.first_nonfinite,
            "layers": self.summary_filter,
        }
