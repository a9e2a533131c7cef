"""The explorer's runs of its model, in one place: what each analysis needs around its forwards, and one runner that
gives exactly that, so that no analysis picks its own mix (and a new one cannot forget a part).

An ``Analysis`` declares what its run needs: whether the user's hooks see it, the mode and the state put back, the
grad mode, and what a full backward hook that an in-place op breaks does to it. ``Runner.run`` materializes lazy
modules (a run the user asked for) or skips (the explorer's own checks), and runs the body inside all of that.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Collection, Iterator
from typing import Literal, NamedTuple, TypeVar

import torch
from torch import nn

from ..._warnings import MaterializedWarning
from ..display import display_name
from ..model.compiled import run_eagerly
from ..model.distributed import Distributed, DistributedRunError, find_distributed, skipped
from ..model.inputs import Inputs, describe_inputs
from ..model.lazy import has_lazy, materialize
from ..model.preserved_state import preserved_state
from .info import HookInfo
from .registry import HookRegistry

T = TypeVar("T")

HOOK_WARNINGS = (
    # torch warns on every backward when a first layer's inputs need no grad: the hook's note says it once
    "Full backward hook is firing when gradients are computed",
    # torch says this at the first forward of a module with a dict output (then our hook steps aside): its note says it
    "For backward hooks to be called, module output should be",
)


class Analysis(NamedTuple):
    """What one analysis of the explorer needs around its forwards; the defaults are the safe ones."""

    name: str
    """How the warning of a run that materializes lazy modules names it (``"run()"``)."""
    lazy: Literal["materialize", "skip", "itself"] = "materialize"
    """On a model with lazy modules: an analysis the user asked for materializes them first, said in a warning;
    one of the explorer's own checks (at attach), whose forward would materialize them, is skipped (``run`` returns
    None); the shape probe runs on a copy (``"itself"``)."""
    own: bool = True
    """An own run: every explorer's hooks stay silent and a compiled model runs its Python code. False for
    ``run()``, whose forward and backward the user's hooks record."""
    state: Literal["eval", "train", "itself"] = "eval"
    """The mode the model runs in, its state (``.grad``, buffers, RNG, modes) put back after; ``"itself"``: the
    analysis keeps the state itself (it runs on copies, or each method does)."""
    grad: bool | None = None
    """Grad on (True) or off (False) around the body, or as the caller has it (None)."""
    collisions: Literal["detach", "raise"] = "detach"
    """A full backward hook of the explorer's that an in-place op breaks: detached with an explanation, and the body
    runs again (``"detach"``); or torch's error stays (``"raise"``: ``run()``, whose step tracker explains it)."""
    quiet: bool = False
    """Leave out torch's warnings about the explorer's backward hooks, which their notes say once."""
    edits: bool = False
    """In an own run: the hooks that carry an edit (``ablate_heads``, ``scale``, a patch…) apply it, and only that
    (they record and count nothing), so the analysis sees the model the user studies; every other hook stays silent.
    True for the analyses of the model (lens, attention, patching, attributions), False for the explorer's checks."""
    alone: Literal["refuse", "skip"] = "refuse"
    """On a model sharded across ranks, unless every rank makes the same calls (``collective``): an analysis the
    user asked for raises ``DistributedRunError``; the shape probe and attach's checks are skipped, and said."""


# The explorer's analyses, each with what it needs (``Explorer`` runs each through ``Runner.run``).
# no grad, a lazy one copied
PROBE = Analysis("the shape probe", lazy="itself", state="itself", collisions="raise", alone="skip")
RUN = Analysis("run()", own=False, grad=True, collisions="raise", quiet=True)
GRAPH = Analysis("graph()", state="itself")  # record_graph keeps the state and enables grad itself
FIRST_NONFINITE = Analysis("first_nonfinite()", state="itself")
ATTENTION = Analysis("attention()", edits=True)
LENS = Analysis("logit_lens()", grad=False, edits=True)
PATCH_SWEEP = Analysis("patch_sweep()", grad=False, edits=True)
ATTRIBUTION = Analysis("the attribution run", state="itself", edits=True)  # each method keeps the state it changes
COMPARE_BACKWARD = Analysis("compare_backward()", state="itself", collisions="raise")  # on copies, hooks of its own
COLLISION_CHECK = Analysis("attach()'s check of full backward hooks", lazy="skip", grad=True, quiet=True, alone="skip")
STOP_CHECK = Analysis("attach()'s check of stopped gradients", lazy="skip", grad=True, alone="skip")
FORWARD_CHECK = Analysis("attach()'s forward of the example inputs", lazy="skip", grad=False, alone="skip")
NODE_CHECK = Analysis("attach()'s graph recording, which checks a node id", lazy="skip", alone="skip")  # GRAPH's skip


class Runner:
    """Runs the analyses of one explorer (its registry's hooks silent in own runs), each as its ``Analysis`` says.

    It holds no model: each call names it, so the explorer lets go of the model at ``close()``."""

    def __init__(self, registry: HookRegistry, collective: bool = False) -> None:
        self._registry = registry
        self.collective = collective
        """Every rank makes the same calls: runs on a model sharded across ranks go ahead (``Explorer.collective``)."""
        self.skipped: dict[str, str] = {}
        """Why each own run skipped on a model sharded across ranks was skipped, by analysis name, the latest last."""
        self.skips = 0  # how many were skipped: attach() notes its hooks when one of its checks was
        self.failed_edits: list[HookInfo] = []
        """The hooks whose edit failed in the latest run that applied edits (its result was made without them)."""

    def run(
        self,
        analysis: Analysis,
        model: nn.Module,
        body: Callable[[], T],
        inputs: Inputs | None = None,
        *,
        reported: Callable[[T], BaseException | None] | None = None,
        attaching: Collection[HookInfo] = (),
    ) -> T | None:
        """Run ``body`` on ``model`` as ``analysis`` needs; ``inputs``: what its forward runs, with which a lazy model
        is materialized first. None when a check is skipped. ``reported``, ``attaching``: as
        ``Collisions.without_colliding``'s."""
        if self.alone(analysis, model) is not None:
            return None
        if analysis.lazy != "itself" and has_lazy(model):
            if analysis.lazy == "skip":
                return None  # the run that meets what the check looks for says it
            if inputs is not None:
                self.materialize(model, inputs, analysis.name)

        def attempt() -> T:
            with contextlib.ExitStack() as stack:
                if analysis.state != "itself":
                    stack.enter_context(preserved_state(model, mode=analysis.state))
                if analysis.grad is not None:
                    stack.enter_context(torch.enable_grad() if analysis.grad else torch.no_grad())
                if analysis.quiet:
                    stack.enter_context(warnings.catch_warnings())
                    for message in HOOK_WARNINGS:
                        warnings.filterwarnings("ignore", message=message)
                return body()

        if analysis.own and analysis.edits:
            self.failed_edits = []
        failed = self.failed_edits if analysis.edits else None
        own = self.own_run(model, analysis.edits, failed) if analysis.own else contextlib.nullcontext()
        with own:
            if analysis.collisions == "raise":
                return attempt()
            return self._registry.collisions.without_colliding(attempt, reported=reported, attaching=attaching)

    def would_skip(self, analysis: Analysis, model: nn.Module) -> bool:
        """Whether ``run(analysis, model, …)`` skips the body as a check on a model with lazy modules (one sharded
        across ranks: ``alone``)."""
        return analysis.lazy == "skip" and has_lazy(model)

    def alone(self, analysis: Analysis, model: nn.Module) -> Distributed | None:
        """The wrapper that keeps ``analysis`` from running on this rank alone (skipped and said, or a
        ``DistributedRunError``), or None: not sharded across ranks, or ``collective``."""
        found = None if self.collective else find_distributed(model)
        if found is None:
            return None
        if analysis.alone == "refuse":
            raise DistributedRunError(found, analysis.name)
        self.skipped.pop(analysis.name, None)  # the latest last
        self.skipped[analysis.name] = skipped(found, analysis.name)
        self.skips += 1
        return found

    @contextlib.contextmanager
    def own_run(self, model: nn.Module, edits: bool = False, failed: list[HookInfo] | None = None) -> Iterator[None]:
        """A run the explorer makes for itself: the user's hooks record nothing (``edits``: those carrying an edit
        apply it, ``failed`` collects the ones that fail), and a compiled model runs its Python code
        (``run_eagerly``), leaving the user's compiled code as it was."""
        with self._registry.suspended(edits, failed), run_eagerly(model):
            yield

    def materialize(self, model: nn.Module, inputs: Inputs, caller: str) -> None:
        """Before a run the user asked for: the forward that materializes lazy modules, said in a warning.

        It cannot be undone as the rest of a run's changes are, so the explorer's own checks never run it.
        """
        with self.own_run(model):  # the user's hooks see the run itself, not this forward
            done = materialize(model, inputs)
        if done:
            warnings.warn(
                f"{caller} materialized the lazy modules {', '.join(done)} of {display_name(type(model).__name__)} "
                f"with inputs {describe_inputs(inputs)}: a lazy module takes its parameters' shapes from its first "
                "forward, and the run needs them (the shape probe and attach() leave lazy modules as they are)",
                MaterializedWarning,
                stacklevel=4,
            )
