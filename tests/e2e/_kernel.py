"""Run code in the kernel a notebook in the browser uses, to assert on Python state."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jupyter_client import BlockingKernelClient

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class KernelError(AssertionError):
    """Code sent through `NotebookKernel.evaluate` raised in the kernel."""


class NotebookKernel:
    """A second client on an already running kernel, found through its connection file."""

    def __init__(self, connection_file: Path, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._client = BlockingKernelClient(connection_file=str(connection_file))
        self._client.load_connection_file()
        self._client.start_channels()
        self._client.wait_for_ready(timeout=timeout)

    def evaluate(self, code: str) -> str:
        """Execute `code` in the kernel and return what it printed to stdout."""
        stdout: list[str] = []
        errors: list[str] = []

        def on_output(msg: dict[str, Any]) -> None:
            content = msg["content"]
            if msg["msg_type"] == "stream" and content["name"] == "stdout":
                stdout.append(content["text"])
            elif msg["msg_type"] == "error":
                errors.append(_ANSI.sub("", "\n".join(content["traceback"])))

        reply = self._client.execute_interactive(code, store_history=False, timeout=self.timeout, output_hook=on_output)
        if reply["content"]["status"] != "ok" or errors:
            content = reply["content"]
            detail = "\n".join(errors) or f"{content.get('ename')}: {content.get('evalue')}"
            raise KernelError(f"kernel raised while running:\n{code}\n---\n{detail}")
        return "".join(stdout)

    def evaluate_json(self, expression: str) -> Any:
        """Return the value of a JSON-serialisable Python `expression` evaluated in the kernel."""
        out = self.evaluate(f"print(__import__('json').dumps({expression}))")
        return json.loads(out.strip().splitlines()[-1])

    def close(self) -> None:
        """Disconnect this client; the kernel keeps running for the notebook."""
        self._client.stop_channels()

    def __enter__(self) -> NotebookKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
