"""The fused statistics kernel (``_fused_stats.c``): compiled on first use with the system C compiler,
cached on disk, loaded with ctypes; without a compiler the stats fall back to torch reductions.

No compiler is run where running one misbehaves: on Windows none is tried, and on macOS only once
``xcode-select -p`` finds the Command Line Tools (without them, running ``cc`` opens an install dialog).
"""

from __future__ import annotations

import array
import ctypes
import hashlib
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..._cache import cache_dir

if TYPE_CHECKING:
    from _ctypes import CFuncPtr

SOURCE = Path(__file__).with_name("_fused_stats.c")
ABI = 2  # what hw_stats_abi() of that source returns
DISABLE_ENV = "HOOKWIDGETS_NO_NATIVE"
"""Set to 1 to use torch reductions only (to compare the two paths, or where compiling is unwanted)."""
COMPILE_TIMEOUT_S = 60
XCODE_SELECT_TIMEOUT_S = 10

log = logging.getLogger(__name__)

Sums = tuple[float, float, float, float, int, bool]
"""sum, sum of squares, min, max, nonzero count, and whether a value may be NaN or Inf (min/max skip NaN)."""

_lock = threading.Lock()
_functions: dict[torch.dtype, CFuncPtr] | None = None
_status = "not loaded yet"
_tried = False
_loader: threading.Thread | None = None  # the thread load_in_background() started
_out = threading.local()  # each thread's six-double result buffer and its address
_get_num_threads = torch.get_num_threads


def fused_sums(x: torch.Tensor) -> Sums | None:
    """The kernel's one-pass sums of a contiguous float32/float64 CPU tensor of any shape; None when it does
    not apply (another device, dtype or layout, a tensor subclass) or the kernel is unavailable."""
    functions = _functions if _tried else _load_once()
    function = functions.get(x.dtype) if functions else None
    # Checked in order of cost; this runs in hooks on every layer, every step.
    if function is None or not x.is_cpu or type(x) is not torch.Tensor or x.layout is not torch.strided:
        return None
    if not x.is_contiguous() or x.is_neg():  # a negative view's memory holds -x
        return None
    try:
        pointer = x.data_ptr()
    except RuntimeError:  # tensors without storage (functorch wrappers): torch's own reductions handle them
        return None
    buffer = getattr(_out, "buffer", None)
    if buffer is None:
        results = array.array("d", bytes(48))  # six doubles; an array.array never moves unless resized
        buffer = _out.buffer = (results, results.buffer_info()[0])
    out, address = buffer
    # ctypes releases the GIL for the call: other Python threads run meanwhile. Large arrays are split
    # over torch's intra-op threads (a forked DataLoader worker has 1, so no OpenMP runs there).
    function(pointer, x.numel(), _get_num_threads(), address)
    # Read back from an array.array: unpacking a ctypes array makes each float through ctypes (~0.1 us
    # apiece, a quarter of this function's time).
    total, squares, mn, mx, nonzero, maybe_nonfinite = out
    return total, squares, mn, mx, int(nonzero), maybe_nonfinite != 0


def load_in_background() -> threading.Thread | None:
    """Load the kernel on a thread of its own (compiling it, on a machine's first use, takes ~0.5 s), so that
    the first statistics of a training loop do not wait for the compiler. The thread, or None when loaded."""
    global _loader
    with _lock:
        if _tried or _loader is not None:
            return None
        _loader = threading.Thread(target=_load_once, name="hookwidgets-stats-kernel", daemon=True)
    _loader.start()
    return _loader


def _after_fork_in_child() -> None:
    # A fork while the loader thread held the lock would leave the child's copy locked for ever; the
    # thread itself does not exist in the child.
    global _lock, _loader
    _lock = threading.Lock()
    if not _tried:
        _loader = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def status() -> str:
    """Where the kernel was loaded from, or why the torch reductions are used instead."""
    _load_once()
    return _status


def _load_once() -> dict[torch.dtype, CFuncPtr] | None:
    global _functions, _status, _tried
    with _lock:
        if not _tried:
            if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
                _status = f"disabled by {DISABLE_ENV}: statistics use torch reductions"
                log.info("the stats kernel is %s", _status)
            else:
                try:
                    path = _build()
                    library = ctypes.CDLL(str(path))
                    _functions = _bind(library)
                    threads = "several threads" if library.hw_stats_parallel() else "one thread (no OpenMP)"
                    _status = f"loaded from {path}; large tensors are read by {threads}"
                    log.debug("the stats kernel is %s", _status)
                except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                    _status = f"unavailable ({exc}): statistics use torch reductions"
                    # the same numbers, only slower: worth a line, not a warning
                    log.info("the stats kernel is %s", _status)
            _tried = True
        return _functions


def _bind(library: ctypes.CDLL) -> dict[torch.dtype, CFuncPtr]:
    if library.hw_stats_abi() != ABI:
        raise RuntimeError(f"{library._name} is of another kernel version")
    functions = {}
    for dtype, name in ((torch.float32, "hw_stats_f32"), (torch.float64, "hw_stats_f64")):
        function = getattr(library, name)
        function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p]
        function.restype = None
        functions[dtype] = function
    return functions


def _build() -> Path:
    """The compiled library for this source, machine and Python, compiled now unless cached."""
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + f"{platform.machine()}-{sys.platform}".encode()).hexdigest()[:16]
    cache = cache_dir()
    target = cache / f"fused_stats-{key}.so"
    if target.exists():
        return target
    refusal = _why_not_compile()
    if refusal is not None:
        raise RuntimeError(refusal)
    configured = shlex.split(os.environ.get("CC", ""))  # CC may carry a wrapper: "ccache gcc"
    found = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    compiler = configured or ([found] if found else None)
    if compiler is None:
        raise RuntimeError("no C compiler found (set CC, or install gcc)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        built = Path(scratch) / target.name
        base = [*compiler, "-O3", "-ffp-contract=fast", "-shared", "-fPIC", "-std=c99", str(SOURCE), "-o", str(built)]
        # With OpenMP and per-CPU clones first; a compiler without OpenMP (clang lacking libomp) or
        # without ifunc support (musl, non-x86) builds what it can, down to the plain one-thread kernel.
        variants = [["-fopenmp", "-DHW_CLONES"], ["-fopenmp"], ["-DHW_CLONES"], []]
        for flags in variants:
            command = [*base, *flags]
            log.debug("compiling the stats kernel: %s", shlex.join(command))
            done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
            if done.returncode == 0:
                os.replace(built, target)  # atomic: a process compiling beside this one never loads half a file
                log.info("compiled the stats kernel into %s (flags: %s)", target, " ".join(flags) or "none")
                return target
            last_error = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            log.debug("compiling the stats kernel with flags %r failed: %s", flags, done.stderr.strip())
        raise RuntimeError(f"{Path(compiler[-1]).name} failed: {last_error}")


def _why_not_compile() -> str | None:
    """Why no compiler may be run on this platform, or None where one may."""
    if sys.platform == "win32":
        return "no C compiler is run on Windows"
    if sys.platform == "darwin":
        # /usr/bin/cc without the Command Line Tools opens a dialog offering to install them: ask xcode-select,
        # which only prints, where they are first.
        missing = (
            "xcode-select -p finds no Command Line Tools, so no C compiler is run; xcode-select --install adds them"
        )
        tool = shutil.which("xcode-select")
        if tool is None:
            return missing
        try:
            found = subprocess.run([tool, "-p"], capture_output=True, text=True, timeout=XCODE_SELECT_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            return missing
        folder = found.stdout.strip()
        if found.returncode != 0 or not folder or not os.path.isdir(folder):
            return missing
    return None
