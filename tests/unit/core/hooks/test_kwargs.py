"""forward_pre's built-in actions record keyword arguments as ``kwargs.<name>``, as they record ``args.N``."""

from __future__ import annotations

import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm


class Scaled(nn.Module):
    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return x * scale


class Outer(nn.Module):
    """Calls its child with keywords only, or with one positional argument and one keyword."""

    def __init__(self, by_name: bool) -> None:
        super().__init__()
        self.inner, self.by_name = Scaled(), by_name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.tensor(3.0)
        return self.inner(x=x, scale=scale) if self.by_name else self.inner(x, scale=scale)


def test_a_gpt2_root_called_with_keywords_records_them():
    model, ids = tm.gpt2(), tm.token_ids(2, 5)
    mask = torch.ones_like(ids)
    with Explorer(model) as ex:
        ex.attach("", "forward_pre")
        model(input_ids=ids, attention_mask=mask)  # the user's own call
        ex.run({"input_ids": ids, "attention_mask": mask})  # the explorer's
        records = ex.captures[""]["forward_pre"]
    assert len(records) == 2
    for record in records:
        assert list(record.tensors) == ["kwargs.input_ids", "kwargs.attention_mask"]
        assert torch.equal(record.tensors["kwargs.input_ids"], ids)
        assert torch.equal(record.tensors["kwargs.attention_mask"], mask)


def test_global_forward_pre_records_the_keywords_of_every_module_called_with_them():
    model, ids = tm.gpt2(), tm.token_ids(2, 5)
    mask = torch.ones_like(ids)
    with Explorer(model) as ex:
        ex.attach("", "global_forward_pre")
        model(input_ids=ids, attention_mask=mask)
        (root,) = ex.captures[""]["global_forward_pre"]
        (body,) = ex.captures["transformer"]["global_forward_pre"]
    assert list(root.tensors) == ["kwargs.input_ids", "kwargs.attention_mask"]
    assert "kwargs.attention_mask" in body.tensors and torch.equal(body.tensors["kwargs.attention_mask"], mask)


def test_a_module_called_with_keywords_records_them_beside_its_positional_arguments():
    x = torch.ones(2, 2)
    for by_name, names in [(True, ["kwargs.x", "kwargs.scale"]), (False, ["args.0", "kwargs.scale"])]:
        model = Outer(by_name)
        with Explorer(model) as ex:
            ex.attach("inner", "forward_pre")
            ex.run(x)
            (record,) = ex.captures["inner"]["forward_pre"]
        assert list(record.tensors) == names
        torch.testing.assert_close(record.tensors["kwargs.scale"], torch.tensor(3.0))


def test_stats_and_print_see_keyword_arguments_and_an_edit_keeps_them(capsys):
    x = torch.ones(2, 2)
    model = Outer(by_name=True)
    with Explorer(model) as ex:
        info = ex.attach("inner", "forward_pre", "stats")
        ex.run(x)
        (record,) = ex.captures["inner"]["forward_pre"]
        assert record.stats["numel"] == 4 and record.stats["mean"] == 1.0  # the first one: kwargs.x
        ex.attach("inner", "forward_pre", "print")
        ex.run(x)
        assert "kwargs.x (2, 2) float32" in capsys.readouterr().out and info.last_error is None
    model = Outer(by_name=False)
    with Explorer(model) as ex:
        ex.attach("inner", "forward_pre", edit=("scale", 2.0))  # edits the positional arguments
        out = ex.run(x)
        (record,) = ex.captures["inner"]["forward_pre"]
    torch.testing.assert_close(out, 6 * x)  # the keyword scale=3 reached the forward
    assert list(record.tensors) == ["args.0", "kwargs.scale"]


def test_a_callable_keeps_torchs_two_argument_form_unless_it_asks_for_kwargs():
    seen = []
    model = Outer(by_name=False)
    with Explorer(model) as ex:
        ex.attach("inner", "forward_pre", lambda module, args: seen.append(len(args)))
        ex.run(torch.ones(2, 2))
    assert seen == [1]
