"""A value a hook callable returns that torch would refuse is the hook's error: recorded, and the run completes.

torch checks what a hook returns inside autograd, where its error stops the backward half way (some
``.grad`` written, others not). The explorer checks it first, by torch's rules and with torch's message:
with ``on_error="record"`` the error is on ``last_error`` and the hook acts as if it returned None, so every
gradient equals a run without that hook; with ``on_error="raise"`` the error propagates.
"""

from __future__ import annotations

import copy
import re
import warnings
from collections import OrderedDict

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer


def net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict(first=nn.Linear(4, 6), act=nn.Tanh(), mid=nn.Linear(6, 6), out=nn.Linear(6, 3)))


class Mask(nn.Module):
    """``x * mask``: a tensor input that requires grad and one that does not, then a non-tensor scale."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
        return x * mask * scale


class Masked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin, self.mask = nn.Linear(4, 4), Mask()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mask(self.lin(x), torch.ones(4), 2.0)


def wrong_size(grad):
    return grad[:1]


def wrong_dtype(grad):
    return grad.double()


def a_tuple(grad):
    return (grad,)


def doubled_count(module, grads, *rest):
    return grads + grads


def first_wrong_size(module, grads, *rest):
    return (grads[0][:1], *grads[1:])


def first_wrong_dtype(module, grads, *rest):
    return (grads[0].double(), *grads[1:])


def a_gradient_for_the_input(module, grad_input, grad_output):
    return (torch.zeros(2, 4),)


def node_doubled_count(grads, *rest):
    return grads + grads


def node_list(grads):
    return list(grads)


def args_only(module, args, kwargs):
    return args


def gives_grad(param):
    return param.grad


# (path, kind, callable, input requires grad, with_kwargs, exception type, torch's message)
CASES = [
    ("mid", "grad", wrong_size, True, False, RuntimeError, "hook 'wrong_size' has changed the size of value"),
    (
        "mid",
        "grad",
        wrong_dtype,
        True,
        False,
        RuntimeError,
        "hook 'wrong_dtype' has changed the type of value (was torch.FloatTensor got torch.DoubleTensor)",
    ),
    ("mid", "grad", a_tuple, True, False, TypeError, "expected Variable, but hook returned 'tuple'"),
    ("mid.weight", "grad", wrong_size, True, False, RuntimeError, "hook 'wrong_size' has changed the size of value"),
    ("", "global_grad", wrong_size, True, False, RuntimeError, "hook 'wrong_size' has changed the size of value"),
    (
        "mid",
        "backward",
        doubled_count,
        True,
        False,
        RuntimeError,
        "Backward hook returned an invalid number of grad_input, got 2, but expected 1",
    ),
    ("mid", "backward", first_wrong_size, True, False, RuntimeError, "hook 'first_wrong_size' has changed the size"),
    (
        "first",
        "backward",
        a_gradient_for_the_input,
        False,  # the first layer: no input requires grad
        False,
        RuntimeError,
        "Backward hook for Modules where no input requires gradient should always return None or None for all "
        "gradients.",
    ),
    (
        "",
        "global_backward",
        doubled_count,
        True,
        False,
        RuntimeError,
        "Backward hook returned an invalid number of grad_input",
    ),
    (
        "mid",
        "backward_pre",
        doubled_count,
        True,
        False,
        RuntimeError,
        "Backward pre hook returned an invalid number of grad_output, got 2, but expected 1",
    ),
    (
        "mid",
        "backward_pre",
        first_wrong_dtype,
        True,
        False,
        RuntimeError,
        "hook 'first_wrong_dtype' has changed the type of value (was torch.FloatTensor got torch.DoubleTensor)",
    ),
    (
        "",
        "global_backward_pre",
        doubled_count,
        True,
        False,
        RuntimeError,
        "Backward pre hook returned an invalid number of grad_output, got 2, but expected 1",
    ),
    (
        "mid",
        "legacy_backward",
        doubled_count,
        True,
        False,
        RuntimeError,
        "hook 'doubled_count' has returned an incorrect number of values (got 6, but expected 3)",
    ),
    (
        "mid/AddmmBackward0#0",
        "node",
        node_doubled_count,
        True,
        False,
        RuntimeError,
        "hook 'node_doubled_count' has returned an incorrect number of values (got 6, but expected 3)",
    ),
    ("mid/AddmmBackward0#0", "node_pre", node_list, True, False, TypeError, "expected tuple, but hook returned 'list'"),
    (
        "mid",
        "forward_pre",
        args_only,
        True,
        True,
        RuntimeError,
        "forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got",
    ),
    (
        "mid.weight",
        "post_accumulate",
        gives_grad,
        True,
        False,
        RuntimeError,
        "Tensor post accumulate grad hooks should return None.",
    ),
]
IDS = [f"{kind}-{fn.__name__}" + ("-first-layer" if not needs else "") for _, kind, fn, needs, *_ in CASES]


def inputs(requires_grad: bool) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(2, 4, requires_grad=requires_grad)


def gradients(model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """One forward and backward; every parameter's .grad and the input's, by name."""
    out = model(x)
    out.pow(2).sum().backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    grads["input"] = x.grad
    return grads, out.detach()


@pytest.mark.parametrize(("path", "kind", "fn", "needs", "with_kwargs", "error", "message"), CASES, ids=IDS)
def test_a_return_value_torch_refuses_is_recorded_and_the_backward_completes_as_without_the_hook(
    path, kind, fn, needs, with_kwargs, error, message
):
    model = net()
    expected, expected_out = gradients(copy.deepcopy(model), inputs(needs))
    with Explorer(model) as ex, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if kind == "legacy_backward" or kind.startswith("node"):
            ex.graph(inputs(needs))  # node ids come from the recorded graph
        (info,) = ex.attach(path, [kind], fn, with_kwargs=with_kwargs)
        got, out = gradients(model, inputs(needs))  # no error escapes the user's own backward
        assert info.fired >= 1
        assert info.last_error is not None and message in info.last_error, info.last_error
        assert f"the {kind!r} hook on" in info.last_error  # which hook returned what
        assert info.last_error.startswith("Traceback")
        assert any(f"hook {kind!r} on" in str(w.message) and "failed" in str(w.message) for w in caught)
    assert set(got) == set(expected)
    for name, grad in expected.items():
        if grad is None:
            assert got[name] is None, name
        else:
            torch.testing.assert_close(got[name], grad, msg=name)
    torch.testing.assert_close(out, expected_out)


@pytest.mark.parametrize(("path", "kind", "fn", "needs", "with_kwargs", "error", "message"), CASES, ids=IDS)
def test_with_on_error_raise_the_same_error_propagates_with_torchs_message(
    path, kind, fn, needs, with_kwargs, error, message
):
    model = net()
    with Explorer(model, on_error="raise") as ex:
        if kind == "legacy_backward" or kind.startswith("node"):
            ex.graph(inputs(needs))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (info,) = ex.attach(path, [kind], fn, with_kwargs=with_kwargs)
            with pytest.raises(error, match=re.escape(message)):
                gradients(model, inputs(needs))
        assert info.last_error is not None and message in info.last_error


def test_a_value_in_a_none_slot_is_refused_as_by_torch():
    def fills_the_input_slot(grad_inputs, grad_outputs):
        return (grad_inputs[0], torch.zeros(2, 4), grad_inputs[2])  # the input takes no gradient: None there

    model = net()
    expected, _ = gradients(copy.deepcopy(model), inputs(False))
    with Explorer(model, example_inputs=inputs(False)) as ex:
        info = ex.attach("first/AddmmBackward0#0", "node", fills_the_input_slot)
        with pytest.warns(UserWarning, match="failed"):
            got, _ = gradients(model, inputs(False))
        assert "can't replace a None gradient with a non-None value" in info.last_error
    for name, grad in expected.items():
        if grad is not None:
            torch.testing.assert_close(got[name], grad, msg=name)


def test_a_module_backward_hooks_values_are_checked_for_tensor_inputs_only_as_by_torch():
    def for_the_mask(module, grad_input, grad_output):
        return (grad_input[0], torch.ones(2, 4), None)  # the mask's gradient has the mask's shape (4,)

    def for_the_scale(module, grad_input, grad_output):
        return (grad_input[0] * 3, None, "ignored")  # torch passes on only the tensor inputs' values

    x = inputs(True)
    expected, _ = gradients(Masked(), x.detach().requires_grad_())
    model = Masked()
    with Explorer(model) as ex:
        info = ex.attach("mask", "backward", for_the_mask)
        with pytest.warns(UserWarning, match="failed"):
            got, _ = gradients(model, x.detach().requires_grad_())
        assert "hook 'for_the_mask' has changed the size of value" in info.last_error
        for name, grad in expected.items():
            torch.testing.assert_close(got[name], grad, msg=name)

        model.zero_grad()
        info = ex.attach("mask", "backward", for_the_scale)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no failure: torch accepts this value
            tripled, _ = gradients(model, x.detach().requires_grad_())
        assert info.last_error is None
        torch.testing.assert_close(tripled["input"], 3 * expected["input"])


def test_a_value_torch_accepts_still_takes_effect():
    model = net()
    expected, _ = gradients(copy.deepcopy(model), inputs(True))
    with Explorer(model) as ex:
        info = ex.attach("mid", "backward_pre", lambda module, grad_output: (grad_output[0] * 0,))
        got, _ = gradients(model, inputs(True))
        assert info.last_error is None
    assert torch.count_nonzero(got["mid.weight"]) == 0 and torch.count_nonzero(got["first.weight"]) == 0
    torch.testing.assert_close(got["out.weight"], expected["out.weight"])
