"""Activation patching swept over layers and positions: the corrupted run with one clean activation patched in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch import nn

from ..model.blocks import decoder_blocks
from ..model.inputs import Inputs, call_model, describe_inputs, token_ids
from ..model.meta import is_meta, no_values
from ..model.nested import first_tensor, map_tensors, output_tensors
from .patch_metrics import Metric as Metric
from .patch_metrics import TokenNames, choose_metric

Progress = Callable[[int, int], Any]
DEFAULT_BATCH = 32
"""Patched copies of the corrupted inputs run in one forward at most, by default."""


def patch_sweep(
    model: nn.Module,
    clean: Inputs,
    corrupted: Inputs,
    *,
    layers: Sequence[str] | None = None,
    metric: Metric | str | None = None,
    batch_size: int = DEFAULT_BATCH,
    progress: Progress | None = None,
    names: TokenNames | None = None,
) -> torch.Tensor:
    """``(L, T)``: ``metric`` of the corrupted run with the clean activation (a layer's first output tensor) patched
    in at each layer and position (its dimension 1). ``metric``: a callable, or a name of ``patch_metrics.METRICS``
    (None: ``"top_logit"``). The result says ``.layers`` (the rows), ``.metric`` (its name), ``.clean`` and
    ``.corrupted`` (the metric of the unpatched runs: a full restoration, no effect) and ``.differs`` (the positions
    whose token ids differ; None without token ids). ``names`` labels token ids in errors. Runs as called."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    chosen = _layers(model, layers)
    clean_acts, clean_out = _recorded(model, clean, chosen, "clean")
    corrupt_acts, corrupt_out = _recorded(model, corrupted, chosen, "corrupted")
    if any(is_meta(t) for t in output_tensors(clean_out)):
        raise ValueError(no_values("patch_sweep()", "the model's output"))
    for path, _ in chosen:
        a, b = clean_acts[path], corrupt_acts[path]
        if a.dim() < 2 or a.shape[0] != 1 or b.shape[0] != 1:
            raise ValueError(
                f"patch_sweep patches one clean item into one corrupted item: at {path} the activations are "
                f"{tuple(a.shape)} (clean) and {tuple(b.shape)} (corrupted); pass inputs of batch 1 (e.g. ids[:1])"
            )
        if a.shape != b.shape:
            raise ValueError(
                f"the clean inputs {describe_inputs(clean)} and the corrupted inputs {describe_inputs(corrupted)} "
                f"differ in length: at {path} their activations are {tuple(a.shape)} and {tuple(b.shape)}; "
                "patching needs inputs of the same length (pad or trim one)"
            )
    chosen_metric = choose_metric(metric, clean_out, corrupt_out, names)
    measure = chosen_metric.measure
    # The unpatched runs' values (a full restoration, no effect): which way a patch restores, whatever the sign
    clean_value = float(_measured(measure, clean_out, 1, "the clean run")[0])
    corrupt_value = float(_measured(measure, corrupt_out, 1, "the corrupted run")[0])
    positions = clean_acts[chosen[0][0]].shape[1]
    total, done = len(chosen) * positions, 0
    result = torch.empty(len(chosen), positions)
    for row, (path, module) in enumerate(chosen):
        clean_act = clean_acts[path]
        for start in range(0, clean_act.shape[1], batch_size):
            where = torch.arange(start, min(start + batch_size, clean_act.shape[1]), device=clean_act.device)
            result[row, where.cpu()] = _patched_run(model, module, corrupted, clean_act, where, measure, path)
            done += len(where)
            if progress is not None:
                progress(done, total)
    result.layers = [path for path, _ in chosen]  # type: ignore[attr-defined]
    result.tokens = None  # type: ignore[attr-defined]
    result.metric = chosen_metric.name  # type: ignore[attr-defined]
    result.clean = clean_value  # type: ignore[attr-defined]
    result.corrupted = corrupt_value  # type: ignore[attr-defined]
    result.differs = differing_positions(clean, corrupted)  # type: ignore[attr-defined]
    return result


def differing_positions(clean: Inputs, corrupted: Inputs) -> list[int] | None:
    """The positions where the first item's token ids differ between ``clean`` and ``corrupted``; None when either
    holds no token ids or their lengths differ."""
    a, b = token_ids(clean), token_ids(corrupted)
    if a is None or b is None or a.shape[1] != b.shape[1] or a.is_meta or b.is_meta:
        return None
    return [int(t) for t in (a[0] != b[0].to(a.device)).nonzero().flatten().tolist()]


def _layers(model: nn.Module, layers: Sequence[str] | None) -> list[tuple[str, nn.Module]]:
    if layers is None:
        return decoder_blocks(model)
    if isinstance(layers, str):
        layers = [layers]
    chosen = []
    for path in layers:
        try:
            chosen.append((path, model.get_submodule(path)))
        except AttributeError:
            raise ValueError(f"layers= names {path!r}, which is no module of {type(model).__name__}") from None
    if not chosen:
        raise ValueError("layers= is empty: name at least one module path, or pass None for every block")
    return chosen


def _recorded(
    model: nn.Module, inputs: Inputs, chosen: list[tuple[str, nn.Module]], which: str
) -> tuple[dict[str, torch.Tensor], Any]:
    """Each chosen layer's first output tensor in one run of ``inputs``, and the model's output."""
    acts: dict[str, torch.Tensor] = {}
    calls: dict[str, int] = {}

    def keep(path: str) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            calls[path] = calls.get(path, 0) + 1
            tensor = first_tensor(output)
            if tensor is not None:
                acts[path] = tensor.detach()

        return hook

    handles = [module.register_forward_hook(keep(path)) for path, module in chosen]
    try:
        output = call_model(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    for path, _ in chosen:
        count = calls.get(path, 0)
        if count != 1 or path not in acts:
            how = "did not run" if not count else f"ran {count} times" if count > 1 else "returned no tensor"
            raise ValueError(
                f"{path} {how} in the {which} run: patching needs a layer that returns a tensor once per forward"
            )
    return acts, output


def _patched_run(
    model: nn.Module,
    module: nn.Module,
    corrupted: Inputs,
    clean_act: torch.Tensor,
    where: torch.Tensor,
    metric: Metric,
    path: str,
) -> torch.Tensor:
    """``metric`` of ``len(where)`` copies of the corrupted run, copy ``i`` with the clean activation at position
    ``where[i]`` of ``module``."""
    count = len(where)
    rows = torch.arange(count, device=where.device)

    def patch(module: nn.Module, args: Any, output: Any) -> Any:
        hidden = cast(torch.Tensor, first_tensor(output))  # the corrupted run's record found one (_recorded)
        patched = hidden.clone()  # the layer's own tensor may be saved or reused elsewhere: left alone
        patched[rows, where] = clean_act[0, where].to(patched.dtype)
        return map_tensors(output, lambda t: patched if t is hidden else t)

    handle = module.register_forward_hook(patch)
    try:
        output = call_model(model, _repeated(corrupted, count))
    finally:
        handle.remove()
    return _measured(metric, output, count, f"patching {path}")


def _measured(metric: Metric, output: Any, count: int, where: str) -> torch.Tensor:
    """``metric(output)`` as ``(count,)`` floats on the CPU; a ValueError when it is not one value per item."""
    values = metric(output)
    if not isinstance(values, torch.Tensor) or values.shape != (count,):
        got = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise ValueError(
            f"metric must return one value per item of a batched output, shape ({count},), got {got} ({where})"
        )
    return values.detach().float().cpu()


def _repeated(inputs: Inputs, count: int) -> Inputs:
    """The inputs with every tensor of batch 1 repeated ``count`` times along dimension 0."""
    repeated: Inputs = map_tensors(
        inputs, lambda t: t.repeat(count, *[1] * (t.dim() - 1)) if t.dim() and t.shape[0] == 1 else t
    )
    return repeated
