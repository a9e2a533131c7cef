"""Memory saved for backward per module, against an independent count by saved_tensors_hooks."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.graph.record import record_graph
from tests.conftest import SharedBlock
from tests.unit.core.graph.test_scoping import Outer, ResidualCNN, TransformerBlock, mlp


def saved_bytes_by_pack_hook(model: nn.Module, x: torch.Tensor) -> dict[str, int]:
    """Bytes each module's forward saved for backward, seen by a pack hook and a stack of module paths.

    A tensor is counted once, by the module current when its memory was first saved; parameters and
    buffers are not activation memory. This is the route the issue names (saved_tensors_hooks during
    the forward), independent of how the explorer reads the nodes.
    """
    paths = {id(m): p for p, m in model.named_modules()}
    owned = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    stack: list[str] = []
    seen: set[int] = set()
    counted: Counter[str] = Counter()

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        key = tensor.untyped_storage().data_ptr()
        if key and key not in owned and key not in seen:
            seen.add(key)
            counted[stack[-1]] += tensor.nbytes
        return tensor.detach()  # the tensor itself would make a reference cycle through a saved output

    def enter(module: nn.Module, args: object) -> None:
        stack.append(paths[id(module)])

    def leave(module: nn.Module, args: object, output: object) -> None:
        stack.pop()

    pre = module_globals.register_module_forward_pre_hook(enter)
    post = module_globals.register_module_forward_hook(leave, always_call=True)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(x)
    finally:
        pre.remove()
        post.remove()
        module_globals._global_forward_hooks_always_called.pop(post.id, None)
    return {module: n for module, n in counted.items() if n}


CASES = {
    "residual_cnn": (ResidualCNN, lambda: torch.randn(2, 3, 8, 8)),  # in-place ReLU, BatchNorm buffers
    "mlp": (mlp, lambda: torch.randn(4, 6, requires_grad=True)),
    "transformer": (TransformerBlock, lambda: torch.randn(2, 5, 8)),  # attention, views of saved tensors
    "called_twice": (SharedBlock, lambda: torch.randn(3, 4)),
    "stashed_by_parent": (Outer, lambda: torch.randn(2, 4)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_saved_memory_per_module_equals_a_count_by_pack_hooks(case):
    torch.manual_seed(0)
    make, inputs = CASES[case]
    model, x = make().eval(), inputs()  # record_graph runs in eval mode; so does the reference
    expected = Counter(saved_bytes_by_pack_hook(model, x))
    assert expected  # the reference saw something: the comparison is not empty against empty
    recording = record_graph(model, x)
    # Autograd saves a Python number (``x * 2.0``, ``/ math.sqrt(d)``) as a 0-dim double tensor without
    # calling pack hooks; the explorer lists and counts it (8 bytes), the reference cannot see it.
    for node in recording.data()["nodes"]:
        for saved in node["saved"]:
            if saved["shape"] == [] and saved["dtype"] in ("float64", "int64") and saved["alias"] is None:
                expected[node["module"]] += saved["bytes"]
    assert recording.saved_by_module == dict(expected)


def test_saved_memory_of_a_residual_block_is_its_activations_by_hand():
    torch.manual_seed(0)
    model, x = ResidualCNN().eval(), torch.randn(2, 3, 8, 8)
    with Explorer(model, example_inputs=x) as ex:
        memory = ex.saved_memory()
    activation = 2 * 8 * 8 * 8 * 4  # one (2, 8, 8, 8) float32 feature map
    # In each block: conv1 saves its input, which the ReLU before it saved already (counted there);
    # bn1 saves conv1's output; the in-place ReLU saves its result, bn1's output overwritten; conv2
    # saves that same memory again (counted once, on the ReLU); bn2 saves conv2's output; the block's
    # F.relu(out + x) saves its result (the add saves nothing).
    for block in ("layer1.0", "layer1.1"):
        assert memory[f"{block}.bn1"] == memory[f"{block}.act"] == memory[f"{block}.bn2"] == activation
        assert memory[block] == activation
        assert f"{block}.conv1" not in memory and f"{block}.conv2" not in memory
    assert memory["stem.0"] == 2 * 3 * 8 * 8 * 4  # the input image
    assert memory["stem.1"] == memory["stem.2"] == activation
    assert memory["fc"] == 2 * 8 * 4  # mat1; mat2 is the weight's transpose, a parameter
    assert memory[""] == 8  # x * 2.0 saves the Python number as a 0-dim double
    assert set(memory) == {"", "stem.0", "stem.1", "stem.2", "fc"} | {
        f"layer1.{i}{part}" for i in (0, 1) for part in ("", ".bn1", ".act", ".bn2")
    }  # pool and flatten save no tensor; parameters and BatchNorm buffers are no activations
    assert list(memory) == sorted(memory, key=lambda m: -memory[m])  # largest first
