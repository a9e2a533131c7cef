"""The tensors inside nested values: tuples, lists, dicts and dataclasses, HF-style ModelOutputs as dicts."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import torch
from torch import nn

from hookwidgets.core.attribution.tap import LayerTap
from hookwidgets.core.hooks.tensor_edits import apply_edits
from hookwidgets.core.model.nested import first_tensor, map_tensors, named_tensors, tensors_in


@dataclass
class Scores:
    logits: torch.Tensor
    hidden: tuple = ()
    label: str = "scores"


@dataclass
class ModelOutputLike(OrderedDict):
    """Like HF's ModelOutput: a dataclass that is also an OrderedDict of the fields that are set."""

    logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None

    def __post_init__(self) -> None:
        first = self.logits
        if isinstance(first, dict):  # HF rebuilds from a dict passed as the first field
            self.logits = None
            for key, value in first.items():
                setattr(self, key, value)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                self[f.name] = value


@dataclass
class Node:
    value: torch.Tensor
    parent: Node | None = None


def test_dataclass_fields_are_named_inside_tuples_and_dicts():
    a, b, c = torch.ones(1), torch.zeros(2), torch.full((3,), 2.0)
    value = (Scores(a, (b, None)), {"extra": Scores(c)})
    found = named_tensors("output", value)
    assert list(found) == ["output.0.logits", "output.0.hidden.0", "output.1.extra.logits"]
    assert found["output.0.logits"] is a and found["output.1.extra.logits"] is c
    assert tensors_in(value) == [a, b, c] and first_tensor(value) is a
    assert first_tensor(Scores) is None and named_tensors("output", Scores) == {}  # a type, not an output


def test_a_model_output_stays_a_dict_of_the_fields_that_are_set():
    logits = torch.ones(2)
    out = ModelOutputLike(logits=logits)
    assert named_tensors("output", out) == {"output.logits": logits}
    edited = apply_edits(out, (("scale", 3.0),))
    assert type(edited) is ModelOutputLike and list(edited) == ["logits"] and edited.hidden is None
    assert torch.equal(edited["logits"], torch.full((2,), 3.0)) and edited.logits is edited["logits"]


def test_a_dataclass_pointing_back_at_itself_is_walked_once():
    root = Node(torch.ones(1))
    child = Node(torch.zeros(1), parent=root)
    root.parent = child
    assert list(named_tensors("output", root)) == ["output.value", "output.parent.value"]


def test_map_tensors_keeps_every_container_type():
    value = [Scores(torch.ones(2), (torch.ones(1),)), {"k": torch.ones(1)}]
    out = map_tensors(value, lambda t: t * 2)
    assert type(out) is list and type(out[0]) is Scores and out[0].label == "scores"
    assert [t.tolist() for t in tensors_in(out)] == [[2.0, 2.0], [2.0], [2.0]]


class ScoresLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> Scores:
        return Scores(self.fc(x))


def test_a_layer_tap_finds_the_tensor_of_a_dataclass_output():
    layer, x = ScoresLayer(), torch.randn(2, 4)
    with LayerTap(layer, "layer") as tap:
        out = layer(x)
    torch.testing.assert_close(tap.activations, out.logits.detach())
    score = out.logits[:, 2].sum()
    torch.testing.assert_close(tap.gradient(score), torch.tensor([[0.0, 0.0, 1.0]] * 2))


class Batch(dict):
    """A dict subclass with state of its own and an __init__ that does not take a dict."""

    def __init__(self, source: str, **items: torch.Tensor) -> None:
        super().__init__(**items)
        self.source = source


class Stack(list):
    def __init__(self, name: str, items=()) -> None:
        super().__init__(items)
        self.name = name


class ReadOnly(Mapping):
    """A mapping that cannot be copied item by item nor built from a dict."""

    def __init__(self, *, a: torch.Tensor) -> None:
        self._a = a

    def __getitem__(self, key):
        return {"a": self._a}[key]

    def __iter__(self):
        return iter(["a"])

    def __len__(self) -> int:
        return 1


def test_map_tensors_keeps_mapping_and_list_subclasses_with_their_own_state():
    doubled = lambda t: t * 2  # noqa: E731
    factory = defaultdict(list, {"a": torch.ones(2)})
    out = map_tensors(factory, doubled)
    assert type(out) is defaultdict and out.default_factory is list and out is not factory
    assert torch.equal(out["a"], torch.full((2,), 2.0)) and out["missing"] == []
    assert torch.equal(factory["a"], torch.ones(2))  # the original is left as it was
    ordered = map_tensors(OrderedDict([("z", torch.ones(1)), ("a", torch.ones(1))]), doubled)
    assert type(ordered) is OrderedDict and list(ordered) == ["z", "a"]
    batch = map_tensors(Batch("loader", x=torch.ones(1)), doubled)
    assert type(batch) is Batch and batch.source == "loader" and torch.equal(batch["x"], torch.full((1,), 2.0))
    stack = map_tensors(Stack("layers", [torch.ones(1), 3]), doubled)
    assert type(stack) is Stack and stack.name == "layers" and stack[1] == 3
    assert torch.equal(stack[0], torch.full((1,), 2.0))
    proxy = map_tensors(MappingProxyType({"a": torch.ones(1)}), doubled)
    assert type(proxy) is MappingProxyType and torch.equal(proxy["a"], torch.full((1,), 2.0))
    plain = map_tensors(ReadOnly(a=torch.ones(1)), doubled)
    assert type(plain) is dict and torch.equal(plain["a"], torch.full((1,), 2.0))
