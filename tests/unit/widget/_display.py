"""What a notebook shows for an object: the outputs IPython's display publishes, captured."""

from __future__ import annotations

from typing import Any

from IPython.display import display
from IPython.utils.capture import capture_output

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def outputs_of(obj: Any) -> list[Any]:
    """The outputs ``display(obj)`` publishes (each with ``data``, ``transient``, ``update``); needs a shell."""
    with capture_output() as captured:
        display(obj)
    return list(captured.outputs)


def shown(obj: Any) -> dict[str, Any]:
    """The explorer's two outputs as one bundle: the widget's (its mime type, text/plain), the snapshot's text/html."""
    outputs = outputs_of(obj)
    if len(outputs) == 1:  # a closed explorer: its text alone
        return dict(outputs[0].data)
    widget, snapshot = outputs
    assert "text/html" not in widget.data and set(snapshot.data) == {"text/html"}
    return {**widget.data, **snapshot.data}
