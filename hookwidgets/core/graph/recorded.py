"""The explorer's last recorded graph: its plain data and saved memory, kept without the live graph."""

from __future__ import annotations

import difflib

import torch
from torch import nn

from ..display import quoted
from ..model.inputs import Inputs
from .plain import GraphData
from .record import GraphRecorder, GraphRecording, record_graph


class RecordedGraph:
    """The plain data of the last recorded run; the live nodes are released at once so no memory is held."""

    def __init__(self) -> None:
        self.data: GraphData | None = None
        self.saved_by_module: dict[str, int] = {}
        self._ids: set[str] = set()

    def record(self, model: nn.Module, inputs: Inputs, saved_tensors: bool = True) -> BaseException | None:
        """Record one forward of ``inputs`` (model state left as found); a ValueError says why there is no graph.
        Returns the exception of a forward that raised (its partial graph is kept, with the error's text), else None.

        Grad is enabled for the run, as for ``ex.run``: a ``torch.no_grad()`` block around the call does not
        matter (``torch.inference_mode()`` does, and the error says so).
        """
        with torch.enable_grad():
            recording = record_graph(model, inputs, saved_tensors=saved_tensors)
        raised, recording.exception = recording.exception, None
        self._set(recording)
        return raised

    def keep(self, recorder: GraphRecorder) -> None:
        """Keep what ``recorder`` recorded, the partial graph of a failed forward included."""
        recording = recorder.last
        if recording is not None:
            self._set(recording)

    def _set(self, recording: GraphRecording) -> None:
        data = recording.data()
        if recording.error is not None:
            data["error"] = recording.error
        self.data = data
        self.saved_by_module = dict(recording.saved_by_module)
        self._ids = {node["id"] for node in data["nodes"]}
        recording.release()

    def check(self, node_id: str, model_name: str) -> None:
        """A KeyError naming the closest ids when a recorded graph has no node ``node_id``."""
        if self.data is None or node_id in self._ids:
            return
        close = difflib.get_close_matches(node_id, sorted(self._ids), n=3, cutoff=0.6)
        hint = " — did you mean " + " or ".join(quoted(c) for c in close) + "?" if close else ""
        raise KeyError(
            f"no autograd node {quoted(node_id)} in the recorded graph of {model_name} ({len(self._ids)} nodes){hint}; "
            "node ids are the 'id' fields of ex.graph()['nodes']"
        )
