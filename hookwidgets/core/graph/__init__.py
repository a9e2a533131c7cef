"""The autograd graph of a forward as plain data: recorded, walked, its saved tensors, the dataflow of modules."""

from .dataflow import dataflow_graph
from .record import GraphRecorder, GraphRecording, record_graph
from .recorded import RecordedGraph

__all__ = ["GraphRecorder", "GraphRecording", "RecordedGraph", "dataflow_graph", "record_graph"]
