"""``("ablate_heads", [h, ...])``: zero those heads' slice of an attention module's context (the heads' outputs,
concatenated) right before its output projection, wherever that projection is.

The projection of a module that holds its heads (a head count attribute) is found by structure in a forward of the
example inputs (``head_projection``: the Linear fed by the heads' context); without example inputs, and for a module
whose heads are a child's (BERT's attention wrapper), by its name as a hint.

Three places: a projection the module calls (GPT-2's ``c_proj``, Llama's ``o_proj``, DistilBERT's ``out_lin``, BLIP's
``projection``, BERT's ``output.dense`` seen from ``BertAttention``): a forward pre-hook zeroes the slice of its input.
A module whose output is the context (BERT's ``attention.self``, projected by its sibling ``output.dense``): the slice
of its first output is zeroed. ``nn.MultiheadAttention``, which applies ``out_proj``'s weight inside its forward
without calling the module: the forward is run again with the heads' columns of that weight zeroed — exactly the
projection of the context with the slice zeroed, with the same graph to every parameter; the first result is dropped
(one extra attention per call).
"""

from __future__ import annotations

import traceback
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from ..._warnings import HookFailedWarning
from .._torch import reparametrized
from ..display import quoted
from .head_projection import Probe, Projection, in_width, probed_projection
from .info import HeadPlan, HookInfo
from .own_runs import edit_failed, silent
from .owned import own

PROJECTIONS = ("c_proj", "o_proj", "out_proj", "proj", "output.dense", "dense")
"""Names of an output projection a module calls, tried in order where no probe can find it (no example inputs)."""
HEAD_COUNTS = ("num_heads", "num_attention_heads", "n_head", "n_heads", "heads")
HEAD_DIMS = ("head_dim", "attention_head_size")
LOOKED_FOR = (
    "a Linear the module calls on its heads' context, or one that takes its output (as BERT's attention.self's "
    "sibling output.dense), in a forward of the example inputs; without them, a child projection by name "
    f"({', '.join(PROJECTIONS)}) or a sibling 'output.dense'; or nn.MultiheadAttention; and the head count in an "
    f"attribute ({', '.join(HEAD_COUNTS)}) or config.num_attention_heads"
)
NO_PROBE = ": give the explorer example_inputs, so that a forward finds the Linear fed by the heads' context"


def head_ablation(
    root: nn.Module, path: str, module: nn.Module, heads: tuple[int, ...], probe: Probe | None = None
) -> tuple[HeadPlan, Callable[[HookInfo, bool], list[RemovableHandle]]]:
    """Where the heads of ``module`` (at ``path``) meet the output projection, checked now (``probe``: a forward of
    the example inputs, see ``head_projection``): the plan, and ``install(info, raises)``, which places the hook
    zeroing ``heads`` and returns its handles; a ValueError naming the module and what was looked for when there is
    no such place or ``heads`` are out of range."""
    where = f"module {quoted(path)} ({type(module).__name__})"
    place, hooked, projection, count, dim = _heads_of(root, path, module, probe)
    if heads[-1] >= count:
        raise ValueError(
            f"('ablate_heads', {list(heads)}) on {where}: head {heads[-1]} is out of range, it has {count}"
        )
    mask = Mask(count * dim, heads, dim)

    def install(info: HookInfo, raises: bool) -> list[RemovableHandle]:
        if place == "input":
            hook = _guarded(info, raises, lambda m, args: (_zeroed(args[0], mask), *args[1:]))
            return [own(projection, projection.register_forward_pre_hook(hook, prepend=True))]
        if place == "output":
            hook = _guarded(info, raises, lambda m, args, out: _zero_first(out, mask))
            return [own(module, module.register_forward_hook(hook, prepend=True))]
        hook = _guarded(info, raises, lambda m, args, kwargs, out: _rerun_mha(m, args, kwargs, mask))
        return [own(module, module.register_forward_hook(hook, prepend=True, with_kwargs=True))]

    return HeadPlan(place, hooked, heads, dim), install


def head_count(root: nn.Module, path: str, module: nn.Module, probe: Probe | None = None) -> int | None:
    """How many heads ``("ablate_heads", …)`` finds on ``module`` (at ``path``); None where it would be refused.
    The names are tried first here, then ``probe`` (a forward) when they find no projection."""
    if _head_count(module) is None:
        return None  # no heads to count: no forward needed to say so
    for tried in (None, probe) if probe is not None else (None,):
        try:
            return _heads_of(root, path, module, tried)[3]
        except ValueError:
            continue
    return None


def _heads_of(
    root: nn.Module, path: str, module: nn.Module, probe: Probe | None
) -> tuple[str, str, nn.Module, int, int]:
    """(place, path, projection, head count, head dim) of a head ablation on ``module``; a ValueError naming the
    module and what was looked for when its heads' context and output projection are not found."""
    where = f"module {quoted(path)} ({type(module).__name__})"
    count = _head_count(module)
    hooked, projection = path, module  # the projection's place and module where it takes the context ("input")
    place: str | None
    if isinstance(module, nn.MultiheadAttention):
        if reparametrized is None:  # pragma: no cover - every torch hookwidgets supports has it
            raise ValueError(f"('ablate_heads', …) on {where}: this torch cannot swap out_proj's weight for a call")
        place, width = "mha", module.embed_dim
    else:
        # a forward shows the projection of the module that holds the heads; a module whose heads are a child's (a
        # wrapper such as BERT's attention, or a block holding attention and MLP) is left to the names
        own = probe is not None and _head_count(module, children=False) is not None
        found = probed_projection(root, module, probe) if own and probe is not None else None
        if found is None:  # no forward to look in: the names, as a hint
            found = _named_projection(root, path, module)
        place = found.place if found is not None else None
        if found is not None and found.place == "input":
            hooked, projection = found.path, found.module
        width = None if found is None else in_width(found.module)
    if place is None or count is None:
        missing = "no output projection" if place is None else "no head count"
        hint = NO_PROBE if probe is None and count is not None else ""
        raise ValueError(f"('ablate_heads', …) on {where}: {missing} found; looked for {LOOKED_FOR}{hint}")
    dim = _head_dim(module, width, count)
    if width is not None and width != count * dim:
        raise ValueError(
            f"('ablate_heads', …) on {where}: its {count} heads of {dim} features do not make up the {width} features "
            "its output projection takes, so the heads' slices are unknown"
        )
    return place, hooked, projection, count, dim


class Mask:
    """Ones with the heads' slices zero, made once per device and dtype (a hook runs on every forward)."""

    __slots__ = ("_made", "_ones")

    def __init__(self, width: int, heads: tuple[int, ...], dim: int) -> None:
        ones = torch.ones(width)
        for h in heads:
            ones[h * dim : (h + 1) * dim] = 0
        self._ones = ones
        self._made: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}

    def like(self, t: torch.Tensor) -> torch.Tensor:
        key = (t.device, t.dtype)
        mask = self._made.get(key)
        if mask is None:
            mask = self._made[key] = self._ones.to(device=t.device, dtype=t.dtype)
        return mask

    def numel(self) -> int:
        return self._ones.numel()


def _guarded(info: HookInfo, raises: bool, edit: Callable[..., Any]) -> Callable[..., Any]:
    """``edit`` as a hook of ``info``'s: silent in the explorer's own runs unless they apply edits; a failure is
    recorded on ``info`` and leaves the value unchanged (``raises``: the registry's on_error="raise", re-raised)."""

    def hook(*values: Any) -> Any:
        if silent(info.edit) or not info.active:
            return None
        try:
            return edit(*values)
        except Exception as exc:
            info.last_error = "".join(traceback.format_exception(exc)).rstrip()
            edit_failed(info)  # in an analysis's run: its result says it ran without this edit
            if raises:
                raise
            where = f"hook {info.kind!r} on {quoted(info.path)}"
            warnings.warn(f"{where} failed: {exc!r} (recorded on ex.hooks)", HookFailedWarning, stacklevel=2)
            return None

    return hook


def _zeroed(context: torch.Tensor, mask: Mask) -> torch.Tensor:
    if context.shape[-1] != mask.numel():
        raise ValueError(
            f"ablate_heads: the context has {context.shape[-1]} features in its last dim (shape "
            f"{tuple(context.shape)}), the heads span {mask.numel()}"
        )
    return context * mask.like(context)


def _zero_first(out: Any, mask: Mask) -> Any:
    if isinstance(out, torch.Tensor):
        return _zeroed(out, mask)
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
        return (_zeroed(out[0], mask), *out[1:]) if type(out) is tuple else type(out)(_zeroed(out[0], mask), *out[1:])
    raise ValueError(f"ablate_heads: expected the context as the output or its first element, got {type(out).__name__}")


def _rerun_mha(module: nn.MultiheadAttention, args: tuple[Any, ...], kwargs: dict[str, Any], mask: Mask) -> Any:
    if reparametrized is None:  # pragma: no cover - refused at attach (_heads_of)
        raise ValueError("ablate_heads: this torch cannot swap out_proj's weight for a call")
    weight = module.out_proj.weight
    masked = weight * mask.like(weight)  # the heads' input columns zeroed
    with reparametrized(module, {"out_proj.weight": masked}):
        return module.forward(*args, **kwargs)


def _named_projection(root: nn.Module, path: str, module: nn.Module) -> Projection | None:
    """The projection by name: a Linear-like child of ``PROJECTIONS``, else a sibling ``output.dense``."""
    for name in PROJECTIONS:
        try:
            child = module.get_submodule(name)
        except AttributeError:
            continue
        if in_width(child) is not None:
            return Projection("input", f"{path}.{name}".lstrip("."), child)
    if not path:
        return None
    parent = root.get_submodule(path.rpartition(".")[0])
    try:
        sibling = parent.get_submodule("output.dense")
    except AttributeError:
        return None
    return Projection("output", path, sibling)


def _head_count(module: nn.Module, children: bool = True) -> int | None:
    for holder in (module, *module.children()) if children else (module,):
        for name in HEAD_COUNTS:
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        value = getattr(getattr(holder, "config", None), "num_attention_heads", None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _head_dim(module: nn.Module, width: int | None, count: int) -> int:
    for holder in (module, *module.children()):
        for name in HEAD_DIMS:
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    if width is None:
        raise ValueError(f"ablate_heads: no head dim found on {type(module).__name__} ({', '.join(HEAD_DIMS)})")
    return width // count
