"""Whether an autograd node leads back to another: a walk of ``next_functions``, answers kept for every node."""

from __future__ import annotations

from torch.autograd.graph import Node


class Reaches:
    """Whether an autograd node leads back to ``source``: the graph is walked once, answers kept for every node."""

    def __init__(self, source: Node) -> None:
        self.known: dict[Node, bool] = {source: True}

    def __call__(self, root: Node | None) -> bool:
        if root is None:
            return False
        known, stack = self.known, [root]
        while stack:  # iterative: a deep model's graph is deeper than Python's recursion limit
            node = stack[-1]
            if node in known:
                stack.pop()
                continue
            children = [child for child, _ in node.next_functions if child is not None]
            pending = [child for child in children if child not in known]
            if pending:
                stack.extend(pending)
                continue
            known[node] = any(known[child] for child in children)
            stack.pop()
        return known[root]
