"""Captures stay references to the model's own tensors for as long as the store keeps them: the pool they once
moved into is gone."""

import gc
import warnings
import weakref

import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.capture.store import CaptureStore, make_record

WIDE = 2**15  # 32 × 1024 float32 outputs: 128 KiB, a size captures once moved at


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, WIDE // 32), nn.Tanh(), nn.Linear(WIDE // 32, 3))


def _train_step(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x)
    out.sum().backward()
    return out


def _churning_step(model: nn.Module, x: torch.Tensor) -> None:
    """A training step whose loop also page-faults in 64 MiB of fresh memory (mapped apart from the heap, and
    given back when freed), as a loop that grows and releases its memory every step does."""
    _train_step(model, x)
    torch.ones(2**24)


def test_a_capture_kept_past_its_step_stays_the_models_own_tensor():
    model = _model()
    seen = []  # addresses only: a tensor held here would be shared, which the pool never moved either
    model[0].register_forward_hook(lambda module, args, output: seen.append(output.data_ptr()))
    with Explorer(model) as ex:
        ex.attach("0", "forward")
        _churning_step(model, torch.randn(32, 8))
        first = ex.captures["0"]["forward"][0]
        expected = first.tensor.clone()
        for _ in range(3):  # later steps begin, however much the loop faults: nothing moves the kept capture
            _churning_step(model, torch.randn(32, 8))
        kept = ex.captures["0"]["forward"][0]
        assert kept is first and kept.tensor.data_ptr() == seen[0]  # the output's own memory
        assert torch.equal(kept.tensor, expected) and not kept.stale and not kept.tensor.requires_grad


def test_steps_call_no_deprecated_method():
    model = _model()
    with Explorer(model) as ex, warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        ex.attach("0", "forward")
        for _ in range(2):
            _train_step(model, torch.randn(32, 8))
        assert len(ex.captures["0"]["forward"]) == 2


def test_an_evicted_capture_is_freed_at_once():
    store = CaptureStore(memory_budget=WIDE * 4)  # one record fits
    first = make_record("a", "forward", 1, 0, {"output": torch.randn(WIDE)}, copy=False)
    gone = weakref.ref(first.tensor)  # the record's own detached tensor
    store.add(first)
    del first
    store.add(make_record("a", "forward", 2, 0, {"output": torch.randn(WIDE)}, copy=False))  # no step began
    gc.collect()
    assert gone() is None  # evicted, and held by nothing else of the store's
    assert store.summary()["records"] == 1 and store.evicted == 1
