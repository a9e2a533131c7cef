"""The stats kernel never runs a compiler where that misbehaves: none on Windows, and on macOS only once
``xcode-select -p`` finds the Command Line Tools; ``native.status()`` says why the kernel is off."""

import hashlib
import importlib
import math
import platform
import shutil
import subprocess
import sys

import pytest
import torch

import hookwidgets.core.capture.stats as stats_module
from hookwidgets.core.capture import native
from hookwidgets.core.capture.stats import tensor_stats

REAL_RUN = subprocess.run


@pytest.fixture
def fresh_kernel_state(monkeypatch, tmp_path):
    """The loader as in a new process (its module run again), with an empty cache in ``tmp_path`` (so it would have
    to compile); as in this one after."""
    monkeypatch.setenv("HOOKWIDGETS_CACHE", str(tmp_path))
    monkeypatch.delenv(native.DISABLE_ENV, raising=False)
    monkeypatch.delenv("CC", raising=False)
    importlib.reload(native)
    yield tmp_path
    importlib.reload(native)  # the next use loads the kernel again, from the cache the environment names by then


@pytest.fixture
def commands(monkeypatch):
    """Every command the loader runs, in order; ``xcode-select -p`` answers as ``commands.xcode`` says (returncode,
    stdout), and a compiler is run for real (so a test on macOS-as-faked still builds a Linux library)."""

    class Commands(list):
        xcode: tuple[int, str] = (0, "")

    ran = Commands()

    def run(command, *args, **kwargs):
        ran.append([str(part) for part in command])
        if command[0].endswith("xcode-select"):
            code, out = ran.xcode
            return subprocess.CompletedProcess(command, code, out, "" if code == 0 else "xcode-select: error")
        return REAL_RUN(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    return ran


def torch_path_stats(t: torch.Tensor) -> dict[str, float]:
    original = stats_module.fused_sums
    stats_module.fused_sums = lambda x: None
    try:
        return tensor_stats(t)
    finally:
        stats_module.fused_sums = original


def assert_falls_back(cache) -> None:
    """The kernel is off: no library was built, and the stats are the torch reductions' own."""
    assert native.fused_sums(torch.ones(4)) is None
    assert not list(cache.iterdir())
    x = torch.tensor([0.0, 1.0, 2.0, math.nan])
    assert tensor_stats(x) == torch_path_stats(x)


def test_on_windows_no_compiler_is_run_and_status_says_so(fresh_kernel_state, commands, monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(shutil, "which", lambda name: pytest.fail(f"looked for {name} on Windows"))
    assert_falls_back(fresh_kernel_state)
    assert commands == []
    assert native.status() == "unavailable (no C compiler is run on Windows): statistics use torch reductions"


def test_on_macos_without_command_line_tools_no_compiler_is_run(fresh_kernel_state, commands, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    commands.xcode = (2, "")  # "unable to get active developer directory"
    assert_falls_back(fresh_kernel_state)
    assert commands == [["/usr/bin/xcode-select", "-p"]]  # cc, which would open the install dialog, never ran
    assert native.status().startswith("unavailable (xcode-select -p finds no Command Line Tools, so no C compiler")
    assert "xcode-select --install" in native.status()


def test_on_macos_a_developer_folder_that_is_gone_counts_as_missing(
    fresh_kernel_state, commands, monkeypatch, tmp_path
):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    commands.xcode = (0, f"{tmp_path / 'removed' / 'CommandLineTools'}\n")
    assert_falls_back(fresh_kernel_state)
    assert commands == [["/usr/bin/xcode-select", "-p"]]
    assert "finds no Command Line Tools" in native.status()


def test_on_macos_without_xcode_select_no_compiler_is_run(fresh_kernel_state, commands, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert_falls_back(fresh_kernel_state)
    assert commands == []
    assert "finds no Command Line Tools" in native.status()


def test_on_macos_with_command_line_tools_the_kernel_is_compiled_after_the_check(
    fresh_kernel_state, commands, monkeypatch, tmp_path
):
    tools = tmp_path / "CommandLineTools"
    tools.mkdir()
    real_which = shutil.which
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(
        shutil, "which", lambda name: "/usr/bin/xcode-select" if name == "xcode-select" else real_which(name)
    )
    commands.xcode = (0, f"{tools}\n")
    assert native.status().startswith(f"loaded from {fresh_kernel_state}")
    assert commands[0] == ["/usr/bin/xcode-select", "-p"]
    assert len(commands) >= 2 and "-shared" in commands[1]  # then the compiler
    assert native.fused_sums(torch.arange(4.0))[:2] == (6.0, 14.0)


def test_on_macos_a_cached_library_is_loaded_without_asking_xcode_select(fresh_kernel_state, commands, monkeypatch):
    assert native.status().startswith(f"loaded from {fresh_kernel_state}")  # built here, for this platform
    ran_to_build = len(commands)
    # the library as cached on a Mac: the cache key names the platform
    key = hashlib.sha256(native.SOURCE.read_bytes() + f"{platform.machine()}-darwin".encode()).hexdigest()[:16]
    next(fresh_kernel_state.iterdir()).rename(fresh_kernel_state / f"fused_stats-{key}.so")
    importlib.reload(native)  # a new process, on a Mac
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(shutil, "which", lambda name: pytest.fail(f"looked for {name} with a cached library"))
    assert native.status().startswith(f"loaded from {fresh_kernel_state / f'fused_stats-{key}.so'}")
    assert len(commands) == ran_to_build
