"""The score a backward explains, for every output shape: a class, a token at a position, the loss, or a callable.

One resolver serves ``run``, the attributions and ``compare_backward``. The scores tensor is the output itself,
else its ``logits`` field, else its first floating-point tensor of 2 or 3 dimensions: ``(N, classes)`` scores,
or ``(N, positions, vocabulary or labels)`` scores of a sequence, read at one position.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import torch
from torch import nn

from .inputs import describe_inputs
from .meta import is_meta, no_values
from .nested import children

TARGET_FORMS = '"top", a class index (3), one index per batch item ([3, 7]), "loss" or a callable(output) -> scalar'
SCALAR_FIX = "pass target=callable(output) returning a scalar instead"
PER_ITEM_FIX = "pass target=callable(output) returning one score per item, e.g. lambda out: out[:, 3]"


@dataclasses.dataclass(frozen=True)
class Score:
    """What a backward was taken from: its value and, in words, which tensor, position and classes were chosen."""

    value: float
    """The score backpropagated (the items' scores summed)."""
    description: str
    """What was chosen, e.g. ``output.logits[:, -1] · top next token`` or ``output.logits · class 3``."""
    tensor: str | None
    """Where the scores were read: ``output``, ``output.logits``, ``output[0]``, ``output.loss``; None: a callable."""
    position: int | None
    """The sequence position read (as given; default -1), for a sequence output; else None."""
    classes: list[int] | None
    """The class, token id or label chosen per item; None for the loss or a callable."""


@dataclasses.dataclass(frozen=True)
class ScoreTensor:
    """The tensor of an output that class, token and "top" targets read, and what it holds."""

    name: str
    """How the output reaches it: ``output``, ``output.logits``, ``output[0]``."""
    tensor: torch.Tensor
    kind: str
    """``classes`` for ``(N, C)``, ``sequence`` for ``(N, T, V)``."""


def find_scores(output: Any) -> tuple[str, torch.Tensor] | None:
    """``(name, tensor)`` of the scores in ``output``: the output itself if a tensor, else the ``logits`` key or field
    (dicts and other mappings, HF ModelOutputs, dataclasses, namedtuples), else the first floating-point tensor of
    2 or 3 dimensions among its items; None when there is none."""
    if isinstance(output, torch.Tensor):
        return "output", output
    if isinstance(output, tuple) and hasattr(output, "_fields"):  # a namedtuple names its items as a dataclass does
        output = cast(Any, output)._asdict()  # a namedtuple: mypy sees only a tuple
    items = children(output)
    if items is None:
        return None
    keyed = not isinstance(output, (tuple, list))
    values = list(items)
    logits = dict(values).get("logits") if keyed else None
    if isinstance(logits, torch.Tensor):
        return "output.logits", logits
    # Floating point only: a 2-D integer tensor beside the scores (token ids, labels) is no score; a 4-D feature
    # map is none either (it has no one score per class).
    for key, value in values:
        if isinstance(value, torch.Tensor) and value.dim() in (2, 3) and value.is_floating_point():
            return (f"output.{key}" if keyed else f"output[{key}]"), value
    return None


def output_scores(output: Any, fix: str = SCALAR_FIX) -> ScoreTensor:
    """The scores a class or token target reads; a ValueError naming what the output holds, ending with ``fix``."""
    found = find_scores(output)
    if found is None or found[1].dim() not in (2, 3):
        got = describe_output(output)
        raise ValueError(
            "a class target needs scores of shape (batch, classes), or (batch, positions, vocabulary) for a "
            f"sequence, got {got}; {fix}"
        )
    name, tensor = found
    return ScoreTensor(name, tensor, "classes" if tensor.dim() == 2 else "sequence")


def class_scores(output: Any, fix: str = SCALAR_FIX) -> torch.Tensor:
    """The ``(batch, classes)`` scores of an output, or of a sequence output ``(N, T, V)`` at its last position."""
    scores = output_scores(output, fix)
    return scores.tensor if scores.kind == "classes" else scores.tensor[:, -1]


def find_loss(output: Any) -> tuple[str, torch.Tensor] | None:
    """``(name, loss)``: the output's ``loss`` key or field holding one value, or the output itself if one value."""
    if isinstance(output, torch.Tensor):
        return ("output", output) if output.numel() == 1 and output.is_floating_point() else None
    if isinstance(output, tuple) and hasattr(output, "_fields"):
        output = cast(Any, output)._asdict()  # a namedtuple: mypy sees only a tuple
    if isinstance(output, (tuple, list)):
        return None
    items = children(output)
    loss = dict(items).get("loss") if items is not None else None
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return "output.loss", loss
    return None


def resolve_score(
    output: Any,
    target: Any,
    position: int | None = None,
    *,
    model: nn.Module | None = None,
    per_item: bool = False,
) -> tuple[torch.Tensor, Score]:
    """The scalar to backpropagate for ``target`` and the ``Score`` saying what it is.

    ``target``: a class (or token id at ``position`` of a sequence output), one per item, ``"top"``, ``"loss"``
    or a callable on the output (``per_item``: it may return one score per item, summed). ``model`` lends its
    words: a sequence whose last dimension is the config's ``vocab_size`` holds tokens, an encoder-decoder's
    positions are the decoder's.
    """
    if callable(target):
        return _callable_score(output, target, position, per_item)
    target = score_target(target)
    if target == "loss":
        if position is not None:
            raise ValueError(f"position={position} does not apply to target='loss': the loss is one value already")
        found = find_loss(output)
        if found is None:
            raise ValueError(
                f"target='loss' needs a loss in the output, got {describe_output(output)}; pass labels with the "
                "inputs (e.g. labels=input_ids for a language model) so the model returns a loss, or "
                "target=callable(output) returning a scalar"
            )
        name, loss = found
        _check_values(loss, f"the loss ({name})")
        return loss.reshape(()), Score(float(loss.detach()), name, name, None, None)
    scores = output_scores(output, PER_ITEM_FIX if per_item else SCALAR_FIX)
    tensor, where = scores.tensor, scores.name
    _check_values(tensor, f"the score tensor {where}")
    words = _words(model, scores)
    if scores.kind == "sequence":
        length = tensor.shape[1]
        position = -1 if position is None else _position(position)
        if not -length <= position < length:
            raise IndexError(
                f"position {position} is out of range for {where} of shape {tuple(tensor.shape)}: its sequence "
                f"length is {length}, so positions go from {-length} to {length - 1}"
            )
        tensor = tensor[:, position]
        where = f"{where}[:, {position}]" + (f" (decoder position {position} of {length})" if words["decoder"] else "")
    elif position is not None:
        raise ValueError(
            f"position={position} applies to sequence scores (batch, positions, vocabulary), but {where} has shape "
            f"{tuple(tensor.shape)}, one score per class: leave position out"
        )
    index = _indices(tensor, target, words)
    score = tensor.gather(1, index[:, None]).sum()
    classes = index.tolist()
    return score, Score(
        float(score.detach()), f"{where} · {_chosen(target, classes, words)}", scores.name, position, classes
    )


def _check_values(value: Any, where: str) -> None:
    """A ValueError when the score a backward would start from is on the meta device (it has no value)."""
    if is_meta(value):
        raise ValueError(no_values("a backward from a score (run(target=...), attributions)", where))


def score_target(target: Any) -> str | int | list[int]:
    """``target`` as "top", "loss", an int or a list of ints; a ValueError naming the accepted forms otherwise.

    An integer tensor counts as its value(s) (``pred.argmax(1)`` is a fine target), a numpy integer as
    an int; a bool, a float or another string is refused rather than read as a class.
    """
    if isinstance(target, str):
        if target in ("top", "loss"):
            return target
    elif isinstance(target, torch.Tensor):
        if (
            target.dim() <= 1
            and not target.is_floating_point()
            and not target.is_complex()
            and target.dtype != torch.bool
        ):
            return target.tolist()
    elif isinstance(target, Sequence):
        indices = [_index(item) for item in target]
        if None not in indices:
            return cast(list[int], indices)  # None is not among them
    elif (index := _index(target)) is not None:
        return index
    raise ValueError(f"target {target!r} is not a score target; pass {TARGET_FORMS}")


def backward_score(output: Any, target: Any, position: int | None = None) -> torch.Tensor:
    """The scalar to backpropagate for ``target`` (see ``resolve_score``)."""
    return resolve_score(output, target, position)[0]


def _callable_score(
    output: Any, target: Callable[[Any], torch.Tensor], position: int | None, per_item: bool
) -> tuple[torch.Tensor, Score]:
    if position is not None:
        raise ValueError(f"position={position} does not apply to a callable target: it reads the output itself")
    score = target(output)
    _check_values(score, "the callable target's score")
    if per_item:
        if not isinstance(score, torch.Tensor) or score.dim() > 1:
            got = tuple(score.shape) if isinstance(score, torch.Tensor) else type(score).__name__
            raise ValueError(
                f"a callable target must return one score per item (N,) or a scalar, got {got}; "
                "e.g. lambda out: out[:, 3]"
            )
        score = score.sum()
    elif not isinstance(score, torch.Tensor) or score.numel() != 1:
        raise ValueError("a callable target must return a scalar tensor, e.g. lambda out: out[:, 3].sum()")
    score = score.reshape(())
    name = getattr(target, "__name__", type(target).__name__)
    return score, Score(float(score.detach()), f"{name}(output)", None, None, None)


def _indices(scores: torch.Tensor, target: str | int | list[int], words: dict[str, Any]) -> torch.Tensor:
    """One index per item into ``scores`` ``(N, C)``: each item's top one, the one given, or one given per item."""
    batch, classes = scores.shape
    if target == "top":
        return scores.detach().argmax(dim=1)
    if isinstance(target, int):
        index = torch.full((batch,), target, dtype=torch.long, device=scores.device)
    else:
        index = torch.as_tensor([int(t) for t in target], dtype=torch.long, device=scores.device)
        if index.shape != (batch,):
            raise ValueError(f"target has {index.numel()} class indices but the batch has {batch} items")
    bad = index[(index < 0) | (index >= classes)]
    if bad.numel():
        raise ValueError(
            f"target {words['one']} {bad[0].item()} is out of range: the output has {classes} {words['many']} "
            f"(0 to {classes - 1})"
        )
    return index


def _chosen(target: str | int | list[int], classes: list[int], words: dict[str, Any]) -> str:
    if target == "top":
        top: str = words["top"]
        return top
    if isinstance(target, int):
        return f"{words['one']} {target}"
    return f"{words['many']} {classes}"


def _words(model: nn.Module | None, scores: ScoreTensor) -> dict[str, Any]:
    """How the chosen scores are named: classes, next tokens (a language model's vocabulary) or labels per token."""
    if scores.kind == "classes":
        return {"one": "class", "many": "classes", "top": "top class", "decoder": False}
    config = getattr(model, "config", None)
    decoder = getattr(config, "is_encoder_decoder", False) is True  # duck-typed: transformers' configs say it
    # A transformers config declares the vocabulary: where it declares none (a detector's classes per query) or
    # another size, the scores are labels. Other models are taken for language models unless their vocab_size differs.
    declared = callable(getattr(config, "get_text_config", None))
    vocabulary = _vocabulary(config) if declared else getattr(config, "vocab_size", None)
    if (declared or isinstance(vocabulary, int)) and vocabulary != scores.tensor.shape[-1]:
        return {"one": "label", "many": "labels", "top": "top label", "decoder": decoder}
    return {"one": "token id", "many": "token ids", "top": "top next token", "decoder": decoder}


def _vocabulary(config: Any) -> Any:
    """A transformers config's vocabulary size: a multimodal model's is its text config's; None where it has none."""
    try:
        return getattr(config.get_text_config(), "vocab_size", None)
    except ValueError:  # several text configs (an encoder's and a decoder's): read the decoder's, which scores
        return getattr(config.get_text_config(decoder=True), "vocab_size", None)


def _position(value: Any) -> int:
    """``position`` as an int (numpy integers too); a TypeError for anything else."""
    index = _index(value)
    if index is None:
        raise TypeError(f"position must be an integer such as -1 (the last position), got {value!r}")
    return index


def _index(value: Any) -> int | None:
    """``value`` as an int when it is an integer other than a bool (numpy integers too), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def output_summary(
    output: Any,
    model: nn.Module | None = None,
    k: int = 5,
    *,
    id_names: Callable[[list[int]], list[str] | None] | None = None,
) -> dict[str, Any]:
    """What a model output offers a backward, as plain data: ``kind`` (``classes``, ``sequence``, ``scalar`` or
    ``none``), the scores' ``tensor`` name and ``shape``, ``words`` (``classes``, ``tokens`` or ``labels``),
    ``positions`` (a sequence's length), ``decoder`` (positions are an encoder-decoder's decoder positions),
    ``loss`` (``target="loss"`` works), ``top``, ``[[id, probability], …]`` of the first item's top ``k`` at the
    last position, and ``labels``, ``{id: name}`` of those ids in the model's words (``id_names``, e.g. a tokenizer's,
    for token ids; the config's ``id2label`` for classes and labels), and ``probe_failed``, "" here (``failed_probe``
    says why a failed probe offers none)."""
    summary: dict[str, Any] = {
        "kind": "none",
        "tensor": None,
        "shape": None,
        "words": None,
        "positions": None,
        "decoder": False,
        "loss": find_loss(output) is not None,
        "top": [],
        "labels": {},
        "probe_failed": "",
    }
    found = find_scores(output)
    if isinstance(output, torch.Tensor) and output.numel() == 1:
        summary["kind"] = "scalar"
    elif found is not None and found[1].dim() in (2, 3):
        scores = ScoreTensor(found[0], found[1], "classes" if found[1].dim() == 2 else "sequence")
        words = _words(model, scores)
        summary.update(kind=scores.kind, tensor=scores.name, shape=list(scores.tensor.shape))
        summary["words"] = {"class": "classes", "token id": "tokens", "label": "labels"}[words["one"]]
        if scores.kind == "sequence":
            summary.update(positions=scores.tensor.shape[1], decoder=words["decoder"])
        summary["top"] = _top(scores.tensor if scores.kind == "classes" else scores.tensor[:, -1], k)
        summary["labels"] = _id_labels(model, summary["words"], [i for i, _ in summary["top"]], id_names)
    return summary


def failed_probe(exc: BaseException) -> dict[str, Any]:
    """``output_summary`` of a shape probe that raised ``exc``: no scores, and ``probe_failed`` says so, with the
    error's first line (the default Run is then a forward only, which names the real error when it fails)."""
    reason = f"{type(exc).__name__}: {str(exc).strip()}".splitlines()[0]
    return {**output_summary(None), "probe_failed": f"the shape probe failed: {reason}"}


def _id_labels(
    model: nn.Module | None, words: str, ids: list[int], id_names: Callable[[list[int]], list[str] | None] | None
) -> dict[str, str]:
    """``{id: name}`` for ``ids``: token strings from ``id_names``, classes and labels from ``config.id2label``."""
    if words == "tokens":
        names = id_names(ids) if id_names is not None and ids else None
        return {str(i): str(n) for i, n in zip(ids, names, strict=True)} if names else {}
    id2label = getattr(getattr(model, "config", None), "id2label", None)  # duck-typed: transformers' configs hold it
    if not isinstance(id2label, Mapping):
        return {}
    return {str(i): str(id2label[i]) for i in ids if i in id2label}


def top_classes(output: Any, k: int = 5) -> list[tuple[int, float]]:
    """``[(class, probability), …]`` of the first item's top ``k`` classes, the scores found as a class target finds
    them; ``[]`` when the output holds no floating-point ``(batch, classes)`` scores or no item."""
    found = find_scores(output)
    if found is None or found[1].dim() != 2:
        return []
    return [(c, p) for c, p in _top(found[1], k)]


def _top(scores: torch.Tensor, k: int) -> list[list[Any]]:
    """``[[index, probability], …]`` of the first item's top ``k`` scores (softmax); [] for no item or no floats."""
    if not scores.is_floating_point() or scores.is_meta or scores.shape[0] == 0 or scores.shape[-1] == 0:
        return []  # a meta tensor has no values to rank
    probs = scores[0].detach().float().softmax(-1)
    values, indices = probs.topk(min(k, probs.numel()))
    return [[int(i), round(float(v), 4)] for v, i in zip(values, indices, strict=True)]


def describe_output(output: Any, limit: int = 6) -> str:
    """A model output for error messages: a tensor's shape ``(2, 3, 4)``, else its type and first ``limit`` items."""
    if isinstance(output, torch.Tensor):
        return str(tuple(output.shape))
    items = children(output)
    if items is None:
        return type(output).__name__
    items = list(items)
    keyed = not isinstance(output, (tuple, list))  # a plain sequence's keys are its indexes: not worth showing
    shown = [f"{key}: {describe_inputs(v)}" if keyed else describe_inputs(v) for key, v in items[:limit]]
    more = ", …" if len(items) > limit else ""
    brackets = "{}" if keyed else "()"
    return f"{type(output).__name__} {brackets[0]}{', '.join(shown)}{more}{brackets[1]}"
