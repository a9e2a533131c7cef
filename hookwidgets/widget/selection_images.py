"""The inspector's images of the selection, drawn the same way for a click, a Run and the user's own loop."""

from __future__ import annotations

import time

from ..core.display import quoted
from ..core.explorer import Explorer
from .attention_heads import AttentionHeads
from .captures import plot_items
from .drawing import drawing_for
from .page_choices import PageChoices
from .tensor_views import context_for
from .view import ExplorerView


def draw_selection(view: ExplorerView, explorer: Explorer, choices: PageChoices, heads: AttentionHeads) -> float | None:
    """Put the selection's images in ``view.plots``: its captures as the page chose them, then an attention module's
    heads; a failure goes to ``view.error``, never raised. Returns the seconds spent, None when it had nothing to draw.
    """
    path = view.selected
    started = time.monotonic()
    try:
        with drawing_for(view):  # in the page's theme, for its pane
            context = context_for(explorer, path)
            items = plot_items(explorer.captures, path, choices.plot_steps, choices.plot_views, context=context)
            chosen = choices.plot_views.get("attention", {})
            item = heads.item(explorer, path, chosen.get("head"), chosen.get("scale"))
        if item is not None:
            items.append(item)
        error = heads.take_error()
        if error:
            view.error = error
        view.plots = {"path": path, "items": items}
    except Exception as exc:  # shown in the widget; a click, a Run and the user's loop go on
        view.error = f"could not draw the captures of {quoted(path)}: {type(exc).__name__}: {exc}"
        return time.monotonic() - started  # a failed drawing costs the loop too
    return time.monotonic() - started if items or error else None
