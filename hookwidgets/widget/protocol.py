"""Every shape the view and the page exchange, declared once: the traitlets' payloads and the messages.

docs/widget-protocol.md documents each of these (tests/unit/widget/test_protocol_docs.py checks that it names every
field, and no other); the payload functions return them and the message handlers read them. No ``from __future__
import annotations`` here: Python 3.11 would take a ``NotRequired`` field for a required one.
"""

from typing import Any, Literal, NotRequired, TypedDict

# The engine's shapes the page receives as they are; every TypedDict named here gets a typedef in js/src/payloads.js.
from ..core.graph.plain import Dataflow, DataflowEdge, DataflowNode  # noqa: F401
from ..core.model.tree import TreeNode

# Traitlets (Python -> page; the page also writes `selected` and `theme`).


class HookItem(TypedDict):
    path: str
    kind: str
    action: str
    edit: list[list[Any]]
    fired: int
    steps: int
    error: str | None
    note: str | None
    foreign: bool
    edit_label: str


class HookKind(TypedDict):
    kind: str
    name: str
    family: str
    phase: str
    tip: str
    badge: str
    every_layer: bool
    common: bool


class ParamChip(TypedDict):
    name: str
    path: str
    shape: list[int] | None
    trainable: bool


class RecordChoice(TypedDict):
    step: int
    call: int
    shape: list[int]


class MethodWords(TypedDict):
    name: str
    tip: str


class Selection(TypedDict):
    path: str
    family: str
    kinds: list[str]
    details: list[list[str]]
    params: list[ParamChip]
    code: str
    problem: str
    axes: list[str] | None
    heads: int | None
    records: list[RecordChoice]
    attribution_methods: list[str]
    attribution_words: dict[str, MethodWords]
    attribution_note: str


# Figures: how the page shows a PNG and reads it under the mouse (hookwidgets/plots/hover.py writes these).


class HoverAxis(TypedDict):
    """The rows or the columns of a cell grid: what they are and what each is called."""

    name: str
    """What one row or column is: "token", "feature", "channel", "query", "key", "layer", "step", "position"…"""
    labels: list[str] | None
    """One label per drawn row/column (a token's text, a layer's path); None: numbered from ``start``."""
    start: int
    """The index of the first drawn row/column."""
    stride: int
    """Indices per drawn row/column: over 1 when the figure aggregated them (the readout says "features 8–11")."""
    count: int
    """How many rows/columns the data has (the last drawn one may cover fewer than ``stride``)."""


class CellsRegion(TypedDict):
    """A heatmap: ``rows`` × ``cols`` cells in ``box``, their values and what the rows and columns are."""

    type: Literal["cells"]
    box: list[float]
    """CSS pixels in the image: [x of the first column's outer edge, y of the first row's outer edge, x of the last
    column's outer edge, y of the last row's outer edge] (a flipped axis has them the other way round)."""
    rows: int
    cols: int
    values: bytes
    """float32, little-endian, ``rows × cols`` row-major; NaN and Inf as themselves."""
    row: HoverAxis
    col: HoverAxis
    label: str
    """Which of the figure's grids this is ("channel 3", "head 2"); "" for a figure's only one."""
    quantity: str
    """What the values are: "activation", "gradient", "probability", "grad_norm"…"""
    aggregate: str
    """How an aggregated cell combines the values it covers ("mean"); "" when every cell is one value."""


class LineSeries(TypedDict):
    name: str
    values: bytes
    """float32, little-endian, one per x (NaN: no value at that x)."""


class LinesRegion(TypedDict):
    """A line chart: the x of each point and each series' value there."""

    type: Literal["lines"]
    box: list[float]
    """CSS pixels in the image: [left, top, right, bottom] of the axes."""
    x: bytes
    """float64, little-endian: the x of each point (a step number, a bin centre)."""
    x_name: str
    """What x is: "step", "bin"…"""
    x_limits: list[float]
    """The x values at the box's left and right edges (a linear axis)."""
    series: list[LineSeries]
    label: str


Region = CellsRegion | LinesRegion
"""One part of a figure the page reads under the mouse."""


class Hover(TypedDict):
    """How the page shows a figure's PNG and reads it under the mouse."""

    ratio: float
    """Device pixels per CSS pixel the PNG was rendered at: it is shown at natural size / ratio."""
    width: float
    height: float
    """The figure's CSS size (natural size / ratio, before rounding to whole device pixels)."""
    pixelated: bool
    """The figure holds a map with fewer cells than pixels: shown with ``image-rendering: pixelated``."""
    regions: list[Region]


class PlotItem(TypedDict):
    kind: str
    title: str
    shape: list[int] | None
    dtype: str | None
    step: int
    call: int
    positions: list[list[int]]
    stale: bool
    verified: bool
    element: str
    elements: list[str]
    view: str
    views: list[str]
    tokens: list[str] | None
    heads: int
    head: int | None
    scale: str | None
    """The colour scale of an attention map ("linear", "per-row", "log"); None for other views."""
    scales: list[str]
    """The scales the page offers for this view (empty: none to choose)."""
    png: bytes
    hover: Hover | None
    """How to show ``png`` (its pixel ratio) and what it tells under the mouse (``plots.hover``)."""
    edits: str
    """On an analysis's item (an attention module's heads): whether it ran with the user's edits (``edits_note``);
    "" elsewhere (a capture is of the user's own run, edits and all)."""


class Plots(TypedDict):
    path: str | None
    items: list[PlotItem]


class OutputScores(TypedDict):
    kind: str
    tensor: str | None
    shape: list[int] | None
    words: str | None
    positions: int | None
    decoder: bool
    loss: bool
    labels: dict[str, str]
    probe_failed: str


class Status(TypedDict):
    state: str
    message: str
    top: list[list[Any]]
    output: OutputScores
    cell: bool
    step: int
    failed: str | None


class ShortStep(TypedDict):
    path: str
    kind: str
    note: str


class Memory(TypedDict):
    bytes: int
    budget: int
    records: int
    evicted: int
    evicting: bool
    short_steps: list[ShortStep]


class SummaryFilter(TypedDict):
    text: str
    blocks_only: bool
    module_class: str


class Summary(TypedDict):
    columns: list[str]
    rows: list[list[Any]]
    fields: list[str]
    field: str
    steps: list[int]
    step: int | None
    nonfinite: list[str]
    first_nonfinite: str | None
    heatmap: bytes | None
    heatmap_hover: Hover | None
    message: str
    filter: SummaryFilter
    total: int
    blocks: list[str]
    classes: list[str]


class RatioRow(TypedDict):
    param: str
    optimizer: str
    step: int
    ratio: float | str
    update_norm: float | str
    weight_norm: float | str
    lr: float | str
    flag: str


class Ratios(TypedDict):
    rows: list[RatioRow]
    optimizers: list[str]
    low: float
    high: float
    flagged: int
    png: bytes | None
    hover: Hover | None
    caption: str
    message: str


class ReadyRow(TypedDict):
    order: int
    param: str
    ms: float | str


class Ready(TypedDict):
    step: int | None
    rank: int | None
    rows: list[ReadyRow]
    note: str


class DDPPanel(TypedDict):
    source: str
    ranks: list[int]
    steps: int
    step: int | None
    buckets_png: bytes | None
    buckets_hover: Hover | None
    ranks_png: bytes | None
    ranks_hover: Hover | None
    ready: Ready
    message: str


class Training(TypedDict):
    visible: bool
    ratios: Ratios | None
    ddp: DDPPanel | None
    step: int | None


class TokenScore(TypedDict):
    text: str
    score: float | str


class Attribution(TypedDict):
    layer: str | None
    method: str | None
    target: str | int | None
    png: bytes | None
    hover: Hover | None
    input_png: bytes | None
    input_hover: Hover | None
    tokens: list[TokenScore] | None
    error: str
    caption: str
    note: str
    edits: str
    """Whether the attribution ran with the user's edits (``edits_note``); "" when none is attached."""
    of_layer: bool


class Lens(TypedDict):
    available: bool
    reason: str
    layers: list[str]
    positions: list[str]
    first: int
    top_k: int
    cells: list[list[list[list[Any]]]]
    answers: list[str]
    """The model's final answer at each shown position: the output row's top token."""
    answer_probs: list[list[float]]
    """``[layer][position]``: the final answer's probability there."""
    answer_ranks: list[list[int]]
    """``[layer][position]``: the final answer's rank there (1: the top token)."""
    answer_first: list[int]
    """Per position, the first layer (row) where the final answer is the top token."""
    floor: float
    """The probability the cells' colour scale starts at, a uniform guess's (1 / vocabulary): a log scale from it to 1;
    0 before a lens."""
    edits: str
    """Whether the lens ran with the user's edits (``edits_note``); "" when none is attached."""
    caption: str
    error: str


class Patching(TypedDict):
    available: bool
    reason: str
    mode: str
    clean: str
    corrupted: str
    hint: str
    metric: str
    tokens: list[str]
    differs: list[int]
    png: bytes | None
    hover: Hover | None
    caption: str
    progress: list[int] | None
    error: str
    edits: str


class Frame(TypedDict):
    """The figure pane the page reports: its width in CSS pixels and the screen's devicePixelRatio."""

    width: int
    ratio: float


class Theme(TypedDict):
    name: Literal["light", "dark"]
    background: str
    foreground: str


class CompactGraph(TypedDict):
    ids: list[str]
    op: list[int]
    ops: list[str]
    module: list[int]
    modules: list[str]
    parents: list[int]
    params: list[list[Any]]
    saved: list[list[Any]]
    edges: list[list[int]]
    outputs: list[int]


class Graph(TypedDict):
    autograd: CompactGraph | None
    dataflow: Dataflow | None
    error: str
    recordable: bool


# The run view (``hookwidgets.open_run(log_dir)`` displayed): its own traitlets, ``RUN_TRAITLETS``.


class FirstNonfinite(TypedDict):
    step: int
    rank: int
    path: str
    kind: str
    phase: str


class RunState(TypedDict):
    source: str
    ranks: list[int]
    rank: str
    steps: list[int]
    kinds: list[str]
    kind: str
    fields: list[str]
    field: str
    step: int | None
    first_nonfinite: FirstNonfinite | None
    notes: list[str]
    live: bool
    stopped: str
    message: str


class Grid(TypedDict):
    title: str
    row_name: str
    column_name: str
    rows: list[str]
    columns: list[str]
    values: bytes
    flags: bytes
    mark: list[int] | None


TRAITLETS: dict[str, Any] = {
    "tree": TreeNode,
    "selected": str,
    "hook_kinds": list[HookKind],
    "hooks": list[HookItem],
    "selection": Selection,
    "plots": Plots,
    "status": Status,
    "memory": Memory,
    "diagnostics": list[str],
    "summary": Summary,
    "training": Training,
    "attribution": Attribution,
    "lens": Lens,
    "patching": Patching,
    "error": str,
    "graph": Graph,
    "theme": Theme,
    "frame": Frame,
    "closed": str,
}
"""Each traitlet of ``ExplorerView`` and the shape of its value."""


RUN_TRAITLETS: dict[str, Any] = {
    "tree": TreeNode,
    "selected": str,
    "kind": str,
    "field": str,
    "step": int,
    "rank": str,
    "run": RunState,
    "heatmap": Grid,
    "ranks_view": Grid,
    "error": str,
}
"""Each traitlet of the run view (``RunWidget``) and the shape of its value; the page writes ``selected``, ``kind``,
``field``, ``step`` (-1: the default step) and ``rank`` (the heatmap's: ``"all"``, a rank, or ``""``: the default)."""


# Messages from the page (``model.send``). Each carries a ``request_id`` and gets exactly one ``Reply``.


class AttachMessage(TypedDict):
    type: Literal["attach"]
    request_id: str
    path: str
    kind: str
    action: NotRequired[str | None]
    edit: NotRequired[list[Any] | None]


class ReattachMessage(TypedDict):
    type: Literal["reattach"]
    request_id: str
    path: str
    action: NotRequired[str | None]
    edit: NotRequired[list[Any] | None]


class DetachMessage(TypedDict):
    type: Literal["detach"]
    request_id: str
    path: str
    kind: str


class RunMessage(TypedDict):
    type: Literal["run"]
    request_id: str
    mode: NotRequired[str]
    target: NotRequired[str | int | None]
    position: NotRequired[int | None]
    train: NotRequired[bool | None]


class PlotStepMessage(TypedDict):
    type: Literal["plot_step"]
    request_id: str
    kind: str
    step: int | None
    call: NotRequired[int | None]


class PlotViewMessage(TypedDict):
    type: Literal["plot_view"]
    request_id: str
    kind: str
    view: NotRequired[str]
    element: NotRequired[str]
    head: NotRequired[int | None]
    scale: NotRequired[str]


class SummaryMessage(TypedDict):
    type: Literal["summary"]
    request_id: str
    field: NotRequired[str]
    step: NotRequired[int]
    filter: NotRequired[str]
    blocks_only: NotRequired[bool]
    module_class: NotRequired[str]


class FindNonfiniteMessage(TypedDict):
    type: Literal["find_nonfinite"]
    request_id: str


class AttributeMessage(TypedDict):
    type: Literal["attribute"]
    request_id: str
    layer: str
    method: str
    target: str | int | None
    position: NotRequired[int | None]


class LensMessage(TypedDict):
    type: Literal["lens"]
    request_id: str
    top_k: NotRequired[int]


class PatchMessage(TypedDict):
    type: Literal["patch"]
    request_id: str
    clean: str
    corrupted: str
    metric: NotRequired[str]


class DismissErrorMessage(TypedDict):
    type: Literal["dismiss_error"]
    request_id: str


class GraphMessage(TypedDict):
    type: Literal["graph"]
    request_id: str


MESSAGES: dict[str, Any] = {
    "attach": AttachMessage,
    "reattach": ReattachMessage,
    "detach": DetachMessage,
    "run": RunMessage,
    "plot_step": PlotStepMessage,
    "plot_view": PlotViewMessage,
    "summary": SummaryMessage,
    "find_nonfinite": FindNonfiniteMessage,
    "attribute": AttributeMessage,
    "lens": LensMessage,
    "patch": PatchMessage,
    "dismiss_error": DismissErrorMessage,
    "graph": GraphMessage,
}
"""Each message the page sends, by its ``type``."""


# Messages from the kernel (``view.send``).


class Reply(TypedDict):
    type: Literal["reply"]
    request_id: str | int
    ok: bool
    error: str


def reply(request_id: str | int, error: str = "") -> Reply:
    """The one answer to a request: ``ok`` unless ``error`` says why it failed."""
    return {"type": "reply", "request_id": request_id, "ok": not error, "error": error}
