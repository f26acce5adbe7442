"""Paired differences between two arms of a comparison, with a bootstrap interval over tasks and seeds.

Two arms evaluated on the same held-out tasks with the same seeds give one difference per
``(task, seed)``: ``d[t, s] = arm[t, s] - reference[t, s]`` (:func:`pair_scores`, which pairs by
task id and seed, never by position, and raises :class:`MissingPairsError` naming every
``(task, seed)`` one side has and the other lacks). The estimate is the mean of ``d`` over all
pairs (equal to the difference of the two arms' mean held-out scores).

The interval (:func:`paired_interval`) is a **two-way (crossed) percentile bootstrap**: each of
``resamples`` resamples draws the tasks (``T`` of them, with replacement) and, independently, the
seeds (``S``, with replacement) and takes the mean of ``d`` over the drawn tasks x drawn seeds; the
interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of those means, from a
generator seeded by ``seed`` (same differences, same interval). Tasks and seeds are crossed, not
nested: a seed is one training run of each arm, scored on every task, so its luck is shared by all
the tasks; drawing seeds as whole columns keeps that shared luck in the interval, where drawing
seeds anew within each task (a nested bootstrap) would treat it as independent per task and
narrow the interval. With one seed it is the ordinary paired bootstrap over tasks. Pairing
removes what the two arms share per task (a hard task is hard for both), so the interval of the
difference is narrower than the two arms' own intervals suggest.

Free functions on plain mappings ``{seed: {task: score}}``; :mod:`rltf.comparison.aggregate`
applies them to a comparison's rows.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from common.errors import UserError

PAIRED_RESAMPLES = 2000
PAIRED_LEVEL = 0.95
PAIRED_SEED = 0
METHOD = ("two-way percentile bootstrap: tasks and seeds resampled independently with replacement, the mean "
          "difference over the drawn tasks x drawn seeds")

Scores = Mapping[Hashable, Mapping[Hashable, float]]  # {seed: {task: score}}


class MissingPairsError(UserError, ValueError):
    """Some ``(task, seed)`` has a score in one arm and not in the other: the pairs cannot be formed.
    ``missing`` lists them as ``(side, task, seed)``, ``side`` the arm that lacks the score."""

    def __init__(self, message: str, missing: list[tuple[str, str, str]]):
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class Paired:
    """Scores paired by ``(task, seed)``: rows are ``tasks``, columns ``seeds`` (both sorted)."""

    tasks: tuple[str, ...]
    seeds: tuple[str, ...]
    arm: np.ndarray  # (T, S)
    reference: np.ndarray  # (T, S)

    @property
    def differences(self) -> np.ndarray:
        return self.arm - self.reference


def _natural(key: str) -> tuple:
    """``"2"`` before ``"10"``; other names after the numbers, alphabetically."""
    return (0, int(key), "") if key.lstrip("-").isdigit() else (1, 0, key)


def _cells(scores: Scores) -> dict[tuple[str, str], float]:
    return {(str(task), str(seed)): float(v) for seed, per_task in scores.items() for task, v in per_task.items()}


def pair_scores(arm: Scores, reference: Scores, *, names: tuple[str, str] = ("arm", "reference"),
                shown: int = 10) -> Paired:
    """Pair two arms' per-task scores ``{seed: {task: score}}`` by ``(task, seed)`` (keys compared as
    strings: a task id read back from JSON is the same task). Raises :class:`MissingPairsError`,
    naming the first ``shown`` unpaired ``(task, seed)`` and the side that lacks each, unless both
    arms score exactly the same pairs and those form a full tasks x seeds grid."""
    a, r = _cells(arm), _cells(reference)
    missing = [(names[1], t, s) for t, s in a.keys() - r.keys()] + [(names[0], t, s) for t, s in r.keys() - a.keys()]
    if not a and not r:
        raise MissingPairsError(f"no scores in {names[0]} or {names[1]}: nothing to pair", [])
    tasks = sorted({t for t, _ in a.keys() | r.keys()}, key=_natural)
    seeds = sorted({s for _, s in a.keys() | r.keys()}, key=_natural)
    if not missing:  # the same pairs on both sides; a grid needs every task scored for every seed
        missing = [(f"{names[0]} or {names[1]}", t, s) for t in tasks for s in seeds if (t, s) not in a]
    if missing:
        missing.sort(key=lambda m: (_natural(m[1]), _natural(m[2]), m[0]))
        listed = "; ".join(f"task {t} seed {s} (no score in {side})" for side, t, s in missing[:shown])
        more = f" and {len(missing) - shown} more" if len(missing) > shown else ""
        raise MissingPairsError(f"{len(missing)} unpaired (task, seed) between {names[0]} and {names[1]}: "
                                f"{listed}{more}", missing)
    grid = [[(t, s) for s in seeds] for t in tasks]
    return Paired(tuple(tasks), tuple(seeds), np.array([[a[c] for c in row] for row in grid]),
                  np.array([[r[c] for c in row] for row in grid]))


def _counts(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """(resamples, n): how often each of n items is drawn in each resample of n draws with replacement."""
    idx = rng.integers(0, n, size=(resamples, n))
    counts = np.zeros((resamples, n))
    np.add.at(counts, (np.arange(resamples)[:, None], idx), 1.0)
    return counts


def bootstrap_means(differences: np.ndarray, *, resamples: int = PAIRED_RESAMPLES,
                    seed: int = PAIRED_SEED) -> np.ndarray:
    """The ``resamples`` two-way bootstrap means of a (tasks, seeds) array of differences: tasks and
    seeds drawn independently with replacement, each resample's mean over drawn tasks x drawn seeds."""
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 2 or d.size == 0:
        raise ValueError(f"differences of shape {d.shape}: expected a non-empty (tasks, seeds) array")
    if resamples < 1:
        raise ValueError(f"resamples={resamples}: expected at least 1")
    rng = np.random.default_rng(seed)
    n_tasks, n_seeds = d.shape
    task_counts, seed_counts = _counts(rng, n_tasks, resamples), _counts(rng, n_seeds, resamples)
    return np.einsum("bt,ts,bs->b", task_counts, d, seed_counts) / (n_tasks * n_seeds)


def paired_interval(differences: np.ndarray, *, resamples: int = PAIRED_RESAMPLES, level: float = PAIRED_LEVEL,
                    seed: int = PAIRED_SEED) -> tuple[float, float]:
    """The two-way percentile bootstrap interval (module docstring) of the mean of ``differences``,
    a (tasks, seeds) array."""
    if not 0 < level < 1:
        raise ValueError(f"level={level}: expected a number in (0, 1)")
    means = bootstrap_means(differences, resamples=resamples, seed=seed)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def paired_difference(arm: Scores, reference: Scores, *, names: tuple[str, str] = ("arm", "reference"),
                      resamples: int = PAIRED_RESAMPLES, level: float = PAIRED_LEVEL, seed: int = PAIRED_SEED) -> dict:
    """``arm - reference`` paired by ``(task, seed)``: the mean difference, its interval, how many
    tasks and seeds, per task the difference averaged over seeds, and the tasks where the arm is
    better / worse / tied on that average. Raises :class:`MissingPairsError` for unpaired scores."""
    p = pair_scores(arm, reference, names=names)
    d = p.differences
    per_task = d.mean(axis=1)
    lo, hi = paired_interval(d, resamples=resamples, level=level, seed=seed)
    return {"mean": float(d.mean()), "interval": [lo, hi], "n_tasks": len(p.tasks), "n_seeds": len(p.seeds),
            "seeds": list(p.seeds), "arm_mean": float(p.arm.mean()), "reference_mean": float(p.reference.mean()),
            "per_task": {t: float(v) for t, v in zip(p.tasks, per_task)},
            "tasks_better": int((per_task > 0).sum()), "tasks_worse": int((per_task < 0).sum()),
            "tasks_tied": int((per_task == 0).sum())}
