"""Random small architectures for the fuzzer: a plain-data spec, a hypothesis strategy, and its model.

A spec is a nested tuple such as ``("residual", ("seq", [("linear",), ("relu_inplace",)]))``; every block
maps a ``(batch, WIDTH)`` tensor to one of the same shape, so any nesting is a valid model. Blocks are
built so that the hook-free model always runs forward and backward: in-place ops only touch tensors
that no autograd node saved (a Linear's output), and the model starts and ends with a Linear.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st
from torch import nn

WIDTH = 4
LEAVES = ("linear", "tanh", "relu", "linear_relu_inplace", "bn", "dropout")
OUTPUTS = ("tensor", "tuple", "dict")


def specs(max_leaves: int = 8) -> st.SearchStrategy:
    """Block specs: leaves, sequences, branches, residuals (out of place or ``add_``), shared, dict/tuple, no_grad."""
    leaf = st.sampled_from(LEAVES).map(lambda name: (name,))

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(
            st.lists(children, min_size=1, max_size=3).map(lambda c: ("seq", c)),
            st.tuples(children, children).map(lambda c: ("branch", *c)),
            children.map(lambda c: ("residual", c)),
            children.map(lambda c: ("residual_inplace", c)),
            children.map(lambda c: ("shared", c)),
            children.map(lambda c: ("dict_out", c)),
            children.map(lambda c: ("tuple_out", c)),
            children.map(lambda c: ("no_grad", c)),
        )

    return st.recursive(leaf, extend, max_leaves=max_leaves)


def architectures() -> st.SearchStrategy:
    """A whole model: its body spec, the root's output structure, and whether the input requires grad."""
    return st.fixed_dictionaries(
        {"body": specs(), "output": st.sampled_from(OUTPUTS), "input_grad": st.booleans(), "batch": st.integers(2, 3)}
    )


def build_block(spec: tuple) -> nn.Module:
    """The module of one block spec."""
    name, *args = spec
    if name == "linear":
        return nn.Linear(WIDTH, WIDTH)
    if name == "tanh":
        return nn.Tanh()
    if name == "relu":
        return nn.ReLU()
    if name == "linear_relu_inplace":
        return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(inplace=True))
    if name == "bn":
        return nn.BatchNorm1d(WIDTH)
    if name == "dropout":
        return nn.Dropout(0.25)
    if name == "seq":
        return nn.Sequential(*(build_block(child) for child in args[0]))
    if name == "branch":
        return Branch(build_block(args[0]), build_block(args[1]))
    if name == "residual":
        return Residual(build_block(args[0]))
    if name == "residual_inplace":
        return ResidualInplace(build_block(args[0]))
    if name == "shared":
        return Shared(build_block(args[0]))
    if name == "dict_out":
        return DictUser(build_block(args[0]))
    if name == "tuple_out":
        return TupleUser(build_block(args[0]))
    if name == "no_grad":
        return NoGradSide(build_block(args[0]))
    raise ValueError(f"unknown block {name!r}")


def build_model(arch: dict[str, Any], seed: int = 0) -> nn.Module:
    """The model of an architecture, with weights from ``seed``."""
    torch.manual_seed(seed)
    return Root(build_block(arch["body"]), arch["output"])


def example_input(arch: dict[str, Any], seed: int = 1) -> torch.Tensor:
    """A ``(batch, WIDTH)`` input; it requires grad when the architecture says so."""
    x = torch.randn(arch["batch"], WIDTH, generator=torch.Generator().manual_seed(seed))
    return x.requires_grad_(arch["input_grad"])


def score(output: Any) -> torch.Tensor:
    """A scalar from any output structure: the sum of every tensor in it."""
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        return sum(t.sum() for t in output)
    return output.sum()


class Root(nn.Module):
    """stem Linear → body → head Linear, returning a tensor, a tuple or a dict."""

    def __init__(self, body: nn.Module, output: str) -> None:
        super().__init__()
        self.stem = nn.Linear(WIDTH, WIDTH)
        self.body = body
        self.head = nn.Linear(WIDTH, WIDTH)
        self.output = output

    def forward(self, x: torch.Tensor) -> Any:
        h = self.head(self.body(self.stem(x)))
        if self.output == "tuple":
            return h, h.mean(dim=1)
        if self.output == "dict":
            return {"logits": h, "aux": h.mean(dim=1)}
        return h


class Branch(nn.Module):
    """Two children on the same input, summed."""

    def __init__(self, left: nn.Module, right: nn.Module) -> None:
        super().__init__()
        self.left, self.right = left, right

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.left(x) + self.right(x)


class Residual(nn.Module):
    """``x + body(x)`` out of place; x is cloned first, since the body may modify its input in place."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone() + self.body(x)


class ResidualInplace(nn.Module):
    """``proj(body(x)).add_(x)``: an in-place add on a Linear's output (nothing saved it)."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x.clone()
        return self.proj(self.body(x)).add_(skip)


class Shared(nn.Module):
    """One child called twice per forward (weight sharing)."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(torch.tanh(self.body(x)))


class DictOf(nn.Module):
    """A child whose output is a dict."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"main": self.body(x), "side": x * 2}


class DictUser(nn.Module):
    """Consumes a child's dict output."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.inner = DictOf(body)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x.clone())
        return out["main"] + out["side"]


class TupleOf(nn.Module):
    """A child whose output is a tuple."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.body(x), torch.sin(x)


class TupleUser(nn.Module):
    """Consumes a child's tuple output."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.inner = TupleOf(body)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.inner(x.clone())
        return a * b


class NoGradSide(nn.Module):
    """``x + side(x)`` where ``side`` runs under ``torch.no_grad()`` (its hooks see no graph)."""

    def __init__(self, side: nn.Module) -> None:
        super().__init__()
        self.side = side

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            extra = self.side(x.clone())
        return x + extra
