"""The headless explorer: tree, hooks, runs and captures of one model, with no display code."""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from .._warnings import AliasWarning, CompiledModelWarning, PartialGraphWarning, ProbeFailedWarning
from ._torch import COMPILED_INNER, is_compile_wrapper
from ._torch import off as torch_features_off
from .attribution import CAM_METHODS, attribute, check_method
from .attribution.tokens import token_ids
from .capture.export import export_captures
from .capture.store import DEFAULT_MEMORY_BUDGET, CaptureStore
from .codegen.generate import hook_code
from .diagnostics.compare import BackwardComparison, compare_backward, former_keywords
from .diagnostics.lens import logit_lens
from .diagnostics.nonfinite import first_nonfinite, summary_rows
from .diagnostics.patching import DEFAULT_BATCH, Metric, Progress, patch_sweep
from .diagnostics.summary_frame import summary_frame
from .display import display_name, quoted
from .graph.dataflow import dataflow_graph
from .graph.no_graph import no_graph_reason
from .graph.record import GraphRecorder
from .graph.state import RecordedGraph
from .graph.stops import Stops
from .hooks import notes
from .hooks.collisions import is_inplace_collision
from .hooks.edits import check_edits_fit
from .hooks.events import Event
from .hooks.heads import head_count
from .hooks.kinds import KINDS, resolve_kind
from .hooks.notes import (
    COMPILED,
    NoteKind,
    compiled_note,
    graph_skips_global_note,
    graph_skips_note,
    meta_param_note,
    not_run_note,
)
from .hooks.registry import FULL_BACKWARD_KINDS, HookGroup, HookInfo, HookRegistry, TimelineEvent
from .hooks.stop_notes import note_stopped, stopped_notes
from .model.attention_record import attention_runner
from .model.attention_sources import hidden_probabilities_note
from .model.compiled import run_eagerly
from .model.graph_calls import never_called
from .model.inputs import Inputs, Target, call_model, describe_inputs
from .model.lazy import MaterializedWarning, has_lazy, materialize, unmaterialized_param
from .model.nested import map_tensors, tensors_in
from .model.packed import holds_packed
from .model.scores import Score, output_summary, resolve_score, top_classes
from .model.state import preserved_state
from .model.targets import alias_note, first_name, resolve_target, without_compiled_steps
from .model.tokens import Sequences, read_sequences
from .model.tree import SCRIPTED_ROOT, ProbeResult, build_tree, hookable_modules, probe
from .monitors.optim import UpdateRatioMonitor
from .monitors.scalar_log import ScalarLog, same_destination, stats_kinds_needed

if TYPE_CHECKING:
    import pandas

log = logging.getLogger(__name__)


class Explorer:
    """Hooks on a model, what they captured, and runs that leave the model as found.

    Use as a context manager or call ``close()``; a finalizer removes the hooks if the explorer is
    dropped unclosed.
    """

    def __init__(
        self,
        model: nn.Module,
        example_inputs: Inputs | None = None,
        *,
        tokens: Sequence[str] | Sequence[Sequence[str]] | None = None,
        tokenizer: Any = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        offload: str | None = None,
        on_error: str = "record",
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"HookExplorer needs a torch.nn.Module, got {type(model).__name__}")
        self.sequences: Sequences = read_sequences(model, example_inputs, tokens, tokenizer)
        """What the explorer knows of the inputs' sequences: ``tokens`` (a list of strings, or one list per item) or
        ``tokenizer`` (anything with ``convert_ids_to_tokens``) applied to the ``input_ids`` and ``decoder_input_ids``
        of the example inputs, their lengths, and a vision transformer's patch grid; the views label sequence axes
        with them."""
        self._model: nn.Module | None = model
        self._model_name = display_name(type(model).__name__)  # for messages
        self._module_count = sum(1 for _ in model.modules())
        self.example_inputs = example_inputs
        """What the shape probe, the Run button and every method given no inputs run (see ``example_copy()``)."""
        self.captures = CaptureStore(memory_budget, offload)
        """The ``CaptureStore``: ``ex.captures[target][kind]`` is a list of ``Record``s, newest last."""
        self._registry = HookRegistry(model, self.captures, on_error=on_error)
        # (optimizer or None for "every optimizer of the model", its monitor), from watch_optimizer()
        self._monitors: list[tuple[torch.optim.Optimizer | None, UpdateRatioMonitor]] = []
        self._finalizer = weakref.finalize(self, _close_all, self._registry.close, self._monitors)
        self.probe_error: str | None = None
        """The text of a failed shape probe, or None."""
        self.probe_classes: list[tuple[int, float]] = []
        """The first item's top five classes in the probe's output, ``[(class, probability), …]``, as a class target
        finds the scores; ``[]`` without example inputs, or when the output holds no ``(batch, classes)`` scores."""
        self.probe_output: dict[str, Any] = output_summary(None)
        """What the probe's output offers a backward, as plain data: ``kind`` (``classes``, ``sequence``, ``scalar``,
        ``none``), the scores' ``tensor`` and ``shape``, ``words`` (``classes``, ``tokens``, ``labels``), ``positions``
        (a sequence's length), ``decoder``, ``loss`` (``target="loss"`` works) and ``top`` (``[[id, probability], …]``
        of the first item, at the last position); kind ``none`` without a probe."""
        self.last_score: Score | None = None
        """What the latest ``run()`` backpropagated (value, description, tensor, position, classes); None after a
        run without a target."""
        self.unwatched: list[str] = []
        """Paths of the outermost ``torch.jit.script`` modules (``""``: a scripted model). They take no hooks, so they
        and their submodules show no shape and fire no hooks; attaching a module hook there raises a ValueError."""
        self.ddp_inspector: Any = None
        """The ``DDPInspector`` of the latest ``watch_ddp()``, or None."""
        self._logs: list[ScalarLog] = []  # open log_to() logs
        self._graph = RecordedGraph()
        probed = self._probe()
        self._ran: set[int] | None = probed.called if probed is not None else None  # modules the probe saw run
        self._probed = probed
        self._tree = build_tree(model, probed)
        self._tree_lazy = has_lazy(model)  # its counts wait for a forward that materializes the lazy modules

    def _probe(self) -> ProbeResult | None:
        # Named without a run, so they are known also without example inputs or when the probe fails.
        self.unwatched = hookable_modules(self.model)[1]
        if self.example_inputs is None:
            return None
        model = self.model
        scripted = isinstance(model, torch.jit.ScriptModule)  # takes no hooks: no top classes

        noted: list[bool] = []

        def note_top(module: nn.Module, args: Any, output: Any) -> None:
            if not noted:  # the root's first call is the model's output
                noted.append(True)
                self.probe_classes = top_classes(output)
                self.probe_output = output_summary(output, model, id_names=self.sequences.id_names)

        handle = None if scripted else model.register_forward_hook(note_top)
        try:
            with self._own_run():  # other explorers record nothing, and a compiled model compiles nothing
                return probe(model, self._inputs(None))
        except Exception as exc:
            self.probe_error = explain_run_error(exc, self.example_inputs)
            warnings.warn(
                f"the probe run with example_inputs failed, so no output shapes are shown: {exc}",
                ProbeFailedWarning,
                stacklevel=3,
            )
            return None
        finally:
            if handle is not None:
                handle.remove()

    @property
    def tokens(self) -> list[list[str]] | None:
        """The input tokens' labels, one list per item (None when neither ``tokens`` nor ``tokenizer`` was given)."""
        return self.sequences.tokens

    @property
    def decoder_tokens(self) -> list[list[str]] | None:
        """The labels of an encoder-decoder model's ``decoder_input_ids``, one list per item, from ``tokenizer``."""
        return self.sequences.decoder_tokens

    @property
    def tree(self) -> dict[str, Any]:
        """The module tree as plain data; rebuilt once a forward (``run()``, or the user's own) materialized
        the lazy modules it showed with unknown parameter counts."""
        if self._tree_lazy and self._model is not None:
            self._tree_lazy = has_lazy(self._model)
            self._tree = build_tree(self._model, self._probed)
        return self._tree

    def _materialize(self, inputs: Inputs, caller: str) -> None:
        """Before a run the user asked for: the forward that materializes lazy modules, said in a warning.

        It cannot be undone as the rest of a run's changes are, so the explorer's own checks never run it.
        """
        if not has_lazy(self.model):
            return
        with self._own_run():  # the user's hooks see the run itself, not this forward
            done = materialize(self.model, inputs)
        if done:
            warnings.warn(
                f"{caller} materialized the lazy modules {', '.join(done)} of {self._model_name} with inputs "
                f"{describe_inputs(inputs)}: a lazy module takes its parameters' shapes from its first forward, "
                "and the run needs them (the shape probe and attach() leave lazy modules as they are)",
                MaterializedWarning,
                stacklevel=3,
            )

    @property
    def hooks(self) -> list[HookInfo]:
        """The explorer's live hooks in attach order, then hooks others attached (``foreign=True``, never removed)."""
        return self._registry.hooks

    @property
    def own_hooks(self) -> list[HookInfo]:
        """The explorer's own live hooks in attach order: ``hooks`` without others' (no look through the model)."""
        return self._registry.own_hooks

    @property
    def monitors(self) -> list[UpdateRatioMonitor]:
        """The optimizer monitors ``watch_optimizer()`` made that still watch, oldest first."""
        return [monitor for _, monitor in self._monitors]

    @property
    def recorded_graph(self) -> dict[str, Any] | None:
        """The graph ``graph()`` returns, without recording one: None until a run was recorded (``graph()``, or
        ``run(record_graph=True)``)."""
        return self._graph.data

    def subscribe(self, callback: Callable[[Event], Any]) -> Callable[[], None]:
        """Call ``callback(event)`` with each event of the explorer, a plain dict whose ``type`` says what happened;
        returns the function that unsubscribes it. Nothing is collected while nobody is subscribed."""
        self.model  # noqa: B018 -- a closed explorer says so, as every method does
        return self._registry.events.subscribe(callback)

    def example_copy(self) -> Inputs:
        """A fresh copy of the example inputs (what a method given no inputs runs): a model that changes its input in
        place leaves the example inputs as they were. A ValueError when there are none."""
        return self._inputs(None)

    @property
    def model(self) -> nn.Module:
        """The explored model; after ``close()``, which lets go of it, a RuntimeError says the explorer is closed."""
        if self._model is None:
            raise RuntimeError(f"this explorer of {self._model_name} is closed: create a new HookExplorer(model)")
        return self._model

    @property
    def diagnostics(self) -> list[str]:
        """Each feature this torch turns off and why, then explanations of hooks the explorer had to detach (e.g.
        an in-place op broke a backward hook)."""
        return [*torch_features_off().values(), *self._registry.collisions.explanations]

    @property
    def step(self) -> int:
        """How many root forwards the hooks have seen."""
        return self._registry.steps_seen

    def attach(
        self,
        target: str,
        kind: str | Sequence[str] = "forward",
        action: str | Callable = "capture",
        *,
        edit: Any = None,
        copy: bool = False,
        with_kwargs: bool = False,
    ) -> HookInfo | HookGroup:
        """Attach hook(s) of ``kind`` at the path ``target``, the hooks' place (a module path, a parameter name or
        an autograd node id); re-attaching replaces.

        ``action`` is ``capture``, ``stats``, ``print`` or a callable with torch's signature for the
        kind; ``edit`` (e.g. ``("scale", 2.0)``) changes the value before the action sees it. Returns the
        ``HookInfo``, or a ``HookGroup`` of them for a list of kinds: handles with ``remove()`` and ``with``.
        """
        if isinstance(self.model, torch.jit.ScriptModule):  # torch refuses even get_submodule on one
            raise ValueError(SCRIPTED_ROOT)
        family, obj = resolve_target(self.model, target)
        given, target = target, first_name(self.model, family, obj) or target  # one name per module or parameter
        kinds = [kind] if isinstance(kind, str) else list(kind)
        specs = [resolve_kind(k, target, family) for k in kinds]  # all validated before any is attached
        if isinstance(obj, torch.jit.ScriptModule) and any(s.family == "module" for s in specs):
            raise ValueError(
                f"module {quoted(target)} is a torch.jit.script module ({display_name(type(obj).__name__)}): "
                "ScriptModules take no hooks; hook a module around it, or its parameters (kind 'grad'), or explore it "
                "before scripting"
            )
        if is_compile_wrapper(obj) and any(s.name in LEGACY_AND_FULL_BACKWARD for s in specs):
            inner = f"{target}.{COMPILED_INNER}" if target else COMPILED_INNER
            raise ValueError(
                f"module {quoted(target)} is torch.compile's wrapper (OptimizedModule): torch never fires backward "
                f"hooks registered on the wrapper itself; attach them to {quoted(inner)}, the module it compiles"
            )
        if family == "node":
            self._check_node_id(target)
        if family == "param" and is_lazy(obj):
            raise ValueError(unmaterialized_param(target))
        if (
            family == "param"
            and not obj.requires_grad
            and any(s.name in ("param_grad", "post_accumulate") for s in specs)
        ):
            raise ValueError(
                f"parameter {quoted(target)} does not require grad (frozen), so it gets no gradient to hook; unfreeze "
                f"it with model.get_parameter({quoted(target)}).requires_grad_() or hook a parameter that trains"
            )
        infos: list[HookInfo] = []
        try:  # all or nothing: a kind refused halfway takes back the kinds of this call attached before it
            for k, spec in zip(kinds, specs, strict=True):
                infos.append(
                    self._registry.attach(target, obj, spec, k, action, edit, copy, with_kwargs, self._forward_probe())
                )
            self._check_edits_fit(infos)
            self._check_collisions([i for i in infos if i.kind in FULL_BACKWARD_KINDS])
        except BaseException:
            for info in infos:
                self._registry.detach(info.target, info.kind)
            raise
        skipped = never_called(self.model)
        for info, spec in zip(infos, specs, strict=True):
            if spec.family == "global" and skipped:
                notes.add(info, graph_skips_global_note(skipped), NoteKind.CANNOT_FIRE)
            elif spec.family == "param" and obj.is_meta:  # gradient hooks: a meta tensor takes part in no backward
                swapped = self._probed is not None and target in self._probed.swapped
                notes.add(info, meta_param_note(target, swapped), NoteKind.CANNOT_FIRE)
            elif spec.family != "module":
                continue
            elif target in skipped:  # found in the graph: it can never fire, not only in the example forward
                notes.add(info, graph_skips_note(target, obj, skipped[target]), NoteKind.CANNOT_FIRE)
            elif self._ran is not None and id(obj) not in self._ran:
                notes.add(info, not_run_note(target, obj), NoteKind.NOT_RUN)
        note = compiled_note(self.model)
        if note:
            warnings.warn(COMPILED, CompiledModelWarning, stacklevel=2)
            for info in infos:  # until each fires: a hook attached before the model's first compiled call does
                notes.add(info, note, NoteKind.COMPILED)
        note = hidden_probabilities_note(self.model, target, obj) if "forward" in kinds else None
        if note:  # sdpa or flash attention: the hook sees None where the probabilities would be
            for info in infos:
                if info.kind == "forward":
                    notes.add(info, note, NoteKind.HIDDEN_PROBABILITIES)
        if target != given and without_compiled_steps(target) != given:  # not merely inside torch.compile's wrapper
            note = alias_note(given, target)
            warnings.warn(note, AliasWarning, stacklevel=2)
            for info in infos:
                notes.add(info, note, NoteKind.ALIAS)
        self._note_stopped_gradients(infos)
        for info in infos:
            if info.note:  # also on ex.hooks; logged once here, at attach, not at every firing
                log.info("the %s hook on %s: %s", info.kind, quoted(info.target), info.note)
        self._registry.events.attached(infos)
        return infos[0] if isinstance(kind, str) else HookGroup(infos)

    def _check_node_id(self, node_id: str) -> None:
        """A KeyError with close ids when the recorded graph (recorded now if it can be) lacks ``node_id``."""
        # not on a model with lazy modules: recording a graph would materialize them
        if self._graph.data is None and self.example_inputs is not None and not has_lazy(self.model):
            with contextlib.suppress(Exception):  # no graph to check against: the hook's note will tell
                self.graph()
        self._graph.check(node_id, self._model_name)

    def _check_edits_fit(self, infos: list[HookInfo]) -> None:
        """With example inputs, refuse at attach a forward edit that does not fit the output shape the probe saw."""
        shapes = self._probed.shapes if self._probed is not None else {}
        for info in infos:
            shape = shapes.get(info.target)
            if info.edit and info.spec == "forward" and shape and all(isinstance(n, int) for n in shape):
                check_edits_fit(info.edit, tuple(shape), info.target)

    def _check_collisions(self, infos: list[HookInfo]) -> None:
        """With example inputs, find at attach time a full backward hook that an in-place op breaks."""
        if not infos or self.example_inputs is None or has_lazy(self.model):
            return  # a lazy module would be materialized by the check: the run that meets the collision explains it

        def check() -> None:
            try:
                with self._own_run(), preserved_state(self.model), torch.enable_grad(), warnings.catch_warnings():
                    # a hook on a module with a dict output is set aside at its first call, with a note: torch need
                    # not warn about it here
                    warnings.filterwarnings(
                        "ignore", message="For backward hooks to be called, module output should be"
                    )
                    call_model(self.model, self._inputs(None))
            except Exception as exc:
                if is_inplace_collision(exc):
                    raise
                # any other failure of the example inputs (the model's own errors) was reported by the probe

        with contextlib.suppress(RuntimeError):  # another hook's collision: left to the run that meets it
            self._registry.collisions.without_colliding(check, attaching=infos)  # these hooks': a ValueError

    def _note_stopped_gradients(self, infos: list[HookInfo]) -> None:
        """With example inputs, on a model that keeps packed weights (a quantized one), say on each hook that waits
        for a gradient which cannot come why (``hooks/stop_notes.py``), from one forward of the example inputs."""
        if self.example_inputs is None or has_lazy(self.model) or not holds_packed(self.model):
            return
        try:
            with self._own_run(), preserved_state(self.model), torch.enable_grad(), Stops(self.model, True) as stops:
                output = call_model(self.model, self._inputs(None))
                roots = [t.grad_fn for t in tensors_in(output) if t.grad_fn is not None]
                note_stopped(stopped_notes(infos, self.model, stops, roots))
        except Exception:  # the example inputs fail: the probe said so, and the run that meets it says it again
            return

    def head_count(self, target: str) -> int | None:
        """How many heads ``("ablate_heads", […])`` finds on the module at ``target`` (its output projection found in
        a forward of the example inputs when its name does not say); None where that edit would be refused."""
        family, obj = resolve_target(self.model, target)
        if family != "module":
            return None
        return head_count(self.model, target, obj, self._forward_probe())

    def _forward_probe(self) -> Callable[[], None] | None:
        """One forward of the example inputs as an own run (hooks silent, model left as found, no grad), for what
        attach() checks by running; None without example inputs, or where a forward would materialize lazy modules."""
        if self.example_inputs is None or has_lazy(self.model):
            return None

        def run() -> None:
            with self._own_run(), preserved_state(self.model), torch.no_grad():
                call_model(self.model, self._inputs(None))

        return run

    @contextlib.contextmanager
    def _own_run(self) -> Iterator[None]:
        """A run the explorer makes for itself: the user's hooks record nothing, and a compiled model runs
        its Python code (``run_eagerly``), leaving the user's compiled code as it was."""
        with self._registry.suspended(), run_eagerly(self.model):
            yield

    @property
    def timeline(self) -> list[TimelineEvent]:
        """Every hook firing in order, recomputed forwards included (``recompute=True``), each step of a generation with
        its ``generation``; the newest 10,000 are kept."""
        of = self._registry.generations.of
        return [e if e.generation else e._replace(generation=of(e.step)) for e in self._registry.timeline]

    @property
    def generations(self) -> list[dict[str, Any]]:
        """The generations the hooks saw (a ``generate()`` call: one call of a method of the model that called the model
        several times), oldest first, the newest 100: ``call`` (as ``Record.generation.call``), ``steps`` (``steps[k]``
        is decode index k, 0 the prompt step), ``ids`` and ``tokens``: per decode index, one list per item of the token
        ids the step fed that the step before had not (the prompt, then each new token), and their labels (from
        ``tokenizer``, or the ``tokens`` given for the example inputs' ids; None with neither). ``tokens`` stays the
        prompt's."""
        names = self.sequences.token_names
        found = []
        for info in self._registry.generations.infos():
            tokens = [None if rows is None else [names(row) for row in rows] for rows in info.ids]
            labelled = all(t is None or all(r is not None for r in t) for t in tokens)
            found.append(
                {
                    "call": info.call,
                    "steps": list(info.steps),
                    "ids": [None if rows is None else [list(r) for r in rows] for rows in info.ids],
                    "tokens": tokens if labelled else None,
                }
            )
        return found

    def detach(self, target: str | None = None, kind: str | None = None) -> list[HookInfo]:
        """Remove one hook, all hooks of a target, or (no arguments) every hook."""
        if target is not None:
            family, obj = resolve_target(self.model, target)
            target = first_name(self.model, family, obj) or target  # where attach put a hook asked for by an alias
        if kind is not None and kind not in KINDS:
            close = difflib.get_close_matches(str(kind), list(KINDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"unknown hook kind {kind!r}{hint}; kinds are {', '.join(k for k in KINDS if k != 'param_grad')}"
            )
        removed = self._registry.detach(target, kind)
        self._registry.events.detached(removed)
        return removed

    def run(
        self,
        inputs: Inputs | None = None,
        target: Target = None,
        *,
        position: int | None = None,
        record_graph: bool = False,
        train: bool = False,
    ) -> Any:
        """Forward ``inputs`` (default: the example inputs) in eval mode; with ``target``, backward from that score,
        which ``last_score`` then describes (``position``: where a sequence output is read, default the last).

        ``train=True`` runs in training mode (Dropout active, BatchNorm on batch statistics), as a training
        step does. The run leaves parameters' ``.grad``, buffers, RNG state and train/eval mode as found.
        With ``record_graph``, its autograd graph becomes the one ``graph()`` returns.
        """
        try:
            return self._run(inputs, target, position, record_graph, train)
        finally:
            self._registry.events.run_ended(self.step)  # its step is over: its firings, then the end of the run

    def _run(self, inputs: Inputs | None, target: Target, position: int | None, record_graph: bool, train: bool) -> Any:
        if target is None and position is not None:
            raise ValueError(f"position={position} picks where a target reads the output: pass target= as well")
        self.last_score = None
        inputs = self._inputs(inputs)
        self._materialize(inputs, "run()")
        recorder = GraphRecorder(self.model) if record_graph else contextlib.nullcontext()
        with (
            preserved_state(self.model, mode="train" if train else "eval"),
            torch.enable_grad(),
            warnings.catch_warnings(),
        ):
            # torch warns on every backward when a first layer's inputs need no grad; the hook's note says it once
            warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed")
            # torch says this at the first forward of a module with a dict output (then our hook steps aside); the
            # hook's note says it
            warnings.filterwarnings("ignore", message="For backward hooks to be called, module output should be")
            # a model keeping packed weights (a quantized one): its hooks say where gradients stop, if they do
            stops = Stops(self.model, True) if target is not None and holds_packed(self.model) else None
            try:
                with recorder, stops if stops is not None else contextlib.nullcontext():
                    output = call_model(self.model, inputs)
            finally:
                if record_graph:
                    self._graph.keep(recorder)  # before the backward frees what the nodes saved
                    self._graph_recorded()
            if target is not None:
                score, chosen = resolve_score(output, target, position, model=self.model)
                if not score.requires_grad:  # torch would only say "element 0 of tensors does not require grad"
                    raise ValueError(self._why_no_backward(output, inputs))
                notes = (
                    [] if stops is None else stopped_notes(self._registry.own_hooks, self.model, stops, [score.grad_fn])
                )
                score.backward()
                note_stopped(notes)  # after the firings, whose notes only see a None gradient
                self.last_score = chosen
        return _detached(output)

    def _why_no_backward(self, output: Any, inputs: Inputs) -> str:
        """Why a run's score has no gradient to propagate, and what to do about it."""
        grad_mode = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
        inputs_grad = any(t.requires_grad for t in tensors_in(inputs))
        reason = no_graph_reason(self.model, output, grad_mode, inputs_grad).removeprefix("no graph: ")
        return f"run(target=...) has nothing to backpropagate: {reason}"

    def graph(self, inputs: Inputs | None = None, *, saved_tensors: bool = True) -> dict[str, Any]:
        """The autograd graph of the last recorded run as plain data: its nodes, edges and module clusters.

        With ``inputs``, or when no run was recorded yet, records a forward of ``inputs`` (default: the
        example inputs) first; the model is left as found. A ValueError says why a run left no graph; a
        forward that raises gives the graph made before the failure, its ``"error"``, and a RuntimeWarning.
        """
        if inputs is not None or self._graph.data is None:
            inputs = self._inputs(inputs)
            self._materialize(inputs, "graph()")
            with self._own_run():  # a diagnostic run: the user's hooks record nothing
                # the hooks a collision broke are detached, until the whole graph comes
                self._registry.collisions.without_colliding(
                    lambda: self._graph.record(self.model, inputs, saved_tensors), reported=lambda raised: raised
                )
            self._graph_recorded()
            error = self._graph.data.get("error")
            if error:  # a partial graph must not pass for the whole one
                made = f"the {len(self._graph.data['nodes'])} nodes made before it"
                warnings.warn(
                    f"the forward of {self._model_name} raised {error}; the graph holds only {made}",
                    PartialGraphWarning,
                    stacklevel=2,
                )
        return self._graph.data

    def _graph_recorded(self) -> None:
        self._registry.events.graph_recorded()

    def saved_memory(self) -> dict[str, int]:
        """Bytes each module saved for backward in the recorded run (activation memory), largest first."""
        if self._graph.data is None:
            self.graph()
        return dict(sorted(self._graph.saved_by_module.items(), key=lambda item: -item[1]))

    def dataflow(self, depth: int | None = None) -> dict[str, Any]:
        """Modules as nodes and the tensors passed between them, from the recorded graph (``depth`` merges)."""
        return dataflow_graph(self.graph(), depth=depth)

    def first_nonfinite(self, inputs: Inputs | None = None, *, train: bool = False) -> str | None:
        """The first module, in the order forwards finish, whose output held NaN or Inf (None if none).

        One forward in eval mode; ``train=True`` runs it in training mode, where BatchNorm's batch statistics
        and Dropout make NaNs of their own. The model is left as found either way.
        """
        inputs = self._inputs(inputs)
        self._materialize(inputs, "first_nonfinite()")
        with self._own_run():  # a diagnostic run: the user's hooks record nothing
            return first_nonfinite(self.model, inputs, train=train)

    def attention(self, inputs: Inputs | None = None) -> dict[str, torch.Tensor]:
        """``{module path: attention probabilities (N, H, T_q, T_k)}`` of one forward, in execution order: what the
        model returns with ``output_attentions=True`` under eager attention, from any implementation it runs (a
        module called twice gives ``path#2`` too).

        For that run only, every config is set to eager attention and ``nn.MultiheadAttention`` asked for per-head
        weights (an older transformers model, which declares nothing to record, is called with
        ``output_attentions=True``); the model, its configs and hooks are left as found, and the explorer's hooks
        record nothing.
        """
        run = attention_runner(self.model, self._model_name)  # a ValueError naming what it looked for if none
        inputs = self._inputs(inputs)
        self._materialize(inputs, "attention()")
        with self._own_run(), preserved_state(self.model):
            return run(inputs)

    def logit_lens(
        self,
        inputs: Inputs | None = None,
        *,
        top_k: int = 5,
        unembed: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> dict[str, Any]:
        """Each block's residual output read as the model reads its last block's: through what its forward runs
        between that block and the output embedding (a final norm, a projection), the embedding, and what the forward
        does to the logits after it (a bias, a soft cap); ``unembed``: ``hidden -> logits`` for a model that declares
        no embedding. Returns ``layers`` (block paths in execution order, then
        ``"output"``, the model's own logits), ``ids`` and ``probs`` ``(L, N, T, top_k)``, and ``labels`` (the ids'
        strings, nested lists) when a tokenizer was given. One forward (a second records what a forward that changes the
        embedding's logits does to them); the model is left as found."""
        inputs = self._inputs(inputs)
        self._materialize(inputs, "logit_lens()")
        with self._own_run(), preserved_state(self.model), torch.no_grad():
            lens = logit_lens(self.model, inputs, top_k=top_k, unembed=unembed)
        # the ids as a Python list (L·N·T·top_k of them) only when a tokenizer names them
        names = (
            self.sequences.id_names(lens["ids"].flatten().tolist()) if self.sequences.tokenizer is not None else None
        )
        if names is not None:
            lens["labels"] = _nested(names, lens["ids"].shape)
        return lens

    def patch_sweep(
        self,
        clean: Inputs,
        corrupted: Inputs,
        *,
        layers: Sequence[str] | None = None,
        metric: Metric | None = None,
        batch_size: int = DEFAULT_BATCH,
        progress: Progress | None = None,
    ) -> torch.Tensor:
        """Activation patching: ``(L, T)`` of ``metric(output)`` for the ``corrupted`` run (batch 1) with the clean
        activation of each layer (default: every block) at each position patched in; by default the logit of the
        clean run's top token at the last position, minus that logit unpatched. ``metric`` maps a batched output to
        ``(B,)``; up to ``batch_size`` positions run in one forward; ``progress(done, total)`` after each. The result's
        ``.layers`` are the paths, ``.tokens`` the clean tokens' labels (None when unknown). Model left as found."""
        self._materialize(clean, "patch_sweep()")
        with self._own_run(), preserved_state(self.model), torch.no_grad():
            result = patch_sweep(
                self.model, clean, corrupted, layers=layers, metric=metric, batch_size=batch_size, progress=progress
            )
        result.tokens = self._labels_of(clean, result.shape[1])
        return result

    def _labels_of(self, inputs: Inputs, length: int) -> list[str] | None:
        """The first item's labels: the example tokens for the example inputs, else the tokenizer's; or None."""
        if inputs is self.example_inputs:
            return self.sequences.labels(length)
        if self.sequences.tokenizer is None:
            return None
        try:
            return read_sequences(self.model, inputs, tokenizer=self.sequences.tokenizer).labels(length)
        except ValueError:  # inputs without input_ids: nothing to label
            return None

    def summary(self, *, as_frame: bool = False) -> list[dict[str, Any]] | pandas.DataFrame:
        """Per-layer, per-step rows of activation and gradient statistics from ``stats`` hooks; ``as_frame=True``
        gives them as a pandas DataFrame, one row each, with the same columns.

        ``ex.attach("", ["global_forward", "global_grad"], action="stats")`` fills it for every module
        (``global_grad``: tensor hooks on every module's outputs, which in-place ops do not break).
        """
        rows = summary_rows(self.captures)
        return summary_frame(rows) if as_frame else rows

    def log_to(self, writer: Any, every: int = 1, *, fields: Sequence[str] | None = None) -> ScalarLog:
        """Write the ``summary()`` statistics to ``writer`` (a TensorBoard ``SummaryWriter``, or anything with
        ``add_scalar``) as each step ends, every ``every`` steps, under ``"{field}/{path}"`` tags.

        ``fields``: statistics (``"norm"``, for both sides) or columns (``"grad_norm"``); default all twelve. Without
        a ``stats`` hook, attaches stats on every layer. Returns a ``ScalarLog``: ``remove()``, ``with`` or
        ``close()`` stop it.
        """
        for old in [log for log in self._logs if same_destination(log.writer, writer)]:
            old.remove()
        log = ScalarLog(writer, every, fields, self.captures, self.subscribe, self._registry.events.flush)
        kinds = stats_kinds_needed(self.own_hooks)
        try:
            if kinds:
                log.hooks.extend(self.attach("", kinds, action="stats"))
        except BaseException:
            log.remove()
            raise
        self._logs = [*(other for other in self._logs if other.active), log]
        return log

    @former_keywords
    def compare_backward(
        self, layer: str, inputs: Inputs | None = None, target: Target = None, *, position: int | None = None
    ) -> BackwardComparison:
        """The legacy and the full backward hook's gradients on ``layer`` side by side (on hook-free copies),
        in the backward of the score ``target`` at ``position`` (as in ``run``; default: the sum of the output)."""
        inputs = self._inputs(inputs)
        self._materialize(inputs, "compare_backward()")
        with self._own_run():  # on copies: no explorer records them, and they would compile anew
            return compare_backward(self.model, layer, inputs, target, position=position)

    def code(self) -> str:
        """Plain-torch Python (no hookwidgets) that registers hooks doing what the explorer's hooks do."""
        return hook_code(self.hooks, model=self.model)

    def export(self, path: str | os.PathLike) -> Path:
        """Write every capture to ``path`` (``.safetensors``) with a JSON sidecar of targets, kinds and steps (and the
        ``tokens``, ``decoder_tokens`` and ``generations`` when known)."""
        labels = {"tokens": self.tokens, "decoder_tokens": self.decoder_tokens, "generations": self.generations or None}
        return export_captures(self.captures, path, labels=labels)

    def gradcam(
        self,
        layer: str | nn.Module | None = None,
        inputs: Inputs | None = None,
        target: Any = None,
        method: str = "gradcam",
        *,
        position: int | None = None,
    ) -> torch.Tensor:
        """A CAM of ``target`` at ``layer`` (None: ``default_layer``'s, on the image path): ``(N, H, W)`` in [0, 1].

        ``method`` is ``gradcam``, ``gradcam++``, ``hirescam``, ``xgradcam`` or ``layercam``; the
        tensor's ``.layer`` names the layer used, ``.classes`` the class explained per item and ``.target`` the score.
        """
        method = check_method(method)  # an unknown name: a ValueError with the closest one
        if method not in CAM_METHODS:
            raise ValueError(
                f"gradcam() draws CAMs ({', '.join(CAM_METHODS)}); "
                f"for {method!r} use ex.attribute(x, method={method!r})"
            )
        return self.attribute(inputs, target, method=method, layer=layer, position=position)

    def attribute(
        self,
        inputs: Inputs | None = None,
        target: Any = None,
        method: str | None = None,
        layer: str | nn.Module | None = None,
        *,
        position: int | None = None,
        n_steps: int | None = None,
        baseline: int | None = None,
        internal_batch_size: int | None = None,
    ) -> torch.Tensor:
        """Any attribution method: CAMs give ``(N, H, W)`` in [0, 1], pixel methods an input-shaped ``(N, C, H, W)``,
        token methods on token ids ``(N, T)`` (``.tokens`` names them when the explorer knows the example's tokens).

        ``target`` is a class index, one per item, ``"loss"``, a callable on the output, or None or ``"top"`` (each
        item's top class; ``position`` as in ``run``). ``method`` defaults to ``integrated_gradients`` on token ids
        (``n_steps``: 50, ``baseline``: a token id or None for zeros, ``internal_batch_size`` as Captum's), else
        ``gradcam``. The model is left as found and the explorer's hooks record nothing during the run.

        ``attention_rollout`` (Abnar & Zuidema 2020; ``target`` unused) and ``grad_attention_rollout`` (Chefer et al.
        2021) roll out the self-attention layers of one stack (an encoder-decoder's encoder) under eager attention
        and give one row, raw: ``position``, else row 0 (the last row for causal attention), ``(N, T)``; a vision
        transformer's patches ``(N, h, w)``, its class token dropped.
        """
        given = inputs
        inputs = self._inputs(inputs)
        self._materialize(inputs, "the attribution run")
        options = {"n_steps": n_steps, "baseline": baseline, "internal_batch_size": internal_batch_size}
        with self._own_run():  # its hooks record nothing here: running again without a broken one changes no record
            found = self._registry.collisions.without_colliding(
                lambda: attribute(self.model, inputs, target, method, layer, position=position, **options)
            )
        result = found.annotated()
        ids = token_ids(inputs)
        if result.dim() == 2 and ids is not None:
            result.tokens = self._token_labels(ids, given is None)
        return result

    def _token_labels(self, ids: torch.Tensor, example: bool) -> list[list[str]] | None:
        """The labels of ``ids``: the tokenizer's strings, else the example's ``tokens`` for the example inputs."""
        if self.sequences.tokenizer is not None:
            return [self.sequences.id_names(row) for row in ids.tolist()]
        return self.tokens if example else None

    def watch_ddp(self, hook: Callable | None = None, log_dir: str | os.PathLike | None = None, **options: Any) -> Any:
        """A ``hookwidgets.distributed.DDPInspector`` on the explored DistributedDataParallel model.

        ``hook`` (default: allreduce) and ``log_dir`` are the inspector's; ``ex.close()`` closes it too.
        """
        # Imported here: core stays torch-only, and the distributed inspector is a layer of its own.
        from ..distributed import DDPInspector
        from ..distributed.checks import require_ddp

        ddp = require_ddp(self.model, "ex.watch_ddp()", then="explore it: HookExplorer(ddp)")
        inspector = DDPInspector(ddp, hook=hook, log_dir=log_dir, **options)
        self.ddp_inspector = inspector
        detached = self._finalizer.detach()
        if detached is not None:
            _, close_hooks, args, kwargs = detached

            def close_all() -> None:  # holds the inspector and the registry's close, never the explorer
                inspector.close()
                close_hooks(*args, **kwargs)

            self._finalizer = weakref.finalize(self, close_all)
        self._registry.events.watching("ddp")
        return inspector

    def watch_optimizer(
        self, optimizer: torch.optim.Optimizer | None = None, *, scope: str = "local", every: int = 1
    ) -> UpdateRatioMonitor:
        """An ``UpdateRatioMonitor`` (‖Δw‖/‖w‖ per parameter per step) naming the explored model's parameters.

        ``optimizer=None`` watches every optimizer that steps a parameter of the model (global step hooks).
        A new watch replaces any monitor of the same parameters (a re-run cell never stacks); ``close()`` closes them.
        """
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"watch_optimizer() takes a torch.optim.Optimizer (or None for every optimizer of the model), "
                f"got {type(optimizer).__name__}: ex.watch_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))"
            )
        model = self.model
        params = _param_ids(optimizer)
        if params is not None and not any(id(p) in params for p in model.parameters()):
            raise ValueError(
                f"this {type(optimizer).__name__} steps no parameter of the explored {self._model_name}: "
                "pass the optimizer made from this model's parameters"
            )
        # Made before the old monitors go: a bad scope or every leaves them as they were.
        monitor = UpdateRatioMonitor(optimizer, model, scope="global" if optimizer is None else scope, every=every)
        for old in [m for m in self._monitors if m[0] is None or params is None or _param_ids(m[0]) & params]:
            old[1].close()
            self._monitors.remove(old)
        self._monitors.append((optimizer, monitor))
        self._registry.events.watching("optimizer")
        return monitor

    def __repr__(self) -> str:
        state = "closed" if self._model is None else f"{len(self.hooks)} hooks, step {self.step}"
        return f"<{type(self).__name__} of {self._model_name}: {self._module_count} modules, {state}>"

    def _inputs(self, inputs: Inputs | None) -> Inputs:
        """``inputs``, else a copy of the example inputs: a forward that changes its input in place (``x.sub_(m)``)
        must not change them for the next run, nor give the user's tensor a ``.grad``."""
        if inputs is not None:
            return inputs
        if self.example_inputs is None:
            raise ValueError("this needs inputs: pass them, or give HookExplorer example_inputs=")
        return map_tensors(self.example_inputs, _fresh_copy)

    def close(self) -> None:
        """Remove every hook the explorer added (the model's hook dicts are as before) and let go of the model."""
        for log in self._logs:  # first: each writes the step still open
            log.remove()
        self._logs = []
        self._registry.events.close()  # subscribers hear no more
        self._finalizer()
        self._model = None

    def __enter__(self) -> Explorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


LEGACY_AND_FULL_BACKWARD = ("backward", "backward_pre", "legacy_backward")


def _close_all(close_hooks: Callable[[], None], monitors: list[tuple[Any, UpdateRatioMonitor]]) -> None:
    """The explorer's finalizer: close its optimizer monitors, then remove its hooks (it holds no explorer)."""
    for _, monitor in monitors:
        monitor.close()
    monitors.clear()  # lets go of the optimizers
    close_hooks()


def _param_ids(optimizer: torch.optim.Optimizer | None) -> set[int] | None:
    """Ids of the parameters ``optimizer`` steps; None stands for every optimizer of the model."""
    if optimizer is None:
        return None
    return {id(p) for group in optimizer.param_groups for p in group["params"]}


def _detached(value: Any) -> Any:
    """``value`` with every tensor inside detached; containers (dataclasses too) rebuilt with their types."""
    return map_tensors(value, torch.Tensor.detach)


def explain_run_error(exc: BaseException, inputs: Inputs) -> str:
    """The error of a failed run as text, with the inputs' shapes so a wrong shape is obvious."""
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return f"{type(exc).__name__}: {exc}\n(inputs were {describe_inputs(inputs)})\n\n{trace}"


def _nested(flat: list[str], shape: torch.Size) -> list:
    """``flat`` as nested lists of ``shape``."""
    for size in reversed(shape[1:]):
        flat = [flat[i : i + size] for i in range(0, len(flat), size)]
    return flat


def _fresh_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A copy with the same values and ``requires_grad``, connected to nothing."""
    return tensor.detach().clone().requires_grad_(tensor.requires_grad)
