"""The comm messages the frontend sends, for driving a view from Python as the browser does: each is handed to the
view's comm, as the kernel hands it a message from the page."""

from __future__ import annotations

import itertools
from typing import Any

_request_ids = itertools.count()


def browser_sets(view: Any, /, **state: Any) -> None:
    """What the frontend sends for ``model.set(...); model.save_changes()``."""
    view.comm.handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def browser_sends(view: Any, /, **content: Any) -> dict[str, Any]:
    """What the frontend sends for a request (``model.send(content)`` with a fresh ``request_id``); returns the
    kernel's reply, after checking that exactly one came and that it carries the request's id."""
    request_id = f"test-{next(_request_ids)}"
    replies = sent_by_kernel(view, lambda: page_sends(view, {**content, "request_id": request_id}))
    answers = [m for m in replies if m.get("type") == "reply"]
    assert len(answers) == 1, f"{content.get('type')!r} got {len(answers)} replies: {answers}"
    assert answers[0]["request_id"] == request_id
    return answers[0]


def sent_by_kernel(view: Any, action: Any) -> list[dict[str, Any]]:
    """The custom messages the kernel sends to the page while ``action()`` runs."""
    sent: list[dict[str, Any]] = []
    outer = view.__dict__.get("send")  # a collector around this one sees them too

    def send(content: dict[str, Any], buffers: Any = None) -> None:
        sent.append(content)
        if outer is not None:
            outer(content, buffers)

    view.send = send  # shadows the method on this one view
    try:
        action()
    finally:
        if outer is None:
            del view.send
        else:
            view.send = outer
    return sent


def page_sends(view: Any, content: dict[str, Any]) -> None:
    """What the frontend sends for ``model.send(content)``, as it is (``browser_sends`` adds a request id)."""
    view.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary traitlet's table as dicts, as the page reads it: ``columns`` name each row's values."""
    return [
        {column: value for column, value in zip(summary["columns"], values, strict=True) if value is not None}
        for values in summary["rows"]
    ]


def in_cell(shell: Any, body: Any) -> None:
    """Run ``body()`` as the code of a notebook cell: IPython's cell events (``post_run_cell``) come around it."""
    shell.user_ns["_cell_body"] = body
    result = shell.run_cell("_cell_body()", store_history=False)
    result.raise_error()
