"""Module scopes of autograd nodes: pinned to hand-checked mappings and to an independent graph walk."""

from __future__ import annotations

import contextlib
import math
import threading
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._pytree import tree_leaves

from hookwidgets.core.graph.record import GraphRecorder, hidden_ops, record_graph
from tests.conftest import SharedBlock


class Block(nn.Module):
    """conv-bn-ReLU(inplace)-conv-bn, then ``F.relu(out + x)`` in the block's own forward."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


class ResidualCNN(nn.Module):
    """Stem, two residual blocks, pool, root-level ops, fc: every way a node can get its module."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.layer1 = nn.Sequential(Block(8), Block(8))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer1(self.stem(x))
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x * 2.0)


class HandAttention(nn.Module):
    """Single-head attention written out: q, k, v projections, softmax(q kᵀ / √d) v."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.q(x) @ self.k(x).transpose(-2, -1) / math.sqrt(x.shape[-1])
        return scores.softmax(dim=-1) @ self.v(x)


class TransformerBlock(nn.Module):
    """Pre-norm block: nn.MultiheadAttention, a hand-written attention, and a GELU feed-forward."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.hand = HandAttention(d)
        self.ff = nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.hand(self.norm2(x))
        return x + self.ff(x)


class Child(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.side: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.side  # uses a tensor its parent stashed, not an argument


class Parent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Linear(4, 4)
        self.child = Child()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.child.side = torch.sigmoid(self.pre(x))
        return self.child(x)


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.parent = Parent()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.parent(x)


def mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def walked_ops(output: object) -> Counter:
    """Op names reachable from the output's grad_fns, by a plain walk of next_functions (hidden nodes left out)."""
    todo = [t.grad_fn for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    seen, ops = set(), Counter()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        name = node.name().removeprefix("torch::autograd::")
        if name != "BackwardHookFunctionBackward":
            ops[name] += 1
        todo.extend(f for f, _ in node.next_functions if f is not None)
    return ops


def scopes(recording) -> dict[str, str]:
    return {n["id"]: n["module"] for n in recording.data()["nodes"]}


CASES = {
    "residual_cnn": (ResidualCNN, lambda: torch.randn(2, 3, 8, 8)),
    "mlp": (mlp, lambda: torch.randn(4, 6)),
    "transformer": (TransformerBlock, lambda: torch.randn(2, 5, 8)),
    "called_twice": (SharedBlock, lambda: torch.randn(3, 4)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_op_multiset_equals_an_independent_walk_from_the_outputs(case):
    torch.manual_seed(0)
    make, inputs = CASES[case]
    recording = record_graph(make(), inputs())
    ops = Counter(n["op"] for n in recording.data()["nodes"])
    assert ops == walked_ops(recording.output)
    assert sum(ops.values()) == len(recording)


def test_residual_cnn_scopes_match_the_hand_checked_mapping():
    model = ResidualCNN()
    got = scopes(record_graph(model, torch.randn(2, 3, 8, 8)))
    expected = {"/ViewBackward0#0": "", "/MulBackward0#0": "", "pool/MeanBackward1#0": "pool"}
    expected |= {"fc/AddmmBackward0#0": "fc", "fc/TBackward0#0": "fc"}  # TBackward0 is made inside F.linear
    expected |= {"stem.0/ConvolutionBackward0#0": "stem.0", "stem.1/NativeBatchNormBackward0#0": "stem.1"}
    expected |= {"stem.2/ReluBackward0#0": "stem.2"}
    for block in ("layer1.0", "layer1.1"):
        expected |= {
            f"{block}/AddBackward0#0": block,  # the residual add, in the block's own forward
            f"{block}/ReluBackward0#0": block,  # F.relu after it
            f"{block}.act/ReluBackward0#0": f"{block}.act",  # the in-place nn.ReLU
            f"{block}.conv1/ConvolutionBackward0#0": f"{block}.conv1",
            f"{block}.bn1/NativeBatchNormBackward0#0": f"{block}.bn1",
            f"{block}.conv2/ConvolutionBackward0#0": f"{block}.conv2",
            f"{block}.bn2/NativeBatchNormBackward0#0": f"{block}.bn2",
        }
    for name, _ in model.named_parameters():
        owner, _, attr = name.rpartition(".")
        expected[f"{owner}/AccumulateGrad#{attr}"] = owner
    assert got == expected


def test_accumulate_grad_nodes_name_their_parameters():
    model = ResidualCNN()
    recording = record_graph(model, torch.randn(2, 3, 8, 8))
    params = {n["param"]: n for n in recording.data()["nodes"] if n["op"] == "AccumulateGrad"}
    assert set(params) == {name for name, _ in model.named_parameters()}
    assert params["layer1.1.bn2.weight"]["id"] == "layer1.1.bn2/AccumulateGrad#weight"
    assert recording.node("fc/AccumulateGrad#bias").variable is model.fc.bias


def test_an_op_on_a_tensor_the_parent_stashed_belongs_to_the_parent():
    got = scopes(record_graph(Outer(), torch.randn(2, 4)))
    assert got["parent/SigmoidBackward0#0"] == "parent"  # made by the parent, used by the child
    assert got["parent.child/MulBackward0#0"] == "parent.child"
    assert got["parent.child.fc/AddmmBackward0#0"] == "parent.child.fc"
    assert got["parent.pre/AddmmBackward0#0"] == "parent.pre"


def test_a_module_called_twice_keeps_one_scope_and_ordinals_tell_the_calls_apart():
    recording = record_graph(SharedBlock(), torch.randn(3, 4))
    got = scopes(recording)
    assert {i for i in got if i.startswith("lin/")} == {
        "lin/AddmmBackward0#0",
        "lin/AddmmBackward0#1",
        "lin/TBackward0#0",
        "lin/TBackward0#1",
        "lin/AccumulateGrad#weight",
        "lin/AccumulateGrad#bias",
    }
    assert got["/TanhBackward0#0"] == ""
    # ordinal 0 is the first call: its output feeds tanh, whose output feeds call 1
    first = recording.node("lin/AddmmBackward0#0")
    tanh = recording.node("/TanhBackward0#0")
    assert tanh.next_functions[0][0] is first
    assert recording.outputs == ["lin/AddmmBackward0#1"]


def test_transformer_block_scopes_attention_internals_to_their_modules():
    got = scopes(record_graph(TransformerBlock(), torch.randn(2, 5, 8)))
    by_module = Counter(got.values())
    assert got["norm1/NativeLayerNormBackward0#0"] == "norm1"
    assert got["hand/SoftmaxBackward0#0"] == "hand"
    assert got["hand.q/AddmmBackward0#0"] == "hand.q" and got["hand/BmmBackward0#1"] == "hand"
    # everything F.multi_head_attention_forward does is attn's, out_proj's matmul included
    assert got["attn/AddmmBackward0#0"] == "attn" and got["attn/AccumulateGrad#in_proj_weight"] == "attn"
    assert got["attn.out_proj/AccumulateGrad#weight"] == "attn.out_proj"  # used, not called, by attn
    assert by_module["ff.1"] == 1 and got["ff.1/GeluBackward0#0"] == "ff.1"
    assert got["/AddBackward0#2"] == ""  # the three residual adds of the root


def test_ops_of_a_module_outside_the_model_belong_to_the_caller():
    helper = nn.Linear(4, 4)  # not a submodule: its calls are no scope of this model

    class Uses(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(helper(x))

    got = scopes(record_graph(Uses(), torch.randn(2, 4)))
    assert got["/AddmmBackward0#0"] == ""
    assert got["inner.0/AddmmBackward0#0"] == "inner.0"


def test_a_child_exception_caught_by_the_parent_leaves_the_scope_stack_right():
    class Fails(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.partial = x * 3  # an op before the failure
            raise ValueError("no")

    class Catches(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fails = Fails()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with contextlib.suppress(ValueError):
                self.fails(x)
            return self.fc(x).exp()

    got = scopes(record_graph(Catches(), torch.randn(2, 4)))
    assert got["/ExpBackward0#0"] == ""
    assert got["fc/AddmmBackward0#0"] == "fc"


def test_backward_hook_nodes_are_hidden_and_spliced_through():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    plain = record_graph(model, x).data()
    handle = model[1].register_full_backward_hook(lambda m, gi, go: None)
    try:
        hooked = record_graph(model, x)
    finally:
        handle.remove()
    assert "BackwardHookFunctionBackward" in str(_all_names(hooked.output))  # torch did add them
    data = hooked.data()
    assert [n["id"] for n in data["nodes"]] == [n["id"] for n in plain["nodes"]]
    pairs = {(e["src"], e["dst"]) for e in data["edges"]}
    assert pairs == {(e["src"], e["dst"]) for e in plain["edges"]}
    assert ("1/ReluBackward0#0", "0/AddmmBackward0#0") in pairs


def _all_names(output: torch.Tensor) -> list[str]:
    todo, names, seen = [output.grad_fn], [], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(node.name())
        todo.extend(f for f, _ in node.next_functions)
    return names


def test_ops_inside_hidden_ops_take_no_ordinal_and_are_hidden():
    torch.manual_seed(0)

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * 0.5

    model, x = Scaled(), torch.randn(2, 4)
    before = [n["id"] for n in record_graph(model, x).data()["nodes"]]

    def edit(module, args, out):  # an explorer edit: runs after the module's scope has ended
        with hidden_ops():
            return out * 2.0

    handle = model.fc.register_forward_hook(edit)
    try:
        recording = record_graph(model, x)
    finally:
        handle.remove()
    assert [n["id"] for n in recording.data()["nodes"]] == before
    assert recording.node("/MulBackward0#0").next_functions[0][0].name() == "MulBackward0"  # the hidden edit
    assert ("/MulBackward0#0", "fc/AddmmBackward0#0") in {(e["src"], e["dst"]) for e in recording.data()["edges"]}


def test_ids_are_the_same_on_every_forward_of_a_long_lived_recorder():
    model, seen = ResidualCNN(), []
    recorder = GraphRecorder(model, saved_tensors=False, on_graph=seen.append)
    recorder.start()
    try:
        for _ in range(3):
            model(torch.randn(2, 3, 8, 8)).sum()
    finally:
        recorder.stop()
    assert len(seen) == 3
    assert set(seen[0].node_ids.values()) == set(seen[1].node_ids.values()) == set(seen[2].node_ids.values())
    first, last = seen[0].node("layer1.1/AddBackward0#0"), seen[2].node("layer1.1/AddBackward0#0")
    assert first is not last and first.name() == last.name() == "AddBackward0"


def test_a_hook_placed_by_id_at_each_forward_end_fires_in_that_backward():
    torch.manual_seed(0)
    model, fired, expected = ResidualCNN(), [], []

    def place(recording):  # what a persistent node hook does at the end of every forward
        node = recording.node("layer1.0/AddBackward0#0")
        node.register_prehook(lambda grad_outputs: fired.append(grad_outputs[0].clone()))

    def reference(module, args, out):  # the residual add passes its gradient unchanged to bn2's output
        out.register_hook(expected.append)

    handle = model.layer1[0].bn2.register_forward_hook(reference)
    recorder = GraphRecorder(model, saved_tensors=False, on_graph=place)
    recorder.start()
    try:
        for _ in range(2):
            model(torch.randn(2, 3, 8, 8)).pow(2).sum().backward()
    finally:
        recorder.stop()
        handle.remove()
    assert len(fired) == len(expected) == 2
    assert torch.equal(fired[0], expected[0]) and torch.equal(fired[1], expected[1])
    assert not torch.equal(fired[0], fired[1])  # each backward's own gradient


def test_forwards_overlapping_on_threads_each_get_the_graph_a_forward_alone_gets():
    """Sequence numbers are per thread: each thread's forward is scoped by its own log, hidden ops included."""
    torch.manual_seed(0)
    model, x, workers = ResidualCNN().eval(), torch.randn(2, 3, 8, 8), 3
    meet, others_done = threading.Barrier(workers), threading.Event()
    finished = threading.Semaphore(0)

    def wait_for_all(module, args):  # every worker's forward is past the stem when any goes on
        if threading.current_thread().name.startswith("worker"):
            meet.wait(timeout=60)

    def hidden_edit(module, args, out):  # an explorer-style edit, on one thread, held open while the others run
        if threading.current_thread().name != "worker-edit":
            return None
        with hidden_ops():
            doubled = out * 2.0
            assert others_done.wait(timeout=60)  # the other forwards make their nodes meanwhile
        return doubled

    graphs: dict[str, dict] = {}

    def keep(recording):
        graphs[threading.current_thread().name] = recording.data()

    handles = [
        model.layer1[0].register_forward_pre_hook(wait_for_all),
        model.layer1[1].register_forward_hook(hidden_edit),
    ]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            model(x)
        except BaseException as exc:
            errors.append(exc)
        finally:
            if threading.current_thread().name != "worker-edit":
                finished.release()

    def release_edit() -> None:
        for _ in range(workers - 1):
            finished.acquire(timeout=60)
        others_done.set()

    recorder = GraphRecorder(model, on_graph=keep)
    recorder.start()
    try:
        model(x)  # alone, on this thread
        alone = graphs.pop(threading.current_thread().name)
        threads = [threading.Thread(target=work, name=f"worker-{i}") for i in range(workers - 1)]
        threads.append(threading.Thread(target=work, name="worker-edit"))
        threads.append(threading.Thread(target=release_edit))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        recorder.stop()
        for handle in handles:
            handle.remove()
    assert not errors, errors
    assert sorted(graphs) == ["worker-0", "worker-1", "worker-edit"]
    assert len(alone["nodes"]) == 40
    for name, data in graphs.items():
        assert data == alone, f"the graph recorded on {name} differs from the one of a forward alone"


@pytest.mark.parametrize("case", list(CASES))
def test_without_torchs_private_sequence_reader_the_probe_gives_the_same_ids_and_scopes(case, monkeypatch):
    """The fallback for a torch without ``_get_sequence_nr`` (one probe node per mark) scopes every node alike."""
    import hookwidgets.core._torch as torch_apis
    import hookwidgets.core.graph.record as graph_module
    import hookwidgets.core.model.scope as scope_module

    torch.manual_seed(0)
    make, inputs = CASES[case]
    model, x = make(), inputs()
    expected = scopes(record_graph(model, x))
    monkeypatch.setattr(scope_module, "next_sequence_nr", torch_apis._probe_sequence_nr)
    monkeypatch.setattr(graph_module, "next_sequence_nr", torch_apis._probe_sequence_nr)
    assert scopes(record_graph(model, x)) == expected
    # Under inference mode the probe can make no node: the forward runs, and the recording says why it is empty.
    with torch.inference_mode(), pytest.raises(ValueError, match=r"ran under torch.inference_mode\(\)"):
        record_graph(model, x)
