"""Scope tracking by wrapping ``nn.Module.__call__`` (as shipped) against torch's public global module hooks (as
``torch.utils.module_tracker`` does), interleaved in one process on the recording-forward rows (issue 22, part 4).

Run: ``.venv/bin/python bench/scope_ab.py [--pairs N] [--threads T] [--width W] [--no-cnn]``.
The global-hook variant replaces ``scope._follow``/``_unfollow`` for the runs that use it: a global forward
pre-hook and an always-called global forward hook doing what the wrapper does around a call (the same inlined
push and pop for a submodule inside a running call, ``_enter``/``_exit`` otherwise). Both variants must give the
same node ids on the MLP (checked first). Prints one ``compare`` line per row.
"""

from __future__ import annotations

import argparse
import sys

import torch
from _protocol import Side, add_arguments, compare, machine, revision, set_threads
from graph_scale import BLOCKS, deep_mlp, plain_forward, recorded_forward
from models import ResNet18
from torch.nn.modules import module as torch_module

from hookwidgets.core.graph.record import record_graph
from hookwidgets.core.model import scope

WRAPPER = (scope._follow, scope._unfollow)
_handles: list = []


def _pre(module, args) -> None:
    trackers = scope._following
    if not trackers or scope._is_compiling():
        return
    key = id(module)
    for tracker in trackers:
        path = tracker._paths.get(key)
        if path is None:
            continue
        call = tracker._local.call
        if key != tracker._root and call is not None and call.stack and not call.hidden:
            call.stack.append(path)
            scope._mark(call, path)
        else:
            tracker._enter(key, path, args, {})


def _post(module, args, output) -> None:
    trackers = scope._following
    if not trackers or scope._is_compiling():
        return
    key = id(module)
    for tracker in reversed(trackers):
        path = tracker._paths.get(key)
        if path is None:
            continue
        call = tracker._local.call
        if call is None:
            continue
        stack = call.stack
        if key != tracker._root and not call.hidden and len(stack) > 1 and stack[-1] == path:
            stack.pop()
            scope._mark(call, stack[-1])
        else:
            tracker._exit(key, path, output, sys.exc_info()[1])


def _follow_hooks(tracker) -> None:
    with scope._install_lock:
        if not _handles:
            _handles.append(torch_module.register_module_forward_pre_hook(_pre))
            _handles.append(torch_module.register_module_forward_hook(_post, always_call=True))
        scope._following = (*scope._following, tracker)


def _unfollow_hooks(tracker) -> None:
    with scope._install_lock:
        scope._following = tuple(t for t in scope._following if t is not tracker)
        if not scope._following:
            for handle in _handles:
                handle.remove()
            _handles.clear()


def use(variant: str) -> None:
    """Make the next trackers follow calls by ``"wrapper"`` or ``"hooks"``."""
    scope._follow, scope._unfollow = WRAPPER if variant == "wrapper" else (_follow_hooks, _unfollow_hooks)


def side(fn, variant: str) -> Side:
    return Side(fn, lambda: use(variant))


def ids(model, x, variant: str) -> list[str]:
    use(variant)
    return [n["id"] for n in record_graph(model, x, saved_tensors=False).data()["nodes"]]


def rows(name: str, model, x, pairs: int) -> None:
    if ids(model, x, "wrapper") != ids(model, x, "hooks"):
        raise RuntimeError(f"{name}: the two variants give different node ids")
    plain, recorded = plain_forward(model, x), recorded_forward(model, x)
    compare(f"{name}: wrapper vs plain", plain, side(recorded, "wrapper"), pairs=pairs)
    compare(f"{name}: global hooks vs plain", plain, side(recorded, "hooks"), pairs=pairs)
    compare(f"{name}: global hooks vs wrapper", side(recorded, "wrapper"), side(recorded, "hooks"), pairs=pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, pairs=20)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--no-cnn", action="store_true", help="only the MLP")
    args = parser.parse_args()
    set_threads(args.threads)
    print(f"{machine()}; hookwidgets at {revision()}", flush=True)
    torch.manual_seed(0)
    rows(f"{BLOCKS}-block MLP w{args.width} b64", deep_mlp(BLOCKS, args.width), torch.randn(64, args.width), args.pairs)
    if not args.no_cnn:
        rows("ResNet-18 b8 224²", ResNet18(), torch.randn(8, 3, 224, 224), args.pairs)


if __name__ == "__main__":
    main()
