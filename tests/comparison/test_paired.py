"""Paired differences between arms (issue #37 item 5, ``rltf/comparison/paired.py``): pairing by
(task, seed), the mean difference, and the two-way bootstrap interval over tasks and seeds (coverage
on synthetic data, width against the number of tasks, seed luck shared by all tasks)."""

from __future__ import annotations

import numpy as np
import pytest

from rltf.comparison.paired import (
    MissingPairsError,
    bootstrap_means,
    pair_scores,
    paired_difference,
    paired_interval,
)
from rltf.evaluation.schemas import bootstrap_interval


def _scores(array: np.ndarray, tasks=None, seeds=None) -> dict:
    """{seed: {task: score}} from a (tasks, seeds) array."""
    tasks = list(range(array.shape[0])) if tasks is None else tasks
    seeds = list(range(array.shape[1])) if seeds is None else seeds
    return {s: {t: float(array[i, j]) for i, t in enumerate(tasks)} for j, s in enumerate(seeds)}


def test_known_differences_are_recovered():
    rng = np.random.default_rng(0)
    ref = rng.uniform(0, 1, (30, 3))
    delta = rng.normal(0.1, 0.05, (30, 1))
    out = paired_difference(_scores(ref + delta), _scores(ref))
    assert out["mean"] == pytest.approx(float(delta.mean()))
    assert out["per_task"] == {str(t): pytest.approx(float(delta[t, 0])) for t in range(30)}
    assert out["arm_mean"] - out["reference_mean"] == pytest.approx(out["mean"])
    lo, hi = out["interval"]
    assert lo < out["mean"] < hi and lo > 0  # every task better by ~0.1: the interval excludes 0
    assert (out["n_tasks"], out["n_seeds"], out["seeds"]) == (30, 3, ["0", "1", "2"])
    assert out["tasks_better"] == int((delta > 0).sum()) and out["tasks_worse"] == int((delta < 0).sum())
    # a constant difference: every resample has the same mean
    const = paired_difference(_scores(ref + 0.25), _scores(ref))
    assert const["mean"] == pytest.approx(0.25) and const["interval"] == pytest.approx([0.25, 0.25])
    assert const["tasks_better"] == 30 and const["tasks_tied"] == 0
    # same inputs, same interval (seeded); another seed, another draw
    assert paired_difference(_scores(ref + delta), _scores(ref))["interval"] == out["interval"]
    assert paired_difference(_scores(ref + delta), _scores(ref), seed=1)["interval"] != out["interval"]


def test_pairs_are_formed_by_task_and_seed_not_by_position():
    arm = {0: {"10": 0.9, "2": 0.5, "7": 0.1}, 1: {"7": 0.3, "10": 0.8, "2": 0.6}}
    # the reference lists seeds and tasks in other orders, with int keys (as read from another file)
    ref = {"1": {2: 0.4, 7: 0.3, 10: 0.7}, "0": {7: 0.2, 10: 0.4, 2: 0.5}}
    p = pair_scores(arm, ref)
    assert p.tasks == ("2", "7", "10") and p.seeds == ("0", "1")  # natural order: "2" before "10"
    assert p.differences == pytest.approx(np.array([[0.0, 0.2], [-0.1, 0.0], [0.5, 0.1]]))
    out = paired_difference(arm, ref)
    assert out["per_task"] == {"2": pytest.approx(0.1), "7": pytest.approx(-0.05), "10": pytest.approx(0.3)}
    assert out["mean"] == pytest.approx(0.7 / 6)
    assert (out["tasks_better"], out["tasks_worse"], out["tasks_tied"]) == (2, 1, 0)


def test_missing_pairs_are_an_error_naming_them():
    arm = {0: {1: 0.5, 2: 0.5}, 1: {1: 0.5, 2: 0.5}}
    ref = {0: {1: 0.4, 2: 0.4, 3: 0.4}, 1: {1: 0.4}}
    with pytest.raises(MissingPairsError) as e:
        pair_scores(arm, ref, names=("rltf", "grpo-constrained"))
    assert e.value.missing == [("grpo-constrained", "2", "1"), ("rltf", "3", "0")]
    msg = str(e.value)
    assert msg.startswith("2 unpaired (task, seed) between rltf and grpo-constrained: ")
    assert "task 2 seed 1 (no score in grpo-constrained)" in msg and "task 3 seed 0 (no score in rltf)" in msg
    # a whole run missing: every one of its pairs, the first 10 listed
    with pytest.raises(MissingPairsError, match=r"20 unpaired .*task 0 seed 1 \(no score in a\).* and 10 more"):
        pair_scores(_scores(np.zeros((20, 1))), _scores(np.zeros((20, 2))), names=("a", "b"))
    # the same pairs on both sides, but not every task for every seed: no tasks x seeds grid
    ragged = {0: {1: 0.5, 2: 0.5}, 1: {1: 0.5}}
    with pytest.raises(MissingPairsError, match=r"task 2 seed 1 \(no score in arm or reference\)"):
        pair_scores(ragged, ragged)
    with pytest.raises(MissingPairsError, match="no scores"):
        pair_scores({}, {})


def test_interval_coverage_is_roughly_nominal_on_synthetic_data():
    """d[t, s] = 0.05 + task effect + noise: the 95% interval holds the true mean difference in
    about 95% of 200 simulated comparisons."""
    rng = np.random.default_rng(1)
    hits = [lo <= 0.05 <= hi for r in range(200)
            for lo, hi in [paired_interval(0.05 + rng.normal(0, 0.2, (40, 1)) + rng.normal(0, 0.1, (40, 3)),
                                           resamples=1000, seed=r)]]
    assert 0.90 <= np.mean(hits) <= 0.99


def test_seed_luck_shared_by_every_task_widens_the_interval():
    """A seed is one training run scored on every task: its luck (b_s) moves all tasks together.
    Resampling seeds as whole columns covers the true difference; a bootstrap over tasks alone of
    the seed-averaged differences does not."""
    rng = np.random.default_rng(2)
    crossed, tasks_only = [], []
    for r in range(200):
        d = 0.05 + rng.normal(0, 0.2, (40, 1)) + rng.normal(0, 0.1, (1, 8)) + rng.normal(0, 0.1, (40, 8))
        lo, hi = paired_interval(d, resamples=1000, seed=r)
        crossed.append(lo <= 0.05 <= hi)
        lo, hi = bootstrap_interval(d.mean(axis=1), resamples=1000, seed=r)
        tasks_only.append(lo <= 0.05 <= hi)
    assert np.mean(crossed) >= 0.86 and np.mean(crossed) - np.mean(tasks_only) >= 0.05


def test_the_interval_shrinks_with_more_tasks():
    rng = np.random.default_rng(3)

    def width(n_tasks: int) -> float:
        widths = []
        for r in range(20):
            lo, hi = paired_interval(rng.normal(0.05, 0.2, (n_tasks, 1)) + rng.normal(0, 0.1, (n_tasks, 3)), seed=r)
            widths.append(hi - lo)
        return float(np.mean(widths))

    w18, w165 = width(18), width(165)
    assert w165 < 0.5 * w18  # ~ sqrt(18 / 165) = 0.33


def test_bootstrap_means_resample_tasks_and_seeds():
    d = np.arange(12, dtype=float).reshape(4, 3)
    means = bootstrap_means(d, resamples=500, seed=0)
    assert means.shape == (500,) and means.min() >= 0 and means.max() <= 11
    assert abs(means.mean() - d.mean()) < 0.3
    # one seed: the ordinary bootstrap over tasks; one task: over seeds
    assert np.unique(bootstrap_means(np.full((5, 1), 0.3), resamples=50)).tolist() == pytest.approx([0.3])
    assert set(np.round(bootstrap_means(np.array([[0.0, 1.0]]), resamples=200), 6)) == {0.0, 0.5, 1.0}
    with pytest.raises(ValueError, match="expected a non-empty"):
        bootstrap_means(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="level"):
        paired_interval(d, level=1.0)
