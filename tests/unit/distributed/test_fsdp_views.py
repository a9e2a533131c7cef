"""Full backward hooks on an FSDP2 model (a gloo group of one rank, in this process): FSDP2 sees no view from them, so
it does not warn; values and gradients are those without the explorer, and the hooks go at close()."""

from __future__ import annotations

import gc
import warnings

import pytest
import torch
import torch.distributed as dist

from hookwidgets.core import Explorer
from tests.unit.distributed._sharded_workers import batch, fsdp2, hook_counts, make_blocks

VIEW_WARNING = "returned a view tensor"


@pytest.fixture
def group(tmp_path):
    """A gloo process group of one rank (FileStore in tmp_path), destroyed after the test."""
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def _step(model: torch.nn.Module) -> tuple[list[str], torch.Tensor, dict[str, torch.Tensor]]:
    """One forward and backward: FSDP2's view warnings, the output, the gradients (full tensors)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        output = model(batch(0, 0))
        output.pow(2).mean().backward()
    grads = {name: p.grad.full_tensor() for name, p in model.named_parameters()}
    return [str(w.message) for w in caught if VIEW_WARNING in str(w.message)], output.detach(), grads


@pytest.mark.parametrize(
    ("path", "kinds"),
    [("", ["global_backward"]), ("", ["global_backward_pre"]), ("0.2", ["backward"]), ("2", ["backward_pre"])],
)
def test_no_view_warning_and_the_same_gradients(group, path, kinds):
    plain = fsdp2(make_blocks())
    plain[0][2].register_full_backward_hook(lambda *args: None)
    assert _step(plain)[0]  # a plain torch full backward hook on a block's last layer: FSDP2 warns (the case here)
    model = fsdp2(make_blocks())
    found = hook_counts(model)
    _, expected_output, expected_grads = _step(fsdp2(make_blocks()))
    with Explorer(model, example_inputs=batch(0, 1)) as ex:  # one rank: the probe runs
        assert ex.tree["shape"] == [6, 4]
        ex.attach(path, kinds, action="stats")
        said, output, grads = _step(model)
        assert said == []
        assert ex.captures[path or ""]  # the hooks fired
    assert output.equal(expected_output)
    assert grads.keys() == expected_grads.keys()
    assert all(grads[name].equal(expected_grads[name]) for name in grads)
    assert hook_counts(model) == found
