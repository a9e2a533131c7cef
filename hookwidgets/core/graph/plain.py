"""The shapes of the graph's plain data: ``Explorer.graph()`` / ``GraphRecording.data()`` and ``dataflow_graph``.

No ``from __future__ import annotations`` here: Python 3.11 would take a ``NotRequired`` field for a required one.
"""

from typing import NotRequired, TypedDict


class SavedTensor(TypedDict):
    """A tensor a node saved for backward; ``alias`` names what its memory belongs to when not its own."""

    name: str
    shape: list[int]
    dtype: str
    bytes: int
    alias: str | None


class GraphNode(TypedDict):
    """An autograd node: its id, op, module scope, parameter (AccumulateGrad of a parameter) and saved tensors."""

    id: str
    op: str
    module: str
    param: str | None
    saved: list[SavedTensor]


class GraphEdge(TypedDict):
    """Gradient flows from ``src``'s grad_input ``slot`` into ``dst``'s grad_output ``input_nr``."""

    src: str
    dst: str
    input_nr: int
    slot: int
    shape: list[int] | None


class GraphCluster(TypedDict):
    """A module scope, its parent scope (None for the root) and the ids of the nodes made directly in it."""

    module: str
    parent: str | None
    nodes: list[str]


class GraphData(TypedDict):
    """The autograd graph of one forward as plain data; ``error`` only when the forward raised."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    clusters: list[GraphCluster]
    outputs: list[str]
    error: NotRequired[str]


class DataflowNode(TypedDict):
    """A module of the dataflow graph and the number of ops its own forward ran."""

    module: str
    ops: int


class DataflowEdge(TypedDict):
    """``dst`` used ``tensors`` distinct tensors made by ``src``, ``uses`` times in all; their shapes."""

    src: str
    dst: str
    tensors: int
    uses: int
    shapes: list[list[int] | None]


class Dataflow(TypedDict):
    """Modules as nodes and the tensors passed between them."""

    nodes: list[DataflowNode]
    edges: list[DataflowEdge]
