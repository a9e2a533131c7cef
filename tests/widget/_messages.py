"""The comm messages the frontend sends, for driving a view from Python as the browser does."""

from __future__ import annotations

from typing import Any


def browser_sets(view: Any, /, **state: Any) -> None:
    """What the frontend sends for ``model.set(...); model.save_changes()``."""
    view._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def browser_sends(view: Any, /, **content: Any) -> None:
    """What the frontend sends for ``model.send(content)``."""
    view._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary traitlet's table as dicts, as the page reads it: ``columns`` name each row's values."""
    return [
        {column: value for column, value in zip(summary["columns"], values, strict=True) if value is not None}
        for values in summary["rows"]
    ]
