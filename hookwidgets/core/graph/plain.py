"""The shapes of the graph's plain data: ``Explorer.graph()`` / ``GraphRecording.data()`` and ``dataflow_graph``.

No ``from __future__ import annotations`` here: Python 3.11 would take a ``NotRequired`` field for a required one.
"""

from typing import NotRequired, TypedDict


class SavedTensor(TypedDict):
    """A tensor a node saved for backward; ``alias`` names what its memory belongs to when not its own."""

    name: str
    """What torch calls it on the node (``_saved_self``, ``_saved_other``…)."""
    shape: list[int]
    """Its shape."""
    dtype: str
    """Its dtype, without ``torch.``."""
    bytes: int
    """The bytes it holds (counted once per storage: a view of another saved tensor adds none)."""
    alias: str | None
    """What its memory belongs to when not its own (a parameter, an input, another node's tensor), else None."""


class GraphNode(TypedDict):
    """An autograd node: its id, op, module scope, parameter (AccumulateGrad of a parameter) and saved tensors."""

    id: str
    """``module/Op#n``, the same in each forward of the same code (a parameter's: ``module/AccumulateGrad#name``)."""
    op: str
    """The node's class name (``AddmmBackward0``, ``AccumulateGrad``…)."""
    module: str
    """The path of the innermost module running when the node was made (empty for the model itself)."""
    param: str | None
    """For a parameter's ``AccumulateGrad``, the parameter's path; else None."""
    saved: list[SavedTensor]
    """The tensors the node saved for backward."""


class GraphEdge(TypedDict):
    """Gradient flows from ``src``'s grad_input ``slot`` into ``dst``'s grad_output ``input_nr``."""

    src: str
    """The node whose grad_input flows along the edge."""
    dst: str
    """The node that receives it as a grad_output."""
    input_nr: int
    """Which of ``dst``'s grad_outputs it is."""
    slot: int
    """Which of ``src``'s grad_inputs it is."""
    shape: list[int] | None
    """The gradient's shape when known, else None."""


class GraphCluster(TypedDict):
    """A module scope, its parent scope (None for the root) and the ids of the nodes made directly in it."""

    module: str
    """The module's path (empty for the model itself)."""
    parent: str | None
    """The enclosing module's path; None for the root."""
    nodes: list[str]
    """The ids of the nodes made directly in this module (not in a child)."""


class GraphData(TypedDict):
    """The autograd graph of one forward as plain data; ``error`` only when the forward raised."""

    nodes: list[GraphNode]
    """Every autograd node the forward made."""
    edges: list[GraphEdge]
    """Where each gradient flows, node to node."""
    clusters: list[GraphCluster]
    """The module scopes the nodes were made in."""
    outputs: list[str]
    """The ids of the nodes that made the forward's outputs, where backward starts."""
    error: NotRequired[str]
    """Only when the forward raised: the error, as ``Type: message``; the graph is what ran before it."""


class DataflowNode(TypedDict):
    """A module of the dataflow graph and the number of ops its own forward ran."""

    module: str
    """The module's path; ``<output>`` stands for the model's outputs."""
    ops: int
    """How many autograd ops its own forward ran (not its children's)."""


class DataflowEdge(TypedDict):
    """``dst`` used ``tensors`` distinct tensors made by ``src``, ``uses`` times in all; their shapes."""

    src: str
    """The module that made the tensors."""
    dst: str
    """The module that used them."""
    tensors: int
    """How many distinct tensors."""
    uses: int
    """How many uses in all."""
    shapes: list[list[int] | None]
    """Each tensor's shape (None: not known)."""


class Dataflow(TypedDict):
    """Modules as nodes and the tensors passed between them."""

    nodes: list[DataflowNode]
    """The modules that ran ops."""
    edges: list[DataflowEdge]
    """The tensors passed between them."""
