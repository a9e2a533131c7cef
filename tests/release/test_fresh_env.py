"""The wheel installed as users get it (torch first, then the wheel without extras) imports light, runs an explorer
from attach to close, and runs the README's first example."""

from __future__ import annotations

from pathlib import Path

import pytest

import hookwidgets
from tests.readme import first_example

SMOKE = Path(__file__).with_name("_smoke.py")


@pytest.mark.timeout(900)  # the first test to ask for the fresh environment waits for it to be built (~1 min)
def test_the_installed_wheel_imports_light_and_an_explorer_attaches_runs_exports_and_closes(fresh_env, tmp_path):
    report = fresh_env.run_json(SMOKE, cwd=tmp_path)
    assert report["pulled_by_import"] == [], "importing hookwidgets imported these; import them where they are used"
    assert Path(report["file"]).is_relative_to(fresh_env.root)  # the wheel's copy, not the repository's
    assert report["version"] == report["installed_version"] == hookwidgets.__version__
    assert report["fired"] == {"forward": 1, "backward": 1, "grad": 1} and report["attached"]
    assert report["exported"] == [["0", "forward"], ["0", "backward"], ["0", "grad"]]
    assert report["as_found"], "closing the explorer left the model's or torch's hook dicts changed"


@pytest.mark.timeout(900)
def test_the_readmes_first_example_runs_in_the_fresh_environment(fresh_env, tmp_path):
    script = tmp_path / "first_example.py"
    script.write_text(first_example() + "\nimport json\nprint(json.dumps(sorted(ex.captures)))\n")
    assert fresh_env.run_json(script, cwd=tmp_path) == ["2"]
