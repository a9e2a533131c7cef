"""The Training panel: update ratios of watched optimizers and a DDP model's buckets, ranks and ready order."""

from __future__ import annotations

import gc
import json
import weakref

import pytest
import torch
import torch.distributed as dist
from ipywidgets.widgets.widget import _remove_buffers
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from hookwidgets import HookExplorer
from hookwidgets.distributed import DDPInspector
from hookwidgets.widget import live
from tests.conftest import hook_state, optimizer_hook_state

from ._messages import in_cell

PNG = b"\x89PNG\r\n\x1a\n"


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def _loop(model: nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    """The user's own training loop: no explorer run."""
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        model(torch.randn(5, 4, generator=data)).sum().backward()
        opt.step()


def test_the_panel_is_hidden_while_nothing_is_watched(ipython):
    model = _model()
    with HookExplorer(model, example_inputs=torch.randn(2, 4)) as ex:
        view = ex.view
        assert view.training == {"visible": False, "ratios": None, "ddp": None, "step": None}
        ex.attach("0", "forward")
        ex.run(target=0)
        in_cell(ipython, lambda: _loop(model, torch.optim.SGD(model.parameters(), lr=0.1), 2))  # nobody watches it
        assert view.training["visible"] is False


def test_update_ratios_reach_the_panel_as_png_and_the_monitors_own_values(ipython):
    model = _model()
    # One group barely moves, the other jumps: both far from 1e-3, so both are flagged.
    opt = torch.optim.SGD([{"params": model[0].parameters(), "lr": 1e-8}, {"params": model[2].parameters(), "lr": 1.0}])
    with HookExplorer(model) as ex:
        view = ex.view
        monitor = ex.watch_optimizer(opt)
        ratios = view.training["ratios"]
        assert view.training["visible"] is True and view.training["ddp"] is None
        assert ratios["rows"] == [] and ratios["png"] is None and "No update ratios yet" in ratios["message"]

        in_cell(ipython, lambda: _loop(model, opt, 3))  # the cell's end: one full update
        ratios = view.training["ratios"]
        assert ratios["png"][:8] == PNG and ratios["message"] == ""
        newest = [r for r in monitor.records if r["step"] == 2]
        assert [row["param"] for row in ratios["rows"]] == [n for n, _ in model.named_parameters()]
        for row, record in zip(ratios["rows"], newest, strict=True):
            assert row["step"] == 2 and row["optimizer"] == "SGD"
            for key in ("param", "ratio", "update_norm", "weight_norm", "lr"):
                assert row[key] == record[key]
        flags = {row["param"]: row["flag"] for row in ratios["rows"]}
        assert flags == {"0.weight": "low", "0.bias": "low", "2.weight": "high", "2.bias": "high"}
        assert ratios["flagged"] == 4 and (ratios["low"], ratios["high"]) == (1e-5, 1e-1)
        assert view.status["message"].startswith("optimizer step 3: your cell finished")

        # the chart travels as a binary buffer, never inside the JSON state
        state, paths, buffers = _remove_buffers(view.get_state())
        json.dumps(state)
        assert bytes(buffers[paths.index(["training", "ratios", "png"])]) == ratios["png"]


def test_a_diverged_parameter_is_flagged_nonfinite_and_an_all_zero_weight_undefined(ipython):
    model = _model()
    with torch.no_grad():
        model[0].bias.zero_()  # all zero before the first step: an update, but no ratio to it
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with HookExplorer(model) as ex:
        view = ex.view
        ex.watch_optimizer(opt)
        in_cell(ipython, lambda: _loop(model, opt, 1))
        flags = {row["param"]: row["flag"] for row in view.training["ratios"]["rows"]}
        assert flags["0.bias"] == "undefined" and "nonfinite" not in flags.values()
        with torch.no_grad():
            model[2].weight[0, 0] = float("nan")  # the training diverged in the last layer
        in_cell(ipython, lambda: _loop(model, opt, 1))
        rows = view.training["ratios"]["rows"]
        assert {row["param"]: row["flag"] for row in rows}["2.weight"] == "nonfinite"
        json.dumps(rows, allow_nan=False)  # NaN norms travel as strings


def test_close_removes_the_monitors_and_the_live_hooks_exactly():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before, modules = optimizer_hook_state(opt), hook_state(model)
    ex = HookExplorer(model)
    ex.view  # noqa: B018
    ex.watch_optimizer(opt)
    ex.watch_optimizer(opt, scope="global")  # replaced: torch's global dicts hold its hooks now
    _loop(model, opt, 1)
    assert optimizer_hook_state(opt) != before
    ex.close()
    assert optimizer_hook_state(opt) == before and hook_state(model) == modules


def test_a_dropped_explorer_with_a_view_frees_the_model_and_its_step_hooks():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # the user keeps the optimizer
    before = optimizer_hook_state(opt)
    ex = HookExplorer(model)
    ex.view  # noqa: B018
    ex.watch_optimizer(opt)
    _loop(model, opt, 1)
    ref = weakref.ref(model)
    del ex, model
    gc.collect()
    assert ref() is None and optimizer_hook_state(opt) == before


def test_the_panel_follows_the_users_loop_on_the_images_schedule(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with HookExplorer(model) as ex:
        view = ex.view
        ex.watch_optimizer(opt)  # no module hook: the optimizer's steps are what the loop signals
        _loop(model, opt, 2)  # the loop starts: counts and status are pushed, the images wait their turn
        assert view.status["state"] == "live" and view.status["message"].startswith("optimizer step 1:")
        assert view.training["ratios"]["rows"] == []
        clock[0] += live.PLOT_INTERVAL_S + 0.1  # the images' turn, but not yet 3% of the loop for a first drawing
        _loop(model, opt, 1)
        assert view.training["ratios"]["rows"] == []
        clock[0] += live.FIRST_PLOT_COST_S / live.MAX_SHARE  # its expected cost is 3% of the loop by now
        _loop(model, opt, 1)
        rows = view.training["ratios"]["rows"]
        assert {row["step"] for row in rows} == {3} and view.training["ratios"]["png"][:8] == PNG
        assert view.status["state"] == "live"


def test_several_optimizers_are_labelled_each_with_its_newest_step(ipython):
    model = _model()
    first = torch.optim.SGD(model[0].parameters(), lr=0.01)
    second = torch.optim.SGD(model[2].parameters(), lr=0.01)
    with HookExplorer(model) as ex:
        view = ex.view
        ex.watch_optimizer(first)
        ex.watch_optimizer(second)
        in_cell(ipython, lambda: (_loop(model, first, 2), _loop(model, second, 1)))
        ratios = view.training["ratios"]
        assert ratios["optimizers"] == ["SGD #1", "SGD #2"]
        assert [(row["optimizer"], row["param"], row["step"]) for row in ratios["rows"]] == [
            ("SGD #1", "0.weight", 1),
            ("SGD #1", "0.bias", 1),
            ("SGD #2", "2.weight", 0),
            ("SGD #2", "2.bias", 0),
        ]


class Gated(nn.Module):
    """A parameter whose name matplotlib would parse as mathtext (and fail on) if it were not escaped."""

    NAME = "$\\frac{a$"

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.register_parameter(self.NAME, nn.Parameter(torch.ones(2)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * getattr(self, self.NAME)


def test_a_parameter_named_like_mathtext_is_drawn_and_listed_as_written(ipython):
    torch.manual_seed(0)
    model = Gated()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with HookExplorer(model) as ex:
        ex.view  # noqa: B018
        ex.watch_optimizer(opt)
        in_cell(ipython, lambda: _loop(model, opt, 2))
        ratios = ex.view.training["ratios"]
        assert Gated.NAME in [row["param"] for row in ratios["rows"]]
        assert ratios["png"][:8] == PNG and ratios["message"] == ""


def test_show_ddp_refuses_what_is_not_ddp_records_and_names_the_fix(tmp_path):
    with HookExplorer(_model()) as ex:
        with pytest.raises(TypeError, match=r"got NoneType \(gather\(\) returns None on ranks other than dst\)"):
            ex.show_ddp(None)
        with pytest.raises(ValueError, match=r"DDP record 0 \(bucket\) lacks \['numel'.*DDPInspector.load"):
            ex.show_ddp([{"kind": "bucket", "step": 0, "rank": 0, "bucket": 0}])
        with pytest.raises(FileNotFoundError, match="no log dir"):
            ex.show_ddp(tmp_path / "missing")
        assert ex.view.training["visible"] is False


@pytest.fixture
def one_rank(tmp_path):
    """A gloo process group of one rank in this process (file:// rendezvous in tmp_path)."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _post_hooks(model: nn.Module) -> dict:
    return {n: list((p._post_accumulate_grad_hooks or {}).items()) for n, p in model.named_parameters()}


def test_a_watched_ddp_model_shows_its_buckets_ranks_and_ready_order(ipython, one_rank, tmp_path):
    model = _model()
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    before_params, before_opt = _post_hooks(model), optimizer_hook_state(opt)
    ex = HookExplorer(ddp)
    view = ex.view
    insp = ex.watch_ddp(log_dir=tmp_path / "logs")
    assert view.training["ddp"]["message"].startswith("No DDP records yet")
    in_cell(ipython, lambda: _loop(ddp, opt, 2))
    shown = view.training["ddp"]
    assert view.training["visible"] is True and view.training["ratios"] is None
    assert shown["source"] == "this process: rank 0 of 1" and shown["ranks"] == [0] and shown["steps"] == 2
    assert shown["buckets_png"][:8] == PNG and shown["ranks_png"][:8] == PNG and shown["message"] == ""
    ready = shown["ready"]
    newest = [r for r in insp.ready_order if r["step"] == ready["step"]]
    # the panel names parameters as the explorer's tree does (the wrapper's "module.0.weight"); the
    # inspector's own records keep ddp.module's names ("0.weight")
    assert ready["rank"] == 0 and [row["param"] for row in ready["rows"]] == ["module." + r["param"] for r in newest]
    assert {row["param"] for row in ready["rows"]} == {n for n, _ in ddp.named_parameters()}
    assert {r["param"] for r in newest} == {n for n, _ in model.named_parameters()}
    assert {path for path, _ in ddp.named_modules()} >= {row["param"].rpartition(".")[0] for row in ready["rows"]}
    ex.watch_optimizer(opt)
    in_cell(ipython, lambda: _loop(ddp, opt, 1))
    ratio_names = {row["param"] for row in view.training["ratios"]["rows"]}
    assert ratio_names == {row["param"] for row in view.training["ddp"]["ready"]["rows"]}

    # what a notebook that launched the ranks itself does: read their log dir back
    ex.show_ddp(DDPInspector.load(tmp_path / "logs", records=None))
    loaded = view.training["ddp"]
    assert loaded["source"].startswith("records passed to show_ddp(): 3 bucket records from rank 0")
    assert loaded["steps"] == 3 and loaded["buckets_png"][:8] == PNG
    assert [row["param"] for row in loaded["ready"]["rows"]] == [row["param"] for row in ready["rows"]]
    ex.show_ddp(tmp_path / "logs")
    assert view.training["ddp"]["source"].startswith(f"log dir {tmp_path / 'logs'}")
    ex.show_ddp(DDPInspector.load(tmp_path / "logs"))  # bucket records only: the panel says how to get the rest
    assert view.training["ddp"]["ready"]["rows"] == [] and "records=None" in view.training["ddp"]["message"]

    ex.close()
    assert _post_hooks(model) == before_params and optimizer_hook_state(opt) == before_opt
    with pytest.raises(RuntimeError, match="closed"):
        ex.show_ddp(tmp_path / "logs")


def test_a_ddp_watch_made_before_the_view_is_shown_once_the_view_opens(one_rank):
    ddp = DDP(_model())
    with HookExplorer(ddp) as ex:
        insp = ex.watch_ddp()
        assert ex.ddp_inspector is insp
        shown = ex.view.training["ddp"]
        assert ex.view.training["visible"] is True and shown["source"] == "this process: rank 0 of 1"
