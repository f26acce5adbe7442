"""Metrics: a task names one; it maps (predictions, targets) to per-sample scores in [0, 1].

A task's reward is the mean of its per-sample scores. Metric implementations are imported
lazily so that, e.g., the MiniLM model loads only when a task scores free text with it.

:data:`METRICS` holds the offline metrics every env knows. An env whose tasks name other metrics
(the full suite's ``bertscore`` / ``vit`` / ``clip``, scored by its hf backend's models) carries
them in its own table (``OpenAGIEnv(metrics=...)``), looked up first: nothing rewrites this
module's table at run time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from envs.openagi.metrics.text import exact_match, semantic_similarity, summary_similarity, token_f1

BatchMetric = Callable[[Sequence[Any], Sequence[Any]], list[float]]


def _image_similarity(preds, targets):
    from envs.openagi.metrics.image import image_similarity_batch  # heavy: scikit-image (~0.2 s)

    return image_similarity_batch(preds, targets)


def _exact_match(preds, targets):
    return [exact_match(p, t) for p, t in zip(preds, targets)]


def _token_f1(preds, targets):
    return [token_f1(p, t) for p, t in zip(preds, targets)]


def _semantic_similarity(preds, targets):
    return semantic_similarity(list(preds), list(targets))


def _summary_similarity(preds, targets):
    return summary_similarity(list(preds), list(targets))


METRICS: dict[str, BatchMetric] = {
    "image_similarity": _image_similarity,
    "exact_match": _exact_match,
    "token_f1": _token_f1,
    "semantic_similarity": _semantic_similarity,
    "summary_similarity": _summary_similarity,  # semantic similarity with a brevity penalty
}


def get_metric(name: str, table: Mapping[str, BatchMetric] | None = None) -> BatchMetric:
    """The metric called ``name``: from ``table`` (an env's own metrics) first, then :data:`METRICS`."""
    if table is not None and name in table:
        return table[name]
    try:
        return METRICS[name]
    except KeyError:
        known = [*(table or {}), *(m for m in METRICS if m not in (table or {}))]
        raise ValueError(f"unknown metric {name!r}; expected one of: {', '.join(known)}") from None


def compute_metric(metric: str, preds: Sequence[Any], targets: Sequence[Any],
                table: Mapping[str, BatchMetric] | None = None) -> list[float]:
    """Per-sample scores, each clipped to [0, 1]; NaN (a broken output) scores 0."""
    raw = get_metric(metric, table)(preds, targets)
    out = []
    for s in raw:
        s = float(s)
        out.append(0.0 if math.isnan(s) else min(1.0, max(0.0, s)))
    return out
