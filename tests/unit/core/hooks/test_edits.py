import math
from collections import defaultdict, namedtuple
from dataclasses import dataclass, field

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.hooks.tensor_edits import VALID_FORMS, apply_edits, normalize_edits


def edited(value, edit):
    return apply_edits(value, normalize_edits(edit))


# --- each edit's values


def test_scale():
    assert torch.equal(edited(torch.tensor([1.0, -2.0, 3.0]), ("scale", 2)), torch.tensor([2.0, -4.0, 6.0]))
    assert torch.equal(edited(torch.tensor([1.0, -2.0]), ("scale", -0.5)), torch.tensor([-0.5, 1.0]))


def test_clip_clamps_to_plus_minus_v():
    out = edited(torch.tensor([-3.0, -1.0, 0.5, 2.0]), ("clip", 1.5))
    assert torch.equal(out, torch.tensor([-1.5, -1.0, 0.5, 1.5]))


def test_clip_norm_rescales_each_tensor_separately():
    a, b, c = edited((torch.tensor([3.0, 4.0]), torch.tensor([0.0, 0.5]), torch.zeros(3)), ("clip_norm", 1))
    assert torch.allclose(a, torch.tensor([0.6, 0.8]))
    assert torch.linalg.vector_norm(a).item() == pytest.approx(1.0)
    assert torch.equal(b, torch.tensor([0.0, 0.5]))  # already within the bound
    assert torch.equal(c, torch.zeros(3))  # a zero norm gives zeros, not NaN


def test_clip_norm_of_half_precision_does_not_overflow():
    t = torch.full((100,), 1000.0, dtype=torch.float16)  # the sum of squares overflows float16
    out = edited(t, ("clip_norm", 10.0))
    assert out.dtype == torch.float16
    assert torch.allclose(out.float(), torch.full((100,), 1.0), rtol=1e-3)


def test_zero_gives_zeros_even_for_non_finite_values():
    out = edited(torch.tensor([1.0, math.inf, math.nan, -2.0]), ("zero",))
    assert torch.equal(out, torch.zeros(4))


def test_zero_keeps_the_graph_so_upstream_gradients_are_zero_not_none():
    x = torch.randn(3, requires_grad=True)
    out = edited(x * 2, ("zero",))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(3))


def test_ablate_zeroes_channels_along_dim_1():
    t = torch.ones(2, 3, 2, 2)
    out = edited(t, ("ablate", [0, 2]))
    assert torch.equal(out[:, 1], torch.ones(2, 2, 2))
    assert torch.equal(out[:, [0, 2]], torch.zeros(2, 2, 2, 2))


def test_ablate_a_1d_tensor_along_dim_0():
    assert torch.equal(edited(torch.tensor([1.0, 2.0, 3.0, 4.0]), ("ablate", [1])), torch.tensor([1.0, 0.0, 3.0, 4.0]))


def test_ablate_a_channel_out_of_range_names_index_and_count():
    with pytest.raises(IndexError, match=r"ablate channel 5 .* 3 channels along dim 1 \(shape \(2, 3, 4\)\)"):
        edited(torch.ones(2, 3, 4), ("ablate", [1, 5]))
    with pytest.raises(IndexError, match="0-d tensor"):
        edited(torch.tensor(1.0), ("ablate", [0]))


# --- lists, structure, no in-place changes


def test_a_list_of_edits_applies_in_order():
    t = torch.tensor([1.0, 2.0])
    assert torch.equal(edited(t, [("scale", 2), ("clip", 3)]), torch.tensor([2.0, 3.0]))
    assert torch.equal(edited(t, [("clip", 3), ("scale", 2)]), torch.tensor([2.0, 4.0]))


@pytest.mark.parametrize(
    "edit", [("scale", 3), ("clip", 0.1), ("clip_norm", 0.5), ("zero",), ("ablate", [1]), [("scale", 2), ("zero",)]]
)
def test_inputs_are_never_changed_in_place(edit):
    torch.manual_seed(0)
    tensors = (torch.randn(2, 3, 4), torch.randn(3))
    clones = [t.clone() for t in tensors]
    versions = [t._version for t in tensors]
    out = edited(tensors, edit)
    for original, clone, version, new in zip(tensors, clones, versions, out, strict=True):
        assert torch.equal(original, clone)
        assert original._version == version
        assert new is not original


def test_a_tensor_autograd_still_needs_survives_the_edit():
    x = torch.randn(4, requires_grad=True)
    y = x.exp()  # exp saves its output for backward: an in-place edit of y would break backward
    z = edited(y, [("scale", 2), ("clip", 1)])
    z.sum().backward()
    assert torch.allclose(x.grad, torch.where(2 * y.detach() <= 1, 2 * y.detach(), torch.zeros(4)))


def test_tuples_with_none_and_non_tensors_keep_their_structure():
    t = torch.ones(2)
    value = (None, t, 3, "x", [torch.ones(1), None])
    out = edited(value, ("scale", 2))
    assert type(out) is tuple
    assert len(out) == 5
    assert out[0] is None
    assert out[2] == 3
    assert out[3] == "x"
    assert torch.equal(out[1], torch.full((2,), 2.0))
    assert type(out[4]) is list
    assert torch.equal(out[4][0], torch.full((1,), 2.0))
    assert out[4][1] is None


def test_namedtuples_and_dicts_keep_their_type():
    Pair = namedtuple("Pair", "a b")
    out = edited(Pair(torch.ones(1), None), ("scale", 3))
    assert type(out) is Pair
    assert torch.equal(out.a, torch.full((1,), 3.0))
    assert out.b is None
    out = edited({"logits": torch.ones(2), "n": 1}, ("zero",))
    assert torch.equal(out["logits"], torch.zeros(2))
    assert out["n"] == 1


@dataclass(frozen=True)
class Scores:
    logits: torch.Tensor
    extras: tuple = ()
    label: str = "scores"


@dataclass
class WithProbs:
    logits: torch.Tensor
    probs: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.probs = self.logits.softmax(-1)


def test_dataclasses_are_rebuilt_with_their_fields_edited():
    value = Scores(torch.ones(2), (torch.full((2,), 4.0), None))
    out = edited(value, ("scale", 0.5))
    assert type(out) is Scores and out is not value and out.label == "scores"
    assert torch.equal(out.logits, torch.full((2,), 0.5))
    assert torch.equal(out.extras[0], torch.full((2,), 2.0)) and out.extras[1] is None
    assert torch.equal(value.logits, torch.ones(2))  # the original is left as it was
    # a field outside __init__ is recomputed from the edited ones, as the dataclass itself would
    out = edited(WithProbs(torch.tensor([0.0, 2.0])), ("scale", 0.5))
    assert torch.equal(out.logits, torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(out.probs, torch.tensor([0.0, 1.0]).softmax(-1))


def test_integer_and_bool_tensors_pass_through():
    ids, mask = torch.tensor([3, 1]), torch.tensor([True, False])
    out = edited((ids, mask), ("scale", 2))
    assert out[0] is ids
    assert out[1] is mask


def test_no_edits_returns_the_value_itself():
    t = torch.ones(2)
    assert apply_edits(t, ()) is t
    assert apply_edits(None, normalize_edits(("zero",))) is None


# --- validation at attach time


def test_normalize_forms():
    assert normalize_edits(None) == ()
    assert normalize_edits(("scale", 2)) == (("scale", 2.0),)
    assert normalize_edits([("clip", 1), ("zero",)]) == (("clip", 1.0), ("zero",))
    assert normalize_edits([]) == ()
    assert normalize_edits(["clip_norm", 5]) == (("clip_norm", 5.0),)
    assert normalize_edits(("ablate", [3, 1, 3])) == (("ablate", (1, 3)),)
    assert normalize_edits(("ablate", 2)) == (("ablate", (2,)),)


def test_unknown_edit_suggests_a_close_match_and_lists_the_forms():
    with pytest.raises(ValueError, match="did you mean 'scale'") as info:
        normalize_edits(("scal", 2))
    assert str(info.value) == f"unknown edit 'scal' (did you mean 'scale'?); edits are {VALID_FORMS}"
    with pytest.raises(ValueError, match="frobnicate") as info:
        normalize_edits([("zero",), ("frobnicate",)])
    assert str(info.value) == f"unknown edit 'frobnicate'; edits are {VALID_FORMS}"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("clip", -1), r"clip value v .* must be >= 0, got -1"),
        (("clip_norm", -0.5), r"clip_norm bound n .* must be >= 0"),
        (("scale", "2"), r"'scale' argument must be a number, got '2'"),
        (("scale", True), r"must be a number, got True"),
        (("scale", math.nan), r"must be a number, got nan"),
        (("scale", math.inf), r"'scale' factor must be finite"),
        (("scale",), r"'scale' takes exactly one argument, write \('scale', f\)"),
        (("clip", 1, 2), r"'clip' takes exactly one argument, write \('clip', v\)"),
        (("ablate",), r"write \('ablate', \[channels\]\)"),
        (("zero", 1), r"'zero' takes no argument, write \('zero',\)"),
        (("ablate", []), r"expected a non-empty list of channel indices"),
        (("ablate", [1, -2]), r"channel indices must be ints >= 0, got -2"),
        (("ablate", [1.5]), r"channel indices must be ints >= 0, got 1.5"),
        (("ablate", "0"), r"expected a non-empty list of channel indices"),
        ("zero", r"must be a tuple, e\.g\. \('zero',\)"),
        (3, r"edit=3 is not an edit"),
        ([("zero",), 5], r"edit 5 is not an edit"),
    ],
)
def test_bad_edits_say_what_is_expected(edit, message):
    with pytest.raises(ValueError, match=message):
        normalize_edits(edit)


class Heads(nn.Module):
    """Returns its heads in a defaultdict: a missing head reads as an empty list."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> defaultdict:
        out = defaultdict(list)
        out["logits"] = self.fc(x)
        return out


def test_an_edit_keeps_a_defaultdict_output_a_defaultdict():
    model = Heads()
    x = torch.randn(3, 4)
    with Explorer(model) as ex:
        ex.attach("", "forward", edit=("scale", 2.0))
        out = model(x)
        (record,) = ex.captures[""]["forward"]
    assert type(out) is defaultdict and out.default_factory is list
    assert out["aux"] == []  # the model's callers may rely on the factory
    torch.testing.assert_close(out["logits"], 2 * model.fc(x))
    torch.testing.assert_close(record.tensors["output.logits"], out["logits"].detach())
