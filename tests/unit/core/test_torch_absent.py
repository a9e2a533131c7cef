"""A torch without an API hookwidgets guards, faked by deleting it before hookwidgets is imported: the explorer
still attaches, runs forward and backward, captures and closes leaving every hook dict as found, and the feature
that needed the API says why it is off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.core._without_apis import life

ROOT = Path(__file__).resolve().parents[3]
ABSENT = {
    "torch.compiler.set_stance": ["own runs of a compiled model", "torch.compiler.set_stance (torch 2.6)"],
    "torch._C._current_autograd_node": ["backward firings are numbered in firing order", "_current_autograd_node"],
    "torch._C._autograd._top_saved_tensors_default_hooks": ["non-reentrant", "_top_saved_tensors_default_hooks"],
    "torch._C._autograd._get_sequence_nr": [],  # one node made per read instead: the same numbers
    "torch._foreach_copy_": [],  # buffers put back one by one instead
}
"""Each API torch can be without (deleted here) -> what the explorer's diagnostics then say (nothing: a fallback
that gives the same results)."""
ALL = " ".join(ABSENT)
CASES = pytest.mark.parametrize("case", [*ABSENT, ALL], ids=[*ABSENT, "all of them"])


@pytest.fixture(scope="module")
def lives() -> dict[str, dict]:
    """Each case's explorer life, in processes started together (importing torch is most of each one's time)."""
    cases = [*ABSENT, ALL]
    runs = {
        case: subprocess.Popen(
            [sys.executable, "-m", "tests.unit.core._without_apis", *case.split()],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for case in cases
    }
    results = {}
    for case, run in runs.items():
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err
        results[case] = json.loads(out.splitlines()[-1])
    return results


@pytest.fixture(scope="module")
def with_every_api() -> dict:
    return life()


@CASES
def test_without_the_api_the_explorer_still_attaches_runs_captures_and_closes_as_found(case, lives, with_every_api):
    result = lives[case]
    assert result["still_absent"]  # hookwidgets put nothing back
    assert result["errors"] == []
    assert result["captured"] == with_every_api["captured"]
    assert all(count >= 1 for count in result["captured"].values())
    assert result["nodes"] == with_every_api["nodes"]  # the same graph, the same ids
    assert result["hook_dicts_as_found"] and result["flags_as_found"] and result["buffers_as_found"]


@CASES
def test_without_the_api_the_feature_that_needed_it_says_why_it_is_off(case, lives, with_every_api):
    result = lives[case]
    already = with_every_api["diagnostics"]  # what this torch turns off as it is (nothing, from torch 2.6 on)
    said = [text for text in result["diagnostics"] if text not in already]
    expected = [words for api in result["removed"] if (words := ABSENT[api])]
    assert set(already) <= set(result["diagnostics"]) and len(said) == len(expected)
    for words in expected:
        (text,) = [text for text in said if all(word in text for word in words)]
        assert "this torch has no" in text
