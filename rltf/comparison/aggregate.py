"""Aggregating a comparison over seeds: mean ± std, bootstrap intervals over tasks, paired differences, curves.

:func:`aggregate` reads every finished run back: per row the value of each seed, mean ± std over
seeds (std with ddof=1), the bootstrap interval over tasks of the seed-averaged per-task scores
(:func:`rltf.evaluation.schemas.bootstrap_interval`), the valid-plan rates, the train reward against the
number of plans sampled (first and last tenth of training) and the wall time; per trained arm the
curves (periodic held-out score and train reward vs plans sampled, mean and std over seeds). Every
row keeps its per-task scores per seed (``task_scores``); :func:`paired_summary` compares each arm
with the suite's reference arm on them, paired by (task, seed) (:mod:`rltf.comparison.paired`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rltf.comparison.paired import (
    METHOD,
    PAIRED_LEVEL,
    PAIRED_RESAMPLES,
    PAIRED_SEED,
    MissingPairsError,
    paired_difference,
)
from rltf.comparison.results import SeedRun
from rltf.comparison.suites import HEADLINE, Row, Suite
from rltf.evaluation.intervals import BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, bootstrap_interval


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample std (ddof=1; 0 for one value) — nan for none."""
    x = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if x.size == 0:
        return float("nan"), float("nan")
    return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else 0.0


def _curve(runs: Sequence[SeedRun], key: str) -> dict | None:
    """``key`` against plans sampled: per step present in every seed's history, mean and std over
    seeds; plus each seed's own points."""
    per_seed = []
    for r in runs:
        pts = {int(h["step"]): float(h[key]) for h in r.history if key in h and h[key] is not None}
        if pts and r.plans_per_step:
            per_seed.append((r, pts))
    if not per_seed:
        return None
    steps = sorted(set.intersection(*(set(p) for _, p in per_seed)))
    pps = per_seed[0][0].plans_per_step
    stats = [mean_std([p[s] for _, p in per_seed]) for s in steps]
    return {"key": key, "steps": steps, "plans": [s * pps for s in steps], "mean": [m for m, _ in stats],
            "std": [sd for _, sd in stats], "seeds": {str(r.seed): {"plans": [s * r.plans_per_step for s in sorted(p)],
                                                                      "values": [p[s] for s in sorted(p)]}
                                                      for r, p in per_seed}}


def row_column(results: dict, row: Row) -> str:
    """The results column ``row`` reads: its ``column``, the env's headline for ``headline``
    (:mod:`rltf.comparison.env_values` put its name in ``results["headline"]``)."""
    return (results.get("headline") or row.column) if row.column == HEADLINE else row.column


def row_task_values(results: dict, row: Row, split: str | None = None) -> dict:
    """Per-task values of ``row``'s column: a reader's ``task_values[schema][column]`` when it gives
    them (e.g. travel's final pass per query; the env's own columns, :mod:`rltf.comparison.env_values`),
    else the per-task ``scores`` for the ``overall`` / ``reward`` column (their mean); none otherwise
    (no interval). ``split``: only the tasks of that split (``results["split_tasks"]``)."""
    column = row_column(results, row)
    given = results.get("task_values", {}).get(row.schema, {}).get(column)
    if given is None:
        given = results.get("scores", {}).get(row.schema, {}) if column in ("overall", "reward") else {}
    if split is None:
        return given
    keep = results.get("split_tasks", {}).get(split, [])
    return {t: given[t] for t in keep if t in given}


def _seed_value(results: dict, row: Row, split: str | None) -> float | None:
    """A run's value of ``row``: the results table's cell, or (per split, or for the env's headline)
    the mean of the env's per-task values over the split's evaluated tasks (None: none evaluated)."""
    if split is None and row.column != HEADLINE:
        return float(results["rows"][row.schema][row.column])
    values = row_task_values(results, row, split)
    return float(np.mean(list(values.values()))) if values else None


def _metric_value(results: dict, schema: str, metric: str, split: str | None) -> float | None:
    if split is None:
        row = results["rows"][schema]
        return float(row[metric]) if metric in row and row[metric] is not None else None
    values = row_task_values(results, Row("", "", schema, metric), split)
    return float(np.mean(list(values.values()))) if values else None


def _task_key(task: str) -> tuple:
    """Task ids in their natural order (``"2"`` before ``"10"``): the bootstrap resamples by position."""
    return (0, int(task), "") if task.lstrip("-").isdigit() else (1, 0, task)


def _window_means(curve: dict | None, fraction: float = 0.1) -> tuple[float | None, float | None, int | None]:
    """The curve's mean over its first and last ``fraction`` of steps (at least one step each)."""
    if not curve or not curve["mean"]:
        return None, None, None
    n = max(1, int(round(len(curve["mean"]) * fraction)))
    return float(np.mean(curve["mean"][:n])), float(np.mean(curve["mean"][-n:])), n


def arm_row(suite: Suite, arm: str) -> int | None:
    """The index of the row that stands for ``arm`` in the paired comparison: its trained row, else
    its first row (None: the arm has no row)."""
    rows = [i for i, r in enumerate(suite.rows) if r.arm == arm]
    return next((i for i in rows if suite.rows[i].trained), rows[0] if rows else None)


def paired_summary(suite: Suite, entries: Sequence[dict]) -> dict:
    """Every arm's row against the reference arm's (:meth:`Suite.reference_arm`), paired by (task,
    seed) (:func:`rltf.comparison.paired.paired_difference` on the entries' ``task_scores``), on the
    seeds both were to run (an arm may run fewer: its ``seeds``). One-seed arms (deterministic bounds) are
    left out; a comparison whose pairs cannot be formed (a run missing, a task unscored) carries the
    error naming them instead of numbers."""
    ref_arm = suite.reference_arm()
    out: dict[str, Any] = {"reference": {"arm": ref_arm.name, "label": None}, "method": METHOD, "level": PAIRED_LEVEL,
                           "resamples": PAIRED_RESAMPLES, "seed": PAIRED_SEED, "comparisons": []}
    ref_index = arm_row(suite, ref_arm.name)
    if ref_index is None:
        out["error"] = f"the reference arm {ref_arm.name} has no row in the table"
        return out
    ref = entries[ref_index]
    out["reference"]["label"] = ref["label"]
    for arm in suite.arms:
        index = arm_row(suite, arm.name)
        if arm.name == ref_arm.name or arm.seeds == 1 or index is None:
            continue
        entry = entries[index]
        comparison: dict[str, Any] = {"label": entry["label"], "arm": arm.name}
        # an arm may run fewer seeds than the suite (its ``seeds``: the first n): the pairs are on the seeds
        # both were to run (a run missing among them is an error naming its pairs)
        planned = {str(s) for s in range(min(arm.seeds or suite.seeds, ref_arm.seeds or suite.seeds))}
        if not entry["task_scores"] or not ref["task_scores"]:
            comparison["error"] = f"not run: {entry['label'] if not entry['task_scores'] else ref['label']}"
        else:
            try:
                comparison |= paired_difference({s: v for s, v in entry["task_scores"].items() if s in planned},
                                                {s: v for s, v in ref["task_scores"].items() if s in planned},
                                                names=(arm.name, ref_arm.name))
            except MissingPairsError as e:
                comparison["error"] = str(e)
        out["comparisons"].append(comparison)
    return out


def _row_entries(suite: Suite, runs: dict[str, list[SeedRun]], curves: dict, split: str | None) -> list[dict]:
    """One entry per row of the suite (on ``split``'s tasks; None: the runs' held-out tasks pooled)."""
    rows = []
    for row in suite.rows:
        arm = suite.arm(row.arm)
        ar = [r for r in runs.get(row.arm, []) if row.schema in r.results["rows"]]
        values = {r.seed: v for r in ar if (v := _seed_value(r.results, row, split)) is not None}
        ar = [r for r in ar if r.seed in values]
        mean, std = mean_std(list(values.values()))
        # per task and seed (what the paired differences pair); per task: the mean over the seeds that
        # scored it, the interval over tasks
        task_scores = {str(r.seed): {str(t): float(v) for t, v in row_task_values(r.results, row, split).items()}
                       for r in ar}
        by_task: dict[str, list[float]] = {}
        for per_task in task_scores.values():
            for task, score in per_task.items():
                by_task.setdefault(task, []).append(score)
        pooled = [float(np.mean(v)) for _, v in sorted(by_task.items(), key=lambda kv: _task_key(kv[0]))]
        interval = list(bootstrap_interval(pooled)) if pooled else None
        valid_held_out = mean_std([r.results["rows"][row.schema].get("valid", row.valid) for r in ar])[0] \
            if ar else None
        if valid_held_out is not None and math.isnan(valid_held_out):
            valid_held_out = None
        column = row_column(ar[0].results, row) if ar else row.column
        entry: dict[str, Any] = {
            "label": row.label, "arm": row.arm, "schema": row.schema, "column": column, "trained": row.trained,
            "n_seeds": len(values), "values": {str(k): v for k, v in sorted(values.items())}, "mean": mean,
            "std": std, "n_tasks": len(pooled), "interval": interval,
            "seed_intervals": {str(r.seed): r.results.get("intervals", {}).get(row.schema) for r in ar},
            "valid_held_out": valid_held_out, "task_scores": task_scores,
            "metrics": {m: dict(zip(("mean", "std"), mean_std(vals))) | {"n_seeds": len(vals)}
                        for m in suite.metrics
                        if (vals := [v for r in ar if (v := _metric_value(r.results, row.schema, m, split))
                                     is not None])}}
        if split is not None:
            entry["split"] = split
            entry["seed_intervals"] = {}  # the runs' own intervals are over their pooled tasks
        if row.trained:
            c = curves.get(row.arm, {})
            first, last, n = _window_means(c.get("reward"))
            steps = [len([h for h in r.history if arm.reward_key in h]) for r in ar]
            entry |= {"train_reward_first": first, "train_reward_last": last, "train_reward_window_steps": n,
                      "plans_sampled": int(max(steps) * (ar[0].plans_per_step or 0)) if ar and steps else None,
                      "valid_train": mean_std([float(np.mean([h[arm.valid_key] for h in r.history
                                                              if arm.valid_key in h]))
                                               for r in ar if any(arm.valid_key in h for h in r.history)])[0],
                      "wall_s": dict(zip(("mean", "std"), mean_std([r.wall_s for r in ar]))),
                      "cpu_s": dict(zip(("mean", "std"), mean_std([r.cpu_s for r in ar])))}
            if entry["valid_train"] is not None and math.isnan(entry["valid_train"]):
                entry["valid_train"] = None
        rows.append(entry)
    return rows


def aggregate(suite: Suite, runs: dict[str, list[SeedRun]], seeds: Sequence[int] | None = None) -> dict:
    """The comparison: one entry per row (values per seed, mean ± std, bootstrap interval over tasks
    of the seed-averaged per-task scores, valid-plan rates, train reward vs plans sampled, wall
    time) and the trained arms' curves. A suite with ``splits``: one entry per row and split (in
    split order, each with its ``split``), the paired differences per split (``paired_by_split``;
    ``paired``: the first split's)."""
    curves = {}
    for arm in suite.arms:
        ar = runs.get(arm.name, [])
        if any(r.trained and r.arm == arm.name for r in suite.rows):
            curves[arm.name] = {"score": _curve(ar, arm.score_key), "reward": _curve(ar, arm.reward_key),
                                "valid": _curve(ar, arm.valid_key)}
    extra: dict[str, Any] = {}
    if suite.splits:
        per_split = {s: _row_entries(suite, runs, curves, s) for s in suite.splits}
        rows = [e for s in suite.splits for e in per_split[s]]
        paired_by_split = {s: paired_summary(suite, per_split[s]) for s in suite.splits}
        paired = paired_by_split[suite.splits[0]]
        extra = {"splits": list(suite.splits), "paired_by_split": paired_by_split}
    else:
        rows = _row_entries(suite, runs, curves, None)
        paired = paired_summary(suite, rows)
    headlines = {r.results["headline"] for rs in runs.values() for r in rs if r.results.get("headline")}
    if headlines:
        extra["headline"] = " / ".join(sorted(headlines))
    seeds = list(range(suite.seeds)) if seeds is None else list(seeds)
    return {"suite": suite.name, "description": suite.description, "seeds": seeds, "metrics": list(suite.metrics),
            "held_out": suite.held_out, **extra, "paired": paired,
            "interval": {"level": BOOTSTRAP_LEVEL, "resamples": BOOTSTRAP_RESAMPLES,
                         "over": "tasks, per-task scores averaged over seeds"},
            "runs": {a: [{"seed": r.seed, "run_dir": str(r.run_dir), "wall_s": r.wall_s, "cpu_s": r.cpu_s,
                          "plans_per_step": r.plans_per_step} for r in rs] for a, rs in runs.items()},
            "rows": rows, "curves": curves}
