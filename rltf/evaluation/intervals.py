"""Bootstrap intervals over tasks, and how a value with its interval is printed.

Numpy only, so that the comparison tool's tables (``rltf/comparison``) import them without the
evaluation's torch and decoder (``rltf/evaluation/schemas.py`` re-exports them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95
BOOTSTRAP_SEED = 0


def bootstrap_interval(scores: Sequence[float] | np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES,
                       level: float = BOOTSTRAP_LEVEL, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``scores`` (one per task): the ``(1 - level) / 2``
    and ``(1 + level) / 2`` quantiles of the means of ``resamples`` resamples of the tasks drawn with
    replacement, from a generator seeded by ``seed`` (same scores, same interval). The spread over
    *tasks* (which tasks happened to be held out), not over training seeds. No scores: ``(nan, nan)``."""
    x = np.asarray(scores, dtype=np.float64).ravel()
    if not 0 < level < 1:
        raise ValueError(f"level={level}: expected a number in (0, 1)")
    if resamples < 1:
        raise ValueError(f"resamples={resamples}: expected at least 1")
    if x.size == 0:
        return float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def format_interval(value: float, interval: Sequence[float] | None) -> str:
    """``0.7367 [0.61, 0.85]`` (the value alone without an interval)."""
    if interval is None or any(v is None or not np.isfinite(v) for v in interval):
        return f"{value:.4f}"
    return f"{value:.4f} [{interval[0]:.2f}, {interval[1]:.2f}]"
