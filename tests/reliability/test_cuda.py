"""The engine on a CUDA device: every hook kind while training, backward hooks on autograd threads, CPU offload.

On CUDA the autograd engine runs the backward of device ops on a worker thread of its own, so every
backward hook fires there, not on the thread that called ``backward()``. These tests run only where
``torch.cuda.is_available()``; the fuzzer has a CUDA twin too (``test_fuzz.py``).
"""

from __future__ import annotations

import threading
import warnings

import pytest
import torch

from hookwidgets.core import Explorer

from ._soak_model import SoakNet, attach_every_kind
from ._state import all_hook_state

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: torch.cuda.is_available() is False (the CPU-only machines of this project have none)",
)
STEPS = 3


def test_every_kind_fires_on_cuda_and_backward_records_keep_their_forwards_step():
    torch.manual_seed(0)
    model = SoakNet().cuda()
    images = torch.randn(8, 3, 8, 8, device="cuda")
    labels = torch.randint(0, 5, (8,), device="cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    threads: list[int] = []
    before = all_hook_state(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # legacy hook and first-layer warnings
        ex = Explorer(model, images, memory_budget=2**30)
        try:
            attach_every_kind(ex, model)
            ex.attach("head.fc", "backward", action=lambda m, gi, go: threads.append(threading.get_ident()))
            for _ in range(STEPS):
                optimizer.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(images), labels).backward()
                optimizer.step()
            torch.cuda.synchronize()
            for info in ex.hooks:
                assert info.last_error is None, f"{info}: {info.last_error}"
                assert info.fired >= STEPS, f"{info} fired {info.fired} times in {STEPS} steps"
            assert len(threads) == STEPS and threading.get_ident() not in threads  # the device's autograd thread
            for kind in ("forward", "grad", "backward", "backward_pre"):
                records = ex.captures["features.conv"][kind]
                assert [r.step for r in records] == list(range(1, STEPS + 1)), kind
                assert all(t.device.type == "cuda" for r in records for t in r.tensors.values()), kind
            node = ex.captures["features.conv/ConvolutionBackward0#0"]["node"]
            assert [r.step for r in node] == list(range(1, STEPS + 1))
        finally:
            ex.close()
    assert all_hook_state(model) == before


def test_cuda_captures_offloaded_to_pinned_cpu_memory_hold_the_device_values():
    torch.manual_seed(0)
    model = SoakNet().cuda().eval()
    images = torch.randn(4, 3, 8, 8, device="cuda")
    with Explorer(model, offload="cpu") as ex:
        ex.attach("features.conv", ["forward", "grad"])
        out = model(images)
        out.sum().backward()
        conv_out = model.features.conv(images)  # the same values, computed again on the device
        forward = ex.captures["features.conv"]["forward"][-1]
        grad = ex.captures["features.conv"]["grad"][-1]
        for record in (forward, grad):
            assert record.tensor.device.type == "cpu" and record.tensor.is_pinned()
        torch.testing.assert_close(forward.tensor, conv_out.detach().cpu())
        assert grad.tensor.shape == conv_out.shape and torch.isfinite(grad.tensor).all()
