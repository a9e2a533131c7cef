"""What a patch sweep measures: the built-in metrics (the clean top token's logit, the logit difference, the fraction
of it recovered) and the values every metric takes on the clean and the corrupted run, which give a sweep its
direction (which way is "restored")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..model.scores import class_scores

Metric = Callable[[Any], torch.Tensor]
TokenNames = Callable[[list[int]], "list[str] | None"]
METRICS = {
    "top_logit": "the clean top token's logit, minus its corrupted value",
    "logit_diff": (
        "the logit difference (clean answer − corrupted answer at the last position), minus its corrupted value"
    ),
    "recovered": "the fraction of the logit difference recovered (0: corrupted, 1: clean)",
}
"""The built-in metrics by name, and what each measures (the figure's caption says it)."""
UNDEFINED = 1e-5
"""A logit difference gap below this share of the logits' size (at least 1) leaves ``recovered`` undefined."""


@dataclass(frozen=True)
class ChosenMetric:
    """A sweep's metric: the function of a batched output, its name (a key of ``METRICS``, or ``"custom"``) and what
    it measures."""

    measure: Metric
    name: str
    description: str


def choose_metric(
    metric: Metric | str | None, clean_out: Any, corrupt_out: Any, names: TokenNames | None = None
) -> ChosenMetric:
    """The metric ``metric`` names (None: ``"top_logit"``; a callable: itself), set up from the clean and the corrupted
    outputs; a ValueError naming the fix when it cannot be (an unknown name, one answer for both runs, no gap).
    ``names``: the labels of token ids, which the errors use (``Sequences.token_names``)."""
    if callable(metric):
        return ChosenMetric(metric, "custom", "your metric")
    name = "top_logit" if metric is None else metric
    if name not in METRICS:
        known = ", ".join(repr(m) for m in METRICS)
        raise ValueError(f"metric={metric!r} is not a metric: pass one of {known}, or a callable(output) -> (batch,)")
    clean_scores, corrupt_scores = class_scores(clean_out), class_scores(corrupt_out)
    answer = int(clean_scores[0].argmax())
    if name == "top_logit":
        baseline = corrupt_scores[0, answer]
        return ChosenMetric(lambda out: class_scores(out)[:, answer] - baseline, name, METRICS[name])
    wrong = int(corrupt_scores[0].argmax())
    if wrong == answer:
        raise ValueError(
            f"metric={name!r} compares the clean answer with the corrupted answer, but both runs predict token "
            f"{_named(answer, names)} at the last position: change the corrupted input so that its prediction "
            "changes, or use metric='top_logit'"
        )

    def difference(out: Any) -> torch.Tensor:
        scores = class_scores(out)
        return scores[:, answer] - scores[:, wrong]

    clean_ld, corrupt_ld = float(difference(clean_out)[0]), float(difference(corrupt_out)[0])
    if name == "logit_diff":
        return ChosenMetric(lambda out: difference(out) - corrupt_ld, name, METRICS[name])
    gap = clean_ld - corrupt_ld
    if abs(gap) <= UNDEFINED * max(1.0, abs(clean_ld), abs(corrupt_ld)):
        raise ValueError(
            f"the fraction recovered is undefined here: the logit difference is {clean_ld:.4g} in the clean run and "
            f"{corrupt_ld:.4g} in the corrupted one, nothing to recover; use metric='logit_diff', or corrupt the input "
            "more"
        )
    return ChosenMetric(lambda out: (difference(out) - corrupt_ld) / gap, name, METRICS[name])


def _named(token: int, names: TokenNames | None) -> str:
    """``7 'mat'``: a token id with its label when ``names`` knows it, else the id alone."""
    label = names([token]) if names is not None else None
    return f"{token} {label[0]!r}" if label else str(token)
