"""package_report: what each module of a model became when packaged, from the exporter's hooks."""

from __future__ import annotations

import io

import pytest
import torch
from torch.package import PackageImporter

from hookwidgets.core import default_intern, package_report
from tests.unit.core.monitors._pkgmodel.net import ScaledNet

NET = "tests.unit.core.monitors._pkgmodel.net"
SCALES = "tests.unit.core.monitors._pkgmodel.scales"


def _actions(report) -> dict[str, str]:
    return {r["module"]: r["action"] for r in report.rows}


def test_default_patterns_intern_own_package_and_extern_torch():
    report = package_report(ScaledNet(), mock="numpy")
    actions = _actions(report)
    assert report.ok and report.error is None
    assert report.modules("intern") == ["<model.model.pkl>", NET, SCALES]
    assert report.modules("mock") == ["numpy"]
    assert {"torch", "torch.nn", "torch.nn.modules.linear", "builtins"} <= set(report.modules("extern"))
    assert "broken" not in actions.values()
    why = {r["module"]: r["why"] for r in report.rows}
    assert why[NET] == "intern pattern 'tests.**'" and why["numpy"] == "mock pattern 'numpy'"
    assert why["torch.nn"] == "torch: always extern" and why["builtins"] == "standard library: always extern"
    assert report.loaded.startswith("<torch_package_") and report.loaded.endswith(f">.{NET}.ScaledNet")
    assert report.patterns["intern"] == default_intern(ScaledNet()) == ["tests", "tests.**"]


def test_unmatched_dependency_is_reported_not_raised():
    report = package_report(ScaledNet())
    assert not report.ok and "numpy" in report.error
    broken = [r for r in report.rows if r["action"] == "broken"]
    assert broken == [{"module": "numpy", "action": "broken", "why": broken[0]["why"]}]
    assert "did not match against any action pattern" in broken[0]["why"]
    assert _actions(report)[NET] == "intern"  # what would have happened, from the dependency graph
    assert report.loaded is None


def test_denied_module_is_broken_with_its_pattern():
    report = package_report(ScaledNet(), mock="numpy", deny=SCALES)
    assert not report.ok
    row = next(r for r in report.rows if r["module"] == SCALES)
    assert row["action"] == "broken" and "denied" in row["why"] and f"deny pattern '{SCALES}'" in row["why"]


def test_narrower_patterns_win_over_intern():
    report = package_report(ScaledNet(), mock=["numpy", SCALES], extern=["torch", "torch.**", "numpy.**"])
    assert report.ok
    assert _actions(report)[SCALES] == "mock" and _actions(report)[NET] == "intern"


def test_extern_pattern_and_file_output(tmp_path):
    path = tmp_path / "net.pt"
    report = package_report(ScaledNet(), extern=["torch", "torch.**", "numpy", SCALES], path=path)
    assert report.ok and report.path == str(path) and report.nbytes == path.stat().st_size > 0
    assert _actions(report)["numpy"] == "extern" and _actions(report)[SCALES] == "extern"
    torch.manual_seed(0)
    model = ScaledNet()
    loaded = PackageImporter(str(path)).load_pickle("model", "model.pkl")
    x = torch.ones(1, 2)
    assert loaded(x).shape == model(x).shape == (1, 2)


def test_load_false_skips_the_reload():
    report = package_report(ScaledNet(), mock="numpy", load=False)
    assert report.ok and report.loaded is None and report.nbytes > 0


def test_repr_is_a_text_table():
    text = repr(package_report(ScaledNet(), mock="numpy"))
    lines = text.splitlines()
    assert lines[0].split() == ["module", "action", "why"]
    assert any(line.split()[:2] == [NET, "intern"] for line in lines)
    assert lines[-1].startswith("packaged, ") and "reloaded as" in lines[-1]
    failed = repr(package_report(ScaledNet()))
    assert "packaging failed:" in failed and "numpy" in failed


def test_not_a_module_names_what_was_passed():
    with pytest.raises(TypeError, match="got BytesIO"):
        package_report(io.BytesIO())
