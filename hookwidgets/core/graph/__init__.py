"""The autograd graph of a forward as plain data: recorded, walked, its saved tensors, the dataflow of modules.

Internal: the public names are ``hookwidgets.core``'s; what is here may change without notice.
"""

from .dataflow import dataflow_graph
from .plain import Dataflow, DataflowEdge, DataflowNode, GraphCluster, GraphData, GraphEdge, GraphNode, SavedTensor
from .record import GraphRecorder, GraphRecording, record_graph
from .recorded import RecordedGraph

__all__ = [
    "Dataflow",
    "DataflowEdge",
    "DataflowNode",
    "GraphCluster",
    "GraphData",
    "GraphEdge",
    "GraphNode",
    "GraphRecorder",
    "GraphRecording",
    "RecordedGraph",
    "SavedTensor",
    "dataflow_graph",
    "record_graph",
]
