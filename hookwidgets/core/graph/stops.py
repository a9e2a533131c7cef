"""Where gradients stop: autograd nodes of ops that have no autograd kernel.

torch records such an op (``quantize_dynamic``'s ``quantized::linear_dynamic``, a custom op registered without a
backward) with a fallback node that passes no gradient: ``WarnNotImplemented`` warns at backward and gives none,
``NotImplemented`` raises. The forward's values are right; every gradient upstream of that node is missing, so a map
drawn from them is zeros or wrong. The graph says where, not the module's class: a module whose output such a node
made is named, the first in the order the forwards returned (the innermost, e.g. ``o_proj`` before its attention).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import Node

from ..display import display_name, quoted
from ..model.nested import tensors_in
from ..model.packed import packed_objects
from ..model.tree import hookable_modules
from .reach import Reaches

STOP_NODES = ("torch::autograd::WarnNotImplemented", "torch::autograd::NotImplemented")
"""Names of torch's fallback nodes for an op without an autograd kernel: no gradient passes them."""


def is_stop(node: Node) -> bool:
    """Whether no gradient passes ``node`` (an op without an autograd kernel)."""
    return node.name() in STOP_NODES


class Stops:
    """A context manager for forwards: forward hooks on every module of ``model`` note which module's output a stop
    node made (``made[node]``: the first module, in the order they returned); with ``outputs``, also the autograd node
    of each module's first output tensor (its first call), which keeps that graph alive while the object is."""

    def __init__(self, model: nn.Module, outputs: bool = False) -> None:
        self.model = model
        self.made: dict[Node, str] = {}
        self.outputs: dict[str, Node] = {}
        self._keep_outputs = outputs
        self._handles: list[Any] = []

    def __enter__(self) -> Stops:
        try:
            for path, module in hookable_modules(self.model)[0]:
                self._handles.append(module.register_forward_hook(self._hook(path)))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, path: str) -> Callable[[nn.Module, Any, Any], None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            for tensor in tensors_in(output):
                node = tensor.grad_fn
                if node is None:
                    continue
                if self._keep_outputs:
                    self.outputs.setdefault(path, node)
                if is_stop(node):
                    self.made.setdefault(node, path)
                return

        return hook

    def module_of(self, node: Node) -> str | None:
        """The path of the module whose output ``node`` made (``""``: the model), or None for an op inside a forward."""
        return self.made.get(node)


def graph_nodes(roots: Iterable[Node]) -> list[Node]:
    """Every node of the graph behind ``roots``, each once, breadth first from them."""
    seen: set[Node] = set()
    order: list[Node] = []
    queue = deque(node for node in roots if node is not None)
    while queue:
        node = queue.popleft()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        queue.extend(child for child, _ in node.next_functions if child is not None and child not in seen)
    return order


def stops_on_path(score: torch.Tensor, sources: list[Node], stops: Stops) -> list[Node]:
    """The stop nodes between ``sources`` and ``score`` (behind the score and leading back to a source), the ones a
    module made first, in the order those modules returned."""
    if score.grad_fn is None:
        return []
    found = [node for node in graph_nodes([score.grad_fn]) if is_stop(node)]
    if not found:
        return []
    reaches = [Reaches(source) for source in sources]
    on_path = [node for node in found if any(reach(node) for reach in reaches)]
    order = {node: i for i, node in enumerate(stops.made)}
    return sorted(on_path, key=lambda node: order.get(node, len(order)))


def stopped_error(what: str, toward: str, node: Node, stops: Stops) -> ValueError:
    """The refusal of a method whose gradients toward ``toward`` stop at ``node``: which module, why, what to do."""
    return ValueError(f"{what} needs the gradient of the score with respect to {toward}, but {why(node, stops)}")


def why(node: Node, stops: Stops) -> str:
    """Where and why no gradient passes ``node``, in words."""
    path = stops.module_of(node)
    if path is None:
        return (
            f"it stops at an op inside the forward that has no autograd kernel ({node.name()}): no gradient passes "
            "it; run this on a model whose ops all have one"
        )
    module = stops.model.get_submodule(path)
    name = quoted(path) if path else "the model"
    kind = "a quantized module with packed weights" if _packs(module) else "a module"
    return (
        f"it stops at {name} ({display_name(_class(module))}), {kind} whose forward has no autograd path from "
        f"its input to its output ({node.name()}: its op has no autograd kernel), so every gradient upstream of it "
        "would be missing or zero; run this on the model before quantization (a float copy), or on one whose "
        "modules all pass gradients"
    )


def _class(module: nn.Module) -> str:
    """The class's name, with its module where it is not torch.nn's (a quantized ``Linear`` is not ``nn.Linear``)."""
    cls = type(module)
    return cls.__name__ if cls.__module__.startswith("torch.nn.") else f"{cls.__module__}.{cls.__qualname__}"


def _packs(module: nn.Module) -> bool:
    return any(packed_objects(m) for m in module.modules())


def check_path(what: str, toward: str, score: torch.Tensor, sources: list[Node], stops: Stops) -> None:
    """A ValueError naming the first module on the path from ``sources`` to ``score`` that passes no gradient."""
    found = stops_on_path(score, sources, stops)
    if found:
        raise stopped_error(what, toward, found[0], stops)


def unreached(roots: list[Node]) -> dict[Node, Node]:
    """The nodes behind ``roots`` that no gradient from them reaches, each with the stop node it is behind (the
    first met, breadth first from the roots): ``{}`` when no path passes a stop node."""
    reached: dict[Node, None] = {}  # in the order met, so that the stop named is the same on every run
    queue: deque[Node] = deque(roots)
    while queue:  # what a gradient reaches: stop nodes are reached, their inputs are not
        node = queue.popleft()
        if node in reached:
            continue
        reached[node] = None
        if not is_stop(node):
            queue.extend(child for child, _ in node.next_functions if child is not None and child not in reached)
    behind: dict[Node, Node] = {}
    pairs: deque[tuple[Node, Node]] = deque(
        (child, stop) for stop in reached if is_stop(stop) for child, _ in stop.next_functions if child
    )
    while pairs:
        node, stop = pairs.popleft()
        if node in reached or node in behind:
            continue
        behind[node] = stop
        pairs.extend((child, stop) for child, _ in node.next_functions if child is not None)
    return behind
