"""The model's output stays a tensor the user may change in place while full backward hooks are attached.

torch wraps a hooked module's output in a view that no in-place op may change; the explorer runs the model's own
full backward hooks without that view and aliases the views of hooked submodules that reach the output, so
``out = model(x); out.mul_(2)`` works as without the explorer, with torch's gradients and firings.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import GLOBAL_DICTS, hook_state

FULL = ["backward", "backward_pre"]


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


def doubled_in_place(model: nn.Module, x: torch.Tensor, in_place: bool = True) -> torch.Tensor:
    """The user's own step: the output changed in place (or not: the same values), then a backward; returns it."""
    out = model(x)
    out = out.mul_(2) if in_place else out * 2
    out.pow(2).sum().backward()
    return out


def grads(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    return [x.grad, *(p.grad for p in model.parameters())]


@pytest.mark.parametrize(
    "attach",
    [
        pytest.param({"": ["global_backward", "global_backward_pre"]}, id="global"),
        pytest.param({"": FULL}, id="the-model-itself"),
        pytest.param({"2": FULL}, id="the-last-layer"),
    ],
)
def test_an_in_place_op_on_the_output_works_with_full_backward_hooks_and_gives_torchs_gradients(attach):
    model, x = mlp(), torch.randn(3, 4, requires_grad=True)
    reference, x_ref = copy.deepcopy(model), x.detach().clone().requires_grad_()
    expected_out = doubled_in_place(reference, x_ref)
    before, globals_before = hook_state(model), [list(getattr(nn.modules.module, d).items()) for d in GLOBAL_DICTS]
    with Explorer(model) as ex:
        for target, kinds in attach.items():
            ex.attach(target, kinds)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no collision, no warning
            out = doubled_in_place(model, x)
        assert not out._is_view()
        torch.testing.assert_close(out, expected_out)
        for got, want in zip(grads(model, x), grads(reference, x_ref), strict=True):
            torch.testing.assert_close(got, want)
        assert all(h.fired and h.last_error is None and h.note is None for h in ex.hooks), ex.hooks
        assert ex.diagnostics == []
        # the gradient at the output is the one of the value the model returned: twice that of the doubled output
        target, kind = next(iter(attach)), "global_backward" if "global_backward" in attach.get("", ()) else "backward"
        record = ex.captures[target][kind][0]
        torch.testing.assert_close(record.tensors["grad_output.0"], 4 * expected_out)
        if target == "":
            torch.testing.assert_close(record.tensors["grad_input.0"], x_ref.grad)
        model(x).sum().backward()  # the next step too
    assert hook_state(model) == before
    assert [list(getattr(nn.modules.module, d).items()) for d in GLOBAL_DICTS] == globals_before


def test_the_models_own_hooks_edit_the_gradients_as_torchs_do():
    model, x = mlp(), torch.randn(3, 4, requires_grad=True)
    reference, x_ref = copy.deepcopy(model), x.detach().clone().requires_grad_()
    handles = [
        reference.register_full_backward_pre_hook(lambda m, g: (g[0] * 3,)),
        reference.register_full_backward_hook(lambda m, gi, go: (gi[0] + 1,)),
    ]
    doubled_in_place(reference, x_ref, in_place=False)  # torch's view of the output refuses the in-place op
    for handle in handles:
        handle.remove()
    with Explorer(model) as ex:
        ex.attach("", "backward_pre", edit=("scale", 3.0))
        ex.attach("", "backward", action=lambda m, gi, go: (gi[0] + 1,))
        doubled_in_place(model, x)
        assert [h.last_error for h in ex.hooks] == [None, None]
    for got, want in zip(grads(model, x), grads(reference, x_ref), strict=True):
        torch.testing.assert_close(got, want)


def test_a_gpt2_logits_changed_in_place_with_global_backward_statistics():
    model, ids = tm.gpt2(), tm.token_ids(2, 6)
    reference = copy.deepcopy(model)
    reference(ids).logits.div_(0.7).sum().backward()
    with Explorer(model) as ex, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Full backward hook is firing")  # the embeddings' integer inputs
        ex.attach("", "global_backward", action="stats")
        out = model(ids)
        out.logits.div_(0.7).sum().backward()
        assert ex.captures["lm_head"]["global_backward"][0].stats["numel"] == out.logits.numel()
        assert ex.diagnostics == []
    for (name, got), want in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, msg=name)
