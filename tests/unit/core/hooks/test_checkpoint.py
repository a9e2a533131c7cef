"""A forward recomputed by torch.utils.checkpoint is a record of the original call, marked recompute=True.

In the backward, a checkpointed segment runs its forward again (its modules' forward hooks fire again): those
firings carry the step and call of the forward they repeat, count no new call and begin no step. With
``use_reentrant=True`` the original forward runs without grad and the gradients come from the recomputed
one, in an inner backward: gradient records still carry the original call.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from hookwidgets.core import Explorer

BLOCK_KINDS = ["forward_pre", "forward", "backward_pre", "backward", "grad"]
SEGMENTS_TOLD = hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks")
"""The explorer tells a non-reentrant checkpoint's segments apart through this reader, which torch 2.3 lacks (its
recomputed forward firings are then numbered call 0, and ex.diagnostics says so: test_torch_apis.py)."""
NON_REENTRANT_TOLD = pytest.param(
    False, id="non-reentrant", marks=pytest.mark.skipif(not SEGMENTS_TOLD, reason="this torch cannot tell segments")
)


class Blocks(nn.Module):
    """``block`` called ``calls`` times in a row, each call checkpointed (or not: the reference), then ``head``."""

    def __init__(self, calls: int, reentrant: bool | None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
        self.head = nn.Linear(4, 2)
        self.calls, self.reentrant = calls, reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.calls):
            x = self.block(x) if self.reentrant is None else checkpoint(self.block, x, use_reentrant=self.reentrant)
        return self.head(x)


def step_input(step: int) -> torch.Tensor:
    torch.manual_seed(10 + step)
    return torch.randn(3, 4, requires_grad=True)


def by_hand(calls: int, steps: int) -> dict[tuple[int, int], dict[str, torch.Tensor]]:
    """Each call's input, output and output gradient, by (step, call), from the model without checkpoints."""
    model, found = Blocks(calls, reentrant=None), {}
    for step in range(1, steps + 1):
        x, seen = step_input(step), []
        model.zero_grad()
        for _ in range(calls):
            out = model.block(x)
            out.retain_grad()
            seen.append((x, out))
            x = out
        model.head(x).pow(2).sum().backward()
        for call, (inp, out) in enumerate(seen):
            found[(step, call)] = {"input": inp.detach(), "output": out.detach(), "grad_output": out.grad}
    return found


def run(model: Blocks, ex: Explorer, steps: int) -> None:
    for step in range(1, steps + 1):
        model(step_input(step)).pow(2).sum().backward()
        assert ex.step == step  # the recompute began no step


def expected_labels(calls: int, steps: int) -> tuple[list, list]:
    """(forward kinds, gradient kinds): each call's original firing, then (in the backward, last call first)
    its recompute; the gradients once per call, last call first."""
    forward, gradient = [], []
    for step in range(1, steps + 1):
        forward += [(step, call, False) for call in range(calls)]
        forward += [(step, call, True) for call in reversed(range(calls))]
        gradient += [(step, call, False) for call in reversed(range(calls))]
    return forward, gradient


@pytest.mark.parametrize("reentrant", [pytest.param(True, id="reentrant"), NON_REENTRANT_TOLD])
@pytest.mark.parametrize(("calls", "steps"), [(1, 2), (2, 2)], ids=["checkpointed-in-two-steps", "twice-per-step"])
def test_a_recomputed_forward_is_a_record_of_the_original_call(reentrant, calls, steps):
    expected = by_hand(calls, steps)
    model = Blocks(calls, reentrant)
    with Explorer(model) as ex, set_checkpoint_early_stop(False):  # the whole segment is recomputed
        ex.attach("block", BLOCK_KINDS)
        ex.attach("block.0", ["forward", "grad"])
        run(model, ex, steps)
        forward, gradient = expected_labels(calls, steps)
        for target, kinds in (("block", BLOCK_KINDS), ("block.0", ["forward", "grad"])):
            for kind in kinds:
                labels = [(r.step, r.call, r.recompute) for r in ex.captures[target][kind]]
                assert labels == (forward if kind.startswith("forward") else gradient), f"{kind} on {target!r}"
        assert [(e.step, e.call, e.recompute) for e in ex.timeline if e.path == "block" and e.kind == "forward"] == (
            forward
        )
        for record in ex.captures["block"]["forward"]:  # a recompute computes the same values again
            torch.testing.assert_close(record.tensor, expected[(record.step, record.call)]["output"])
        for record in ex.captures["block"]["forward_pre"]:
            torch.testing.assert_close(record.tensor, expected[(record.step, record.call)]["input"])
        for kind, name in (("grad", "grad_output"), ("backward_pre", "grad_output.0"), ("backward", "grad_output.0")):
            for record in ex.captures["block"][kind]:
                want = expected[(record.step, record.call)]["grad_output"]
                torch.testing.assert_close(record.tensors[name], want, msg=f"{kind} {record.step, record.call}")
        assert all(info.last_error is None for info in ex.hooks)


@pytest.mark.parametrize("reentrant", [pytest.param(True, id="reentrant"), NON_REENTRANT_TOLD])
def test_a_recompute_stopped_early_labels_the_firings_it_made(reentrant):
    # torch stops a non-reentrant recompute once it has every tensor it needs: later hooks do not fire again
    model = Blocks(2, reentrant)
    with Explorer(model) as ex:
        ex.attach("block", "forward_pre")
        ex.attach("block.2", "forward")
        run(model, ex, 2)
        for target, kind in (("block", "forward_pre"), ("block.2", "forward")):
            records = ex.captures[target][kind]
            originals = [(r.step, r.call) for r in records if not r.recompute]
            assert originals == [(1, 0), (1, 1), (2, 0), (2, 1)]
            again = [(r.step, r.call) for r in records if r.recompute]
            assert set(again) <= set(originals) and len(again) == len(set(again))
            assert [s for s, _ in again] == sorted(s for s, _ in again)  # each step's recompute in its backward
        assert len([r for r in ex.captures["block"]["forward_pre"] if r.recompute]) == 4  # it begins the segment


@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non-reentrant"])
def test_a_checkpointed_model_begins_no_step_when_recomputed(reentrant):
    inner = Blocks(1, reentrant=None)
    with Explorer(inner) as ex, set_checkpoint_early_stop(False):
        ex.attach("", ["forward", "grad"])
        ex.attach("block.0", "forward")
        for step in (1, 2):
            checkpoint(inner, step_input(step), use_reentrant=reentrant).sum().backward()
            assert ex.step == step
        assert [(r.step, r.call, r.recompute) for r in ex.captures[""]["forward"]] == [
            (1, 0, False),
            (1, 0, True),
            (2, 0, False),
            (2, 0, True),
        ]
        assert [(r.step, r.call) for r in ex.captures[""]["grad"]] == [(1, 0), (2, 0)]
        assert [(r.step, r.call, r.recompute) for r in ex.captures["block.0"]["forward"]] == [
            (1, 0, False),
            (1, 0, True),
            (2, 0, False),
            (2, 0, True),
        ]


def test_recompute_is_said_in_the_export_the_print_action_and_the_records_repr(tmp_path, capsys):
    model = Blocks(1, reentrant=False)
    with Explorer(model) as ex, set_checkpoint_early_stop(False):
        ex.attach("block", "forward")
        ex.attach("block.0", "forward", action="print")
        run(model, ex, 1)
        original, again = ex.captures["block"]["forward"]
        assert "recompute=True" in repr(again) and "recompute=False" in repr(original)
        path = ex.export(tmp_path / "caps.safetensors")
    sidecar = json.loads((tmp_path / "caps.safetensors.json").read_text())
    assert [(r["step"], r["call"], r["recompute"]) for r in sidecar["records"]] == [(1, 0, False), (1, 0, True)]
    assert path.exists()
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "[step 1] block.0 forward call 0",
        "[step 1] block.0 forward call 0 (recompute)",
    ]


class SharedAct(nn.Module):
    """``block`` (with one Tanh used twice) called twice a step, each call checkpointed."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.act = nn.Tanh()
        self.lin1, self.lin2 = nn.Linear(4, 4), nn.Linear(4, 4)
        self.reentrant = reentrant

    def block(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin2(self.act(self.lin1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(2):
            x = checkpoint(self.block, x, use_reentrant=self.reentrant)
        return x


@pytest.mark.parametrize("reentrant", [pytest.param(True, id="reentrant"), NON_REENTRANT_TOLD])
@pytest.mark.parametrize("kind", ["forward_pre", "forward", "grad", "backward_pre", "backward"])
def test_each_kind_alone_names_the_recomputed_call(reentrant, kind):
    # the recompute's first firing alone tells which segment is recomputed: a forward hook fires after the node
    # that set the recompute off (made in its call), a pre-hook before it
    model = Blocks(2, reentrant)
    with Explorer(model) as ex, set_checkpoint_early_stop(False):
        ex.attach("block", kind)
        run(model, ex, 2)
        forward, gradient = expected_labels(2, 2)
        labels = [(r.step, r.call, r.recompute) for r in ex.captures["block"][kind]]
        assert labels == (forward if kind.startswith("forward") else gradient)


@pytest.mark.parametrize("reentrant", [pytest.param(True, id="reentrant"), NON_REENTRANT_TOLD])
@pytest.mark.parametrize("kind", ["forward_pre", "forward"])
def test_a_module_called_twice_in_each_checkpointed_segment_keeps_its_calls_in_the_recompute(reentrant, kind):
    model = SharedAct(reentrant)
    with Explorer(model) as ex, set_checkpoint_early_stop(False):
        ex.attach("act", kind)
        model(step_input(1)).sum().backward()
        labels = [(r.step, r.call, r.recompute) for r in ex.captures["act"][kind]]
        # four calls in the forward; the backward recomputes the second segment (calls 2, 3), then the first
        assert labels == [(1, c, False) for c in range(4)] + [(1, c, True) for c in (2, 3, 0, 1)]
