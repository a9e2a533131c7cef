"""The GPT-2 rows of ``capture_overhead.py``: every leaf module's output captured on a small GPT-2, against a plain
forward, hand-written hooks keeping the same history, and nnsight's tracing API doing the same captures.

The model is transformers' ``GPT2LMHeadModel`` built from a config (6 layers, width 256, 4 heads, vocabulary 5000,
eager attention, random weights: nothing is downloaded), in eval mode, batch 2 × 128 tokens, under
``torch.no_grad()``. The captures keep a history across forwards, up to the explorer's default byte budget:
the explorer's store evicts its oldest records past it, the hand-written hooks keep a deque with the same rule,
and nnsight's caches are kept as many forwards back as fit in it. transformers and nnsight are bench-only
dependencies (``pip install -e ".[bench]"``, which ``make bench`` runs).
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable

import torch
from _protocol import Comparison, Side, compare
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.capture.store import DEFAULT_MEMORY_BUDGET

BATCH, TOKENS = 2, 128
BARS = {"plain": 1.10, "hand-written": 1.05}
MISSING = 'the GPT-2 rows need transformers and nnsight: pip install -e ".[bench]" (make bench does), or --no-gpt2'


def gpt2() -> tuple[nn.Module, torch.Tensor]:
    """A GPT-2 of random weights made from a config (6 layers, width 256, 4 heads, vocab 5000, eager attention)
    in eval mode, and a batch of 2 × 128 random token ids."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as exc:
        raise SystemExit(f"{MISSING} ({exc})") from None
    config = GPT2Config(
        n_layer=6, n_embd=256, n_head=4, vocab_size=5000, n_positions=TOKENS, bos_token_id=0, eos_token_id=0
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    return model, torch.randint(0, config.vocab_size, (BATCH, TOKENS))


def leaves_that_run(model: nn.Module, ids: torch.Tensor) -> tuple[list[str], int]:
    """The leaf modules one forward calls, in the order they run, and the bytes of their outputs."""
    names = {module: name for name, module in model.named_modules() if name and not any(module.children())}
    order: list[str] = []
    nbytes = [0]

    def note(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        if names[module] not in order:
            order.append(names[module])
        nbytes[0] += out.nbytes

    handles = [module.register_forward_hook(note) for module in names]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return order, nbytes[0]


class ExplorerHistory:
    """The explorer's forward capture on every leaf, attached before each B run and detached after it; the
    captures stay in its store from one run to the next (its byte budget evicts the oldest)."""

    def __init__(self, explorer: Explorer, leaves: list[str]) -> None:
        self.explorer, self.leaves = explorer, leaves
        self.per_run: list[int] = []

    def setup(self) -> None:
        for path in self.leaves:
            self.explorer.attach(path, "forward")

    def teardown(self) -> None:
        step = self.explorer.step
        records, _ = self.explorer.captures.snapshot()
        self.per_run.append(sum(r.step == step for r in records))
        self.explorer.detach()

    def side(self, fn: Callable[[], object]) -> Side:
        return Side(fn, self.setup, self.teardown)


class HandWrittenHistory:
    """The reference: ``register_forward_hook`` per leaf keeping ``out.detach()`` in one history, oldest first,
    dropping the oldest past ``budget`` bytes (the newest is always kept), as the explorer's store does."""

    def __init__(self, model: nn.Module, leaves: list[str], budget: int) -> None:
        self.modules = [(path, model.get_submodule(path)) for path in leaves]
        self.budget = budget
        self.kept: deque[tuple[str, torch.Tensor, int]] = deque()
        self.nbytes = 0
        self.handles: list[torch.utils.hooks.RemovableHandle] = []
        self.per_run: list[int] = []
        self._added = 0

    def _hook_for(self, path: str) -> Callable[[nn.Module, tuple, torch.Tensor], None]:
        kept = self.kept

        def keep(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
            t = out.detach()
            size = t.nbytes
            kept.append((path, t, size))
            self.nbytes += size
            self._added += 1
            while self.nbytes > self.budget and len(kept) > 1:
                self.nbytes -= kept.popleft()[2]

        return keep

    def setup(self) -> None:
        self._added = 0
        self.handles = [module.register_forward_hook(self._hook_for(path)) for path, module in self.modules]

    def teardown(self) -> None:
        self.per_run.append(self._added)
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def side(self, fn: Callable[[], object]) -> Side:
        return Side(fn, self.setup, self.teardown)


def nnsight_history(model: nn.Module, ids: torch.Tensor, leaves: list[str], forwards_kept: int) -> Callable[[], None]:
    """A forward traced by nnsight caching every leaf's output, on a copy of ``model`` (nnsight wraps the forward
    of every module it is given); the last ``forwards_kept`` caches are kept."""
    try:
        from nnsight import NNsight
    except ImportError as exc:
        raise SystemExit(f"{MISSING} ({exc})") from None
    traced = NNsight(copy.deepcopy(model))
    paths = [f"model.{path}" for path in leaves]
    history: deque = deque(maxlen=forwards_kept)

    def run() -> None:
        with torch.no_grad(), traced.trace(ids) as tracer:
            cache = tracer.cache(modules=paths)
        history.append(cache)

    run()
    missing = [path for path in paths if path not in set(history[-1].keys())]
    if missing:
        raise RuntimeError(f"nnsight cached {len(paths) - len(missing)} of {len(paths)} leaves; missing {missing[:3]}")
    return run


def check_every_leaf(name: str, per_run: list[int], expected: int) -> None:
    """Fail loudly when a B run captured fewer outputs than one forward has leaves that run."""
    if not per_run or min(per_run) < expected:
        raise RuntimeError(f"{name}: expected {expected} captures per B run, got {sorted(set(per_run))}")


def gpt2_comparisons(pairs: int) -> tuple[str, list[Comparison]]:
    """A line describing the model, and the GPT-2 rows: explorer, hand-written and nnsight against a plain
    forward, and the explorer against the hand-written hooks."""
    model, ids = gpt2()
    leaves, per_forward = leaves_that_run(model, ids)
    budget = DEFAULT_MEMORY_BUDGET
    parameters = sum(p.numel() for p in model.parameters())
    described = (
        f"GPT2LMHeadModel, 6 layers, width 256, 4 heads, vocab 5000, eager attention, {parameters:,} parameters,"
        f" random weights; batch {BATCH} × {TOKENS} tokens, eval mode, `torch.no_grad()`; {len(leaves)} leaf modules"
        f" run a forward, {per_forward / 2**20:.1f} MiB of outputs; history kept up to {budget / 2**20:.0f} MiB"
        f" (~{budget // per_forward} forwards)"
    )
    print(f"GPT-2: {described}", flush=True)

    def plain() -> None:
        with torch.no_grad():
            model(ids)

    explorer = Explorer(model, memory_budget=budget)
    results = []
    ours = ExplorerHistory(explorer, leaves)
    results.append(
        compare("GPT-2: forward capture (no_grad) vs plain", plain, ours.side(plain), pairs=pairs, bar=BARS["plain"])
    )
    check_every_leaf("GPT-2 explorer", ours.per_run, len(leaves))
    raw = HandWrittenHistory(model, leaves, budget)
    results.append(
        compare("GPT-2: hand-written hooks vs plain", plain, raw.side(plain), pairs=pairs, note="same history")
    )
    check_every_leaf("GPT-2 hand-written", raw.per_run, len(leaves))
    results.append(
        compare(
            "GPT-2: forward capture vs hand-written",
            HandWrittenHistory(model, leaves, budget).side(plain),
            ExplorerHistory(explorer, leaves).side(plain),
            pairs=pairs,
            bar=BARS["hand-written"],
        )
    )
    explorer.close()
    traced = nnsight_history(model, ids, leaves, max(1, budget // per_forward))
    results.append(compare("GPT-2: nnsight cache vs plain", plain, traced, pairs=pairs, note="nnsight's tracing"))
    return described, results
