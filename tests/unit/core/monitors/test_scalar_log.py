"""ex.log_to(writer): the summary's statistics in a TensorBoard event file, under "{field}/{path}" at each step,
from the user's own loop and with no widget; its handle (and close()) stops it and leaves the model as found."""

from __future__ import annotations

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn
from torch.utils.tensorboard import SummaryWriter

from hookwidgets.core import Explorer
from tests.conftest import hook_state

STATISTICS = ("norm", "mean", "std", "zero_fraction", "nan", "inf")


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def train(model: nn.Module, steps: int) -> None:
    """The user's own loop: forward, backward, SGD step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(5, 4)).pow(2).sum().backward()
        opt.step()


class Scalars:
    """A writer that is only what log_to() needs: add_scalar(tag, value, step), kept in order."""

    def __init__(self) -> None:
        self.written: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.written.append((tag, value, step))


def expected(rows: list[dict], every: int = 1) -> dict[tuple[str, int], float]:
    """(tag, step) -> value for every statistic of ``rows`` that log_to writes."""
    found = {}
    for row in rows:
        if row["step"] % every:
            continue
        path = row["path"] or "(model)"
        for side in ("act", "grad"):
            for statistic in STATISTICS:
                value = row.get(f"{side}_{statistic}")
                if value is not None:
                    found[(f"{side}_{statistic}/{path}", row["step"])] = value
    return found


def read_back(log_dir: str) -> dict[tuple[str, int], float]:
    """(tag, step) -> value of every scalar in the event files of ``log_dir``."""
    events = EventAccumulator(log_dir, size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    return {(tag, e.step): e.value for tag in events.Tags()["scalars"] for e in events.Scalars(tag)}


def test_a_summary_writer_gets_every_layers_statistics_at_each_step(tmp_path):
    model = mlp()
    before = hook_state(model)
    writer = SummaryWriter(str(tmp_path))
    with Explorer(model) as ex:
        log = ex.log_to(writer)
        assert [(h.target, h.kind, h.action) for h in ex.hooks] == [
            ("", "global_forward", "stats"),
            ("", "global_grad", "stats"),
        ]  # none were attached: it attaches what fills the whole summary, as wandb.watch hooks every layer
        train(model, 3)
        log.remove()
        rows = ex.summary()
        assert ex.hooks == [] and hook_state(model) == before  # its own hooks went with it
    writer.close()
    want = expected(rows)
    assert {tag for tag, _ in want} >= {"act_norm/(model)", "act_norm/0", "grad_norm/2", "grad_nan/1"}
    assert len(want) == 3 * 4 * 12  # steps × (model and its 3 layers) × statistics of both sides
    got = read_back(str(tmp_path))
    assert got.keys() == want.keys()
    assert all(got[key] == pytest.approx(want[key], rel=1e-6) for key in want)  # event files hold float32


def test_every_writes_only_the_steps_it_names_and_fields_only_those_columns():
    model = mlp()
    writer = Scalars()
    with Explorer(model) as ex:
        ex.log_to(writer, every=2, fields=["norm", "grad_zero_fraction"])
        train(model, 5)
        rows = ex.summary()
    assert {step for _, _, step in writer.written} == {2, 4}  # step 5's log ended with close() too
    assert {tag.split("/")[0] for tag, _, _ in writer.written} == {"act_norm", "grad_norm", "grad_zero_fraction"}
    want = {
        key: value
        for key, value in expected(rows, every=2).items()
        if key[0].split("/")[0] in ("act_norm", "grad_norm", "grad_zero_fraction")
    }
    assert {(tag, step): value for tag, value, step in writer.written} == want
    assert len(writer.written) == len(want)  # each once


def test_the_explorers_own_stats_hooks_are_what_it_writes():
    model = mlp()
    writer = Scalars()
    with Explorer(model) as ex:
        ex.attach("2", "forward", action="stats")
        ex.attach("0", "forward")  # a capture: no statistics
        with ex.log_to(writer):
            assert len(ex.hooks) == 2  # a stats hook is there: it attaches none
            ex.run(torch.randn(5, 4))  # runs are steps too
            train(model, 1)
    assert {tag for tag, _, _ in writer.written} == {f"act_{s}/2" for s in STATISTICS}
    assert {step for _, _, step in writer.written} == {1, 2}


def test_remove_and_close_stop_it_writing_the_step_still_open():
    model = mlp()
    writer = Scalars()
    ex = Explorer(model)
    log = ex.log_to(writer)
    train(model, 2)
    assert {step for _, _, step in writer.written} == {1}  # step 2 is over only once a later step or the log ends
    with log:
        pass
    assert {step for _, _, step in writer.written} == {1, 2}
    count = len(writer.written)
    log.remove()
    train(model, 1)
    assert len(writer.written) == count and not log.active
    ex.log_to(writer)
    train(model, 1)  # step 3: steps are counted while the explorer has hooks, and it had none meanwhile
    ex.close()
    assert {step for _, _, step in writer.written} == {1, 2, 3}


def test_a_new_log_to_the_same_writer_replaces_the_old_one(tmp_path):
    model = mlp()
    writer = Scalars()
    tensorboard = [SummaryWriter(str(tmp_path)), SummaryWriter(str(tmp_path))]  # two writers on one log dir
    with Explorer(model) as ex:
        first = ex.log_to(writer)
        second = ex.log_to(writer)  # a re-run cell: not two logs writing each value twice
        assert not first.active and second.active and len(ex.hooks) == 2
        third = ex.log_to(tensorboard[0])
        train(model, 1)
        fourth = ex.log_to(tensorboard[1])  # replaces the third, which writes the step still open as it goes
        assert second.active and not third.active and fourth.active
    for each in tensorboard:
        each.close()
    tags = [(tag, step) for tag, _, step in writer.written]
    assert len(tags) == len(set(tags)) == 4 * 12
    assert read_back(str(tmp_path)).keys() == set(tags)


def test_what_is_not_a_writer_and_a_bad_every_or_field_are_refused_with_the_fix():
    with Explorer(mlp()) as ex:
        with pytest.raises(TypeError, match=r"add_scalar\(tag, value, step\), which str lacks: pass a TensorBoard"):
            ex.log_to("runs/exp1")
        with pytest.raises(ValueError, match=r"every= is how many steps apart .* got 0: ex.log_to\(writer, every=10\)"):
            ex.log_to(Scalars(), every=0)
        with pytest.raises(ValueError, match=r"cannot write 'nrom': fields are statistics \(norm, mean"):
            ex.log_to(Scalars(), fields=["nrom"])
        assert ex.hooks == []  # nothing was left attached
