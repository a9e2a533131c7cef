"""The headless explorer: tree, hooks, runs and captures of one model, with no display code.

A facade: each method says what it does and hands the work to the module whose one job it is (``hooks/attaching.py``
attach, ``hooks/runner.py`` every run with what its analysis needs, ``hooks/scored_run.py`` run()'s forward and
backward, the analyses in ``diagnostics/`` and ``attribution/``, the monitors in ``monitors/``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
from torch import nn

from .._warnings import PartialGraphWarning, ProbeFailedWarning
from ._torch import off as torch_features_off
from .attribution import CAM_METHODS, Attribution, attribute, check_method
from .capture.export import export_captures
from .capture.store import DEFAULT_MEMORY_BUDGET, CaptureStore
from .codegen.generate import hook_code
from .diagnostics.compare import BackwardComparison, compare_backward, path_as_target_refused
from .diagnostics.lens import LogitLens, logit_lens
from .diagnostics.nonfinite import first_nonfinite, summary_rows
from .diagnostics.patching import DEFAULT_BATCH, Metric, Progress, patch_sweep
from .diagnostics.summary_frame import summary_frame
from .display import display_name, quoted
from .graph.dataflow import dataflow_graph
from .graph.plain import Dataflow, GraphData
from .graph.record import GraphRecorder
from .graph.recorded import RecordedGraph
from .hooks import attaching, runner
from .hooks.edit_notes import edit_labels, edits_note
from .hooks.events import Event
from .hooks.heads import head_count
from .hooks.registry import HookGroup, HookInfo, HookRegistry, TimelineEvent
from .hooks.runner import Analysis, Runner
from .hooks.scored_run import forward_backward
from .model.attention_record import Attentions, attention_runner
from .model.inputs import Inputs, Target, explain_run_error, token_ids
from .model.lazy import has_lazy
from .model.nested import map_tensors
from .model.paths import first_name, resolve_path
from .model.scores import Score, failed_probe, output_summary, top_classes
from .model.tokens import Sequences, read_sequences
from .model.tree import ProbeResult, TreeNode, build_tree, hookable_modules, probe
from .monitors.optim import OptimizerWatches, UpdateRatioMonitor
from .monitors.scalar_log import ScalarLog, ScalarLogs

if TYPE_CHECKING:
    import pandas

log = logging.getLogger(__name__)
T = TypeVar("T")


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
        collective: bool = False,
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
        """The ``CaptureStore``: ``ex.captures[path][kind]`` is a list of ``Record``s, newest last."""
        self._registry = HookRegistry(model, self.captures, on_error=on_error)
        # every run of the model, with what its analysis needs (on a model sharded across ranks: collective or none)
        self._runner = Runner(self._registry, collective=bool(collective))
        self._registry.sharded.collective = _collective_of(weakref.ref(self))  # read as each step begins
        self._watches = OptimizerWatches()  # from watch_optimizer()
        self._logs = ScalarLogs()  # from log_to()
        self._finalizer: weakref.finalize[..., Explorer] = weakref.finalize(
            self, _close_all, self._registry.close, self._watches
        )
        self.probe_error: str | None = None
        """The text of a failed shape probe, or None."""
        self.probe_classes: list[tuple[int, float]] = []
        """The first item's top five classes in the probe's output, ``[(class, probability), …]``, as a class target
        finds the scores; ``[]`` without example inputs, or when the output holds no ``(batch, classes)`` scores."""
        self.probe_output: dict[str, Any] = output_summary(None)
        """What the probe's output offers a backward, as plain data: ``kind`` (``classes``, ``sequence``, ``scalar``,
        ``none``), the scores' ``tensor`` and ``shape``, ``words`` (``classes``, ``tokens``, ``labels``), ``positions``
        (a sequence's length), ``decoder``, ``loss`` (``target="loss"`` works) and ``top`` (``[[id, probability], …]``
        of the first item, at the last position); kind ``none`` without a probe, and then ``probe_failed`` says when the
        probe failed ("the shape probe failed: …")."""
        self.last_score: Score | None = None
        """What the latest ``run()`` backpropagated (value, description, tensor, position, classes); None after a
        run without a target."""
        self.unwatched: list[str] = []
        """Paths of the outermost ``torch.jit.script`` modules (``""``: a scripted model). They take no hooks, so they
        and their submodules show no shape and fire no hooks; attaching a module hook there raises a ValueError."""
        self.ddp_inspector: Any = None
        """The ``DDPInspector`` of the latest ``watch_ddp()``, or None."""
        self.run_log: Any = None
        """The ``hookwidgets.distributed.RunLog`` of the latest ``record_to()``, or None."""
        self._graph = RecordedGraph()
        self._probed = self._probe()
        self._tree = build_tree(model, self._probed)
        self._tree_lazy = has_lazy(model)  # its counts wait for a forward that materializes the lazy modules

    def _probe(self) -> ProbeResult | None:
        # Named without a run, so they are known also without example inputs or when the probe fails.
        self.unwatched = hookable_modules(self.model)[1]
        if self.example_inputs is None:
            return None
        model = self.model
        noted: list[bool] = []

        def note_top(module: nn.Module, args: Any, output: Any) -> None:
            if not noted:  # the root's first call is the model's output
                noted.append(True)
                self.probe_classes = top_classes(output)
                self.probe_output = output_summary(output, model, id_names=self.sequences.id_names)

        scripted = isinstance(model, torch.jit.ScriptModule)  # takes no hooks: no top classes
        handle = None if scripted else model.register_forward_hook(note_top)
        try:
            return self._runner.run(runner.PROBE, model, lambda: probe(model, self._inputs(None)))
        except Exception as exc:
            self.probe_error = explain_run_error(exc, self.example_inputs)
            self.probe_output = failed_probe(exc)
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
    def collective(self) -> bool:
        """True when every rank of a distributed job makes the same explorer calls in the same order, so the
        explorer's own runs and the reductions of sharded statistics may issue collectives; False by default: on a
        model sharded across ranks (FSDP, DDP, DTensor), the probe and attach's checks are skipped and said in
        ``diagnostics``, and a run the user asks for raises ``DistributedRunError``."""
        return self._runner.collective

    @collective.setter
    def collective(self, value: bool) -> None:
        self._runner.collective = bool(value)

    @property
    def tokens(self) -> list[list[str]] | None:
        """The input tokens' labels, one list per item (None when neither ``tokens`` nor ``tokenizer`` was given)."""
        return self.sequences.tokens

    @property
    def decoder_tokens(self) -> list[list[str]] | None:
        """The labels of an encoder-decoder model's ``decoder_input_ids``, one list per item, from ``tokenizer``."""
        return self.sequences.decoder_tokens

    @property
    def tree(self) -> TreeNode:
        """The module tree as plain data; rebuilt once a forward (``run()``, or the user's own) materialized
        the lazy modules it showed with unknown parameter counts."""
        if self._tree_lazy and self._model is not None:
            self._tree_lazy = has_lazy(self._model)
            self._tree = build_tree(self._model, self._probed)
        return self._tree

    @property
    def hooks(self) -> list[HookInfo]:
        """The explorer's live hooks in attach order, then hooks others attached (``foreign=True``, never removed)."""
        return self._registry.hooks

    @property
    def own_hooks(self) -> list[HookInfo]:
        """The explorer's own live hooks in attach order: ``hooks`` without others' (no look through the model)."""
        return self._registry.own_hooks

    @property
    def edits(self) -> list[str]:
        """The explorer's live edits (``ablate_heads``, ``scale``, a patch…), one phrase each, in attach order."""
        return edit_labels(self._registry.own_hooks)

    @property
    def monitors(self) -> list[UpdateRatioMonitor]:
        """The optimizer monitors ``watch_optimizer()`` made that still watch, oldest first."""
        return self._watches.monitors

    @property
    def recorded_graph(self) -> GraphData | None:
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
        an in-place op broke a backward hook, or a run skipped on a model sharded across ranks)."""
        skipped = self._runner.skipped.values()
        return [*torch_features_off().values(), *self._registry.collisions.explanations, *skipped]

    @property
    def step(self) -> int:
        """How many root forwards the hooks have seen."""
        return self._registry.steps_seen

    def attach(
        self,
        target: str,
        kind: str | Sequence[str] = "forward",
        action: str | Callable[..., Any] = "capture",
        *,
        edit: Any = None,
        copy: bool = False,
        with_kwargs: bool = False,
    ) -> HookInfo | HookGroup:
        """Attach hook(s) of ``kind`` at ``target``, the hooks' path (a module path, a parameter name or an autograd
        node id; ``HookInfo.path`` gives it back, as the tree names it); re-attaching replaces.

        ``action`` is ``capture``, ``stats``, ``print`` or a callable with torch's signature for the
        kind; ``edit`` (e.g. ``("scale", 2.0)``) changes the value before the action sees it. Returns the
        ``HookInfo``, or a ``HookGroup`` of them for a list of kinds: handles with ``remove()`` and ``with``.
        """
        kinds = [kind] if isinstance(kind, str) else list(kind)
        example = None if self.example_inputs is None else lambda: self._inputs(None)
        infos = attaching.attach(
            self._registry,
            self._runner,
            self.model,
            target,
            kinds,
            action,
            edit,
            copy,
            with_kwargs,
            probed=self._probed,
            example=example,
            check_node=self._check_node_id,
        )
        for info in infos:
            if info.note:  # also on ex.hooks; logged once here, at attach, not at every firing
                log.info("the %s hook on %s: %s", info.kind, quoted(info.path), info.note)
        self._registry.events.attached(infos)
        return infos[0] if isinstance(kind, str) else HookGroup(infos)

    def _check_node_id(self, node_id: str) -> None:
        """A KeyError with close ids when the recorded graph (recorded now if it can be) lacks ``node_id``."""
        # not on a model with lazy modules: recording a graph would materialize them
        # nor on one sharded across ranks, unless every rank attaches the same (collective)
        ready = self._graph.data is None and self.example_inputs is not None
        model = self.model
        if (
            ready
            and not self._runner.would_skip(runner.NODE_CHECK, model)
            and not self._runner.alone(runner.NODE_CHECK, model)
        ):
            with contextlib.suppress(Exception):  # no graph to check against: the hook's note will tell
                self.graph()
        self._graph.check(node_id, self._model_name)

    def head_count(self, path: str) -> int | None:
        """How many heads ``("ablate_heads", […])`` finds on the module at ``path`` (its output projection found in
        a forward of the example inputs when its name does not say); None where that edit would be refused."""
        family, obj = resolve_path(self.model, path)
        if family != "module" or not isinstance(obj, nn.Module):
            return None
        example = None if self.example_inputs is None else lambda: self._inputs(None)
        return head_count(self.model, path, obj, attaching.forward_probe(self._runner, self.model, example))

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
        return self._registry.generations.as_data(self.sequences.token_names)

    def detach(self, path: str | None = None, kind: str | None = None) -> list[HookInfo]:
        """Remove one hook, all hooks at ``path``, or (no arguments) every hook."""
        if path is not None:
            family, obj = resolve_path(self.model, path)
            path = first_name(self.model, family, obj) or path  # where attach put a hook asked for by an alias
        if kind is not None:
            attaching.check_kind_name(kind)
        removed = self._registry.detach(path, kind)
        self._registry.events.detached(removed)
        return removed

    def _analyse(self, analysis: Analysis, body: Callable[[], T], inputs: Inputs | None = None, **options: Any) -> T:
        """``body()`` run as ``analysis`` needs (``hooks/runner.py``), on the explored model."""
        # Runner.run gives None without running body only for an analysis with lazy="skip" (attach's checks)
        return cast(T, self._runner.run(analysis, self.model, body, inputs, **options))

    def _edited(self, analysis: Analysis, edits: bool) -> Analysis:
        """``analysis`` with the user's edits applied (``edits``) or not: the unedited model."""
        return analysis if edits else analysis._replace(edits=False)

    def _edits_note(self, edits: bool) -> str:
        """What the latest analysis run with (or without: ``edits`` False) the user's edits says about them."""
        return edits_note(self.own_hooks, applied=edits, failed=self._runner.failed_edits if edits else ())

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
            if target is None and position is not None:
                raise ValueError(f"position={position} picks where a target reads the output: pass target= as well")
            self.last_score = None
            inputs = self._inputs(inputs)
            recorder = GraphRecorder(self.model) if record_graph else None

            def forward_done() -> None:
                if recorder is not None:
                    self._graph.keep(recorder)  # before the backward frees what the nodes saved
                    self._registry.events.graph_recorded()

            def body() -> tuple[Any, Score | None]:
                model, hooks = self.model, self._registry.own_hooks
                return forward_backward(model, inputs, target, position, hooks, recorder, forward_done)

            analysis = runner.RUN._replace(state="train" if train else "eval")
            output, self.last_score = self._analyse(analysis, body, inputs)
            return map_tensors(output, torch.Tensor.detach)
        finally:
            self._registry.events.run_ended(self.step)  # its step is over: its firings, then the end of the run

    def graph(self, inputs: Inputs | None = None, *, saved_tensors: bool = True) -> GraphData:
        """The autograd graph of the last recorded run as plain data: its nodes, edges and module clusters.

        With ``inputs``, or when no run was recorded yet, records a forward of ``inputs`` (default: the
        example inputs) first; the model is left as found. A ValueError says why a run left no graph; a
        forward that raises gives the graph made before the failure, its ``"error"``, and a RuntimeWarning.
        """
        if inputs is not None or self._graph.data is None:
            inputs = self._inputs(inputs)
            model = self.model
            # the hooks a collision broke are detached, until the whole graph comes
            record = lambda: self._graph.record(model, inputs, saved_tensors)  # noqa: E731
            self._analyse(runner.GRAPH, record, inputs, reported=lambda raised: raised)
            self._registry.events.graph_recorded()
            data = self._graph.data
            if data is None:  # pragma: no cover - recording leaves a graph or raises
                raise RuntimeError(f"graph() recorded no graph of {self._model_name}")
            error = data.get("error")
            if error:  # a partial graph must not pass for the whole one
                made = f"the {len(data['nodes'])} nodes made before it"
                warnings.warn(
                    f"the forward of {self._model_name} raised {error}; the graph holds only {made}",
                    PartialGraphWarning,
                    stacklevel=2,
                )
            return data
        return self._graph.data

    def saved_memory(self) -> dict[str, int]:
        """Bytes each module saved for backward in the recorded run (activation memory), largest first."""
        if self._graph.data is None:
            self.graph()
        return dict(sorted(self._graph.saved_by_module.items(), key=lambda item: -item[1]))

    def dataflow(self, depth: int | None = None) -> Dataflow:
        """Modules as nodes and the tensors passed between them, from the recorded graph (``depth`` merges)."""
        return dataflow_graph(self.graph(), depth=depth)

    def first_nonfinite(self, inputs: Inputs | None = None, *, train: bool = False) -> str | None:
        """The first module, in the order forwards finish, whose output held NaN or Inf (None if none).

        One forward in eval mode; ``train=True`` runs it in training mode, where BatchNorm's batch statistics
        and Dropout make NaNs of their own. The model is left as found either way.
        """
        inputs = self._inputs(inputs)
        return self._analyse(runner.FIRST_NONFINITE, lambda: first_nonfinite(self.model, inputs, train=train), inputs)

    def attention(self, inputs: Inputs | None = None, *, edits: bool = True) -> Attentions:
        """``{module path: attention probabilities (N, H, T_q, T_k)}`` of one forward, in execution order: what the
        model returns with ``output_attentions=True`` under eager attention, from any implementation it runs (a
        module called twice gives ``path#2`` too).

        For that run only, every config is set to eager attention and ``nn.MultiheadAttention`` asked for per-head
        weights (an older transformers model, which declares nothing to record, is called with
        ``output_attentions=True``); the model, its configs and hooks are left as found, and the explorer's hooks
        record nothing. The attached edits apply (``edits=False``: the unedited model); the result's ``.edits`` says so.
        """
        run = attention_runner(self.model, self._model_name)  # a ValueError naming what it looked for if none
        inputs = self._inputs(inputs)
        found = Attentions(self._analyse(self._edited(runner.ATTENTION, edits), lambda: run(inputs), inputs))
        found.edits = self._edits_note(edits)
        return found

    def logit_lens(
        self,
        inputs: Inputs | None = None,
        *,
        top_k: int = 5,
        unembed: Callable[[torch.Tensor], torch.Tensor] | None = None,
        edits: bool = True,
    ) -> LogitLens:
        """Each block's residual output read as the model reads its last block's: through what its forward runs
        between that block and the output embedding (a final norm, a projection), the embedding, and what the forward
        does to the logits after it (a bias, a soft cap); ``unembed``: ``hidden -> logits`` for a model that declares
        no embedding. Returns ``layers`` (block paths in execution order, then
        ``"output"``, the model's own logits), ``ids`` and ``probs`` ``(L, N, T, top_k)``, the final answer's
        ``answer_probs`` and ``answer_ranks`` ``(L, N, T)``, ``labels`` (the ids' strings, nested lists) when a
        tokenizer was given, and ``edits``: the attached edits apply (``edits=False``: the unedited model), said there.
        One forward (a second records what a forward that changes the embedding's logits does to them); the model is
        left as found."""
        inputs = self._inputs(inputs)
        lens: LogitLens = self._analyse(
            self._edited(runner.LENS, edits),
            lambda: logit_lens(self.model, inputs, top_k=top_k, unembed=unembed),
            inputs,
        )
        lens["edits"] = self._edits_note(edits)
        # the ids as a Python list (L·N·T·top_k of them) only when a tokenizer names them
        labels = self.sequences.nested_names(lens["ids"])
        if labels is not None:
            lens["labels"] = labels
        return lens

    def patch_sweep(
        self,
        clean: Inputs,
        corrupted: Inputs,
        *,
        layers: Sequence[str] | None = None,
        metric: Metric | str | None = None,
        batch_size: int = DEFAULT_BATCH,
        progress: Progress | None = None,
        edits: bool = True,
    ) -> torch.Tensor:
        """Activation patching: ``(L, T)`` of ``metric(output)`` for the ``corrupted`` run (batch 1) with the clean
        activation of each layer (default: every block) at each position patched in. ``metric``: ``"top_logit"`` (the
        default: the clean top token's logit at the last position, minus it unpatched), ``"logit_diff"`` (the logit of
        the clean answer minus the corrupted answer's, minus it unpatched), ``"recovered"`` (that difference's fraction
        recovered: 0 corrupted, 1 clean; a ValueError where clean and corrupted differences are equal), or a callable
        mapping a batched output to ``(B,)``. Up to ``batch_size`` positions run in one forward; ``progress(done,
        total)`` after each. The result's ``.layers`` are the paths, ``.tokens`` the clean tokens' labels (None when
        unknown), ``.metric`` the metric's name, ``.clean`` and ``.corrupted`` its unpatched values (what a full
        restoration and no effect give), ``.differs`` the positions whose tokens differ. Both runs have the attached
        edits (``edits=False``: the unedited model), which ``.edits`` says. Model left as found."""

        def sweep() -> torch.Tensor:
            return patch_sweep(
                self.model,
                clean,
                corrupted,
                layers=layers,
                metric=metric,
                batch_size=batch_size,
                progress=progress,
                names=self.sequences.token_names,
            )

        result = self._analyse(self._edited(runner.PATCH_SWEEP, edits), sweep, clean)
        tokens = self.sequences.labels_of(self.model, clean, clean is self.example_inputs, result.shape[1])
        result.tokens = tokens  # type: ignore[attr-defined]  # said on the plain tensor, as patch_sweep's .layers
        result.edits = self._edits_note(edits)  # type: ignore[attr-defined]
        return result

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
        events = self._registry.events
        return self._logs.open(
            writer,
            every,
            fields,
            self.captures,
            self.subscribe,
            events.flush,
            lambda: self.own_hooks,
            lambda kinds: cast(HookGroup, self.attach("", kinds, action="stats")),  # a list of kinds: a HookGroup
        )

    @path_as_target_refused
    def compare_backward(
        self, layer: str, inputs: Inputs | None = None, target: Target = None, *, position: int | None = None
    ) -> BackwardComparison:
        """The legacy and the full backward hook's gradients on ``layer`` side by side (on hook-free copies),
        in the backward of the score ``target`` at ``position`` (as in ``run``; default: the sum of the output)."""
        inputs = self._inputs(inputs)
        compare = lambda: compare_backward(self.model, layer, inputs, target, position=position)  # noqa: E731
        return self._analyse(runner.COMPARE_BACKWARD, compare, inputs)

    def code(self) -> str:
        """Plain-torch Python (no hookwidgets) that registers hooks doing what the explorer's hooks do."""
        return hook_code(self.hooks, model=self.model)

    def export(self, path: str | os.PathLike[str]) -> Path:
        """Write every capture to ``path`` (``.safetensors``) with a JSON sidecar of the records' hook paths, kinds and
        steps (and the ``tokens``, ``decoder_tokens`` and ``generations`` when known)."""
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
        edits: bool = True,
    ) -> torch.Tensor:
        """A CAM of ``target`` at ``layer`` (None: ``default_layer``'s, on the image path): ``(N, H, W)`` in [0, 1].

        ``method`` is ``gradcam``, ``gradcam++``, ``hirescam``, ``xgradcam`` or ``layercam``; the
        tensor's ``.layer`` names the layer used, ``.classes`` the class explained per item, ``.target`` the score and
        ``.edits`` whether the attached edits applied (``edits=False``: the unedited model).
        """
        method = check_method(method)  # an unknown name: a ValueError with the closest one
        if method not in CAM_METHODS:
            raise ValueError(
                f"gradcam() draws CAMs ({', '.join(CAM_METHODS)}); "
                f"for {method!r} use ex.attribute(x, method={method!r})"
            )
        return self.attribute(inputs, target, method=method, layer=layer, position=position, edits=edits)

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
        edits: bool = True,
    ) -> torch.Tensor:
        """Any attribution method: CAMs give ``(N, H, W)`` in [0, 1], pixel methods an input-shaped ``(N, C, H, W)``,
        token methods on token ids ``(N, T)`` (``.tokens`` names them when the explorer knows the example's tokens).

        ``target`` is a class index, one per item, ``"loss"``, a callable on the output, or None or ``"top"`` (each
        item's top class; ``position`` as in ``run``). ``method`` defaults to ``integrated_gradients`` on token ids
        (``n_steps``: 50, ``baseline``: a token id or None for zeros, ``internal_batch_size`` as Captum's), else
        ``gradcam``. The model is left as found and the explorer's hooks record nothing during the run; the attached
        edits apply, to activations and gradients alike (``edits=False``: the unedited model), as ``.edits`` says.

        ``attention_rollout`` (Abnar & Zuidema 2020; ``target`` unused) and ``grad_attention_rollout`` (Chefer et al.
        2021) roll out the self-attention layers of one stack (an encoder-decoder's encoder) under eager attention
        and give one row, raw: ``position``, else row 0 (the last row for causal attention), ``(N, T)``; a vision
        transformer's patches ``(N, h, w)``, its class token dropped.
        """
        given = inputs
        inputs = self._inputs(inputs)
        options = {"n_steps": n_steps, "baseline": baseline, "internal_batch_size": internal_batch_size}

        def run() -> Attribution:  # its hooks record nothing: running again without a broken one changes no record
            return attribute(self.model, inputs, target, method, layer, position=position, **options)

        made = self._analyse(self._edited(runner.ATTRIBUTION, edits), run, inputs)
        made.edits = self._edits_note(edits)
        result = made.annotated()
        ids = token_ids(inputs)
        if result.dim() == 2 and ids is not None:
            result.tokens = self.sequences.ids_labels(ids, given is None)  # type: ignore[attr-defined]  # said on the plain tensor
        return result

    def watch_ddp(
        self, hook: Callable[..., Any] | None = None, log_dir: str | os.PathLike[str] | None = None, **options: Any
    ) -> Any:
        """A ``hookwidgets.distributed.DDPInspector`` on the explored DistributedDataParallel model.

        ``hook`` (default: allreduce) and ``log_dir`` are the inspector's (by default ``record_to``'s directory, when a
        run log is open, so ``open_run`` finds both); ``ex.close()`` closes it too.
        """
        # Imported here: core stays torch-only, and the distributed inspector is a layer of its own.
        from ..distributed import DDPInspector
        from ..distributed.checks import require_ddp

        ddp = require_ddp(self.model, "ex.watch_ddp()", then="explore it: HookExplorer(ddp)")
        if log_dir is None and self.run_log is not None:
            log_dir = self.run_log.path.parent  # one directory per run: open_run lists the inspector's logs too
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

    def record_to(self, log_dir: str | os.PathLike[str], every: int = 1, *, max_bytes: int | None = None) -> Any:
        """Write this rank's hook records to the run log in ``log_dir`` (a ``hookwidgets.distributed.RunLog``): their
        statistics (a capture's computed from its tensor), path, kind, phase and call, one frame per step as the next
        step begins, every ``every`` steps; ``hookwidgets.open_run(log_dir)`` reads every rank's.

        Call it on every rank; ranks, world size and node come from torch.distributed (rank 0 of 1 without it).
        ``max_bytes``: this rank's size budget (default 1 GiB), where the log stops. A new call replaces the last log;
        ``ex.close()`` writes the open step and closes it.
        """
        # Imported here: core stays torch-only, and the run log is the distributed layer's.
        from ..distributed.run_writer import DEFAULT_MAX_BYTES, RunLog

        log = RunLog(log_dir, dict(self.tree), every, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
        self._stop_run_log()
        self.run_log = log
        self.captures.taps += (log.tap,)
        self._registry.step_listeners.append(log.on_step)
        return log

    def _stop_run_log(self) -> None:
        """Close the open run log and take it off the store and the clock."""
        log = self.run_log
        if log is None:
            return
        self.run_log = None
        self.captures.taps = tuple(tap for tap in self.captures.taps if tap != log.tap)
        listeners = self._registry.step_listeners
        listeners[:] = [listener for listener in listeners if listener != log.on_step]
        log.close()

    def watch_optimizer(
        self, optimizer: torch.optim.Optimizer | None = None, *, scope: str = "local", every: int = 1
    ) -> UpdateRatioMonitor:
        """An ``UpdateRatioMonitor`` (‖Δw‖/‖w‖ per parameter per step) naming the explored model's parameters.

        ``optimizer=None`` watches every optimizer that steps a parameter of the model (global step hooks).
        A new watch replaces any monitor of the same parameters (a re-run cell never stacks); ``close()`` closes them.
        """
        monitor = self._watches.watch(optimizer, self.model, self._model_name, scope, every)
        self._registry.events.watching("optimizer")
        return monitor

    def __repr__(self) -> str:
        state = "closed" if self._model is None else f"{_count(len(self.hooks), 'hook')}, step {self.step}"
        return f"<{type(self).__name__} of {self._model_name}: {_count(self._module_count, 'module')}, {state}>"

    def _inputs(self, inputs: Inputs | None) -> Inputs:
        """``inputs``, else a copy of the example inputs: a forward that changes its input in place (``x.sub_(m)``)
        must not change them for the next run, nor give the user's tensor a ``.grad``."""
        if inputs is not None:
            return inputs
        if self.example_inputs is None:
            raise ValueError("this needs inputs: pass them, or give HookExplorer example_inputs=")
        fresh: Inputs = map_tensors(self.example_inputs, _fresh_copy)
        return fresh

    def sync_stats(self) -> int:
        """Reduce the DTensor statistics recorded since the last step began to their full tensors' now, in one
        collective; returns how many records it reduced. Each step's are reduced as the next step begins: call this
        on every rank, at the same point, for the last step's (a collective one rank issues alone hangs the job)."""
        if not self.collective:
            raise RuntimeError(
                "sync_stats() issues a collective every rank must take part in, and this explorer was made with "
                "collective=False: make it with collective=True on every rank (all ranks then make the same explorer "
                "calls); until then the statistics of DTensors are the local shard's, as their scope says"
            )
        return self._registry.reduce_stats()

    def close(self) -> None:
        """Remove every hook the explorer added (the model's hook dicts are as before) and let go of the model."""
        self._logs.close()  # first: each writes the step still open
        self._stop_run_log()
        self._registry.events.close()  # subscribers hear no more
        self._finalizer()
        self._model = None

    def __enter__(self) -> Explorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (the repr's "1 hook", "3 modules")."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _close_all(close_hooks: Callable[[], None], watches: OptimizerWatches) -> None:
    """The explorer's finalizer: close its optimizer monitors, then remove its hooks (it holds no explorer)."""
    watches.close()  # lets go of the optimizers
    close_hooks()


def _collective_of(explorer: weakref.ref[Explorer]) -> Callable[[], bool]:
    """The explorer's ``collective`` as it is when read, through a weak reference (the registry holds no explorer)."""

    def collective() -> bool:
        found = explorer()
        return found is not None and found.collective

    return collective


def _fresh_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A copy with the same values and ``requires_grad``, connected to nothing."""
    return tensor.detach().clone().requires_grad_(tensor.requires_grad)
