"""A forward that gradient checkpointing recomputes in the backward counts once in every aggregate.

summary() (and so the summary heatmap and first-nonfinite rows), log_to(), the statistics-over-steps figure and
the hooks' fired counts of a checkpointed run equal those of the same run without checkpointing.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from hookwidgets.core import Explorer
from hookwidgets.plots import stats_figure
from tests.conftest import hook_state
from tests.transformer_models import gpt2, token_ids


class Writer:
    """A stand-in for a TensorBoard SummaryWriter: what add_scalar was given."""

    def __init__(self) -> None:
        self.scalars: dict[tuple[str, int], float] = {}

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars[(tag, step)] = value


def _approx(rows: list[dict]) -> list[dict]:
    close = {"rel": 1e-5, "abs": 1e-6}  # the two runs may round differently (no cache with checkpoints)
    return [{k: pytest.approx(v, **close) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def aggregates(model: nn.Module, step) -> tuple[list[dict], dict, dict, list]:
    """summary() rows, log_to scalars, fired counts and the stats figure's points of two steps of ``step()``."""
    writer = Writer()
    with Explorer(model) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        ex.attach("", "global_forward_pre")
        log = ex.log_to(writer)
        for k in range(2):
            torch.manual_seed(k)  # dropout draws the same masks with and without checkpoints
            step()
        log.remove()
        fired = {(h.target, h.kind): h.fired for h in ex.own_hooks}
        records = [r for r in ex.captures.snapshot()[0] if r.stats is not None]
        target = records[0].path  # the first module to finish a forward
        figure = stats_figure([r for r in records if r.path == target and r.kind == "global_forward"])
        points = [v for line in figure.axes[0].lines for v in line.get_xydata().ravel().tolist()]
        return ex.summary(), writer.scalars, fired, points


@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers 5 renames gradient_checkpointing_enable
@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non-reentrant"])
def test_a_checkpointed_gpt2_gives_the_aggregates_of_the_same_run_without_checkpoints(reentrant):
    model = gpt2().train()
    ids = token_ids(batch=2, length=8)

    def step():
        model(ids, labels=ids).loss.backward()

    plain = aggregates(model, step)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    assert model.transformer.gradient_checkpointing
    state = hook_state(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # transformers: use_cache=True is incompatible with checkpoints
        checkpointed = aggregates(model, step)
    rows, scalars, fired, points = checkpointed
    assert any(r["path"] == "transformer.h.0.mlp.c_fc" and r["act_calls"] == 1 for r in rows)
    assert rows == _approx(plain[0])
    assert scalars == pytest.approx(plain[1], rel=1e-5, abs=1e-6)
    assert fired == plain[2]
    assert points == pytest.approx(plain[3], rel=1e-5, abs=1e-6)
    assert hook_state(model) == state


class Segments(nn.Module):
    """Two blocks, each run through torch.utils.checkpoint (or not: the reference), then a head."""

    def __init__(self, reentrant: bool | None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)) for _ in range(2))
        self.head = nn.Linear(4, 2)
        self.reentrant = reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x) if self.reentrant is None else checkpoint(block, x, use_reentrant=self.reentrant)
        return self.head(x)


@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non-reentrant"])
def test_torch_checkpoint_segments_give_the_aggregates_of_the_same_model_without_them(reentrant):
    x = torch.randn(3, 4, requires_grad=True)
    found = []
    for mode in (None, reentrant):
        model = Segments(mode)
        with set_checkpoint_early_stop(False):  # the whole segment is recomputed: every hook fires again
            found.append(aggregates(model, lambda model=model: model(x).pow(2).sum().backward()))
    plain, checkpointed = found
    assert checkpointed[0] == _approx(plain[0])
    assert checkpointed[1] == pytest.approx(plain[1], rel=1e-5, abs=1e-6)
    assert checkpointed[2] == plain[2]
    assert checkpointed[3] == pytest.approx(plain[3], rel=1e-5, abs=1e-6)
