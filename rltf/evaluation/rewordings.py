"""Robustness to wording: a planner's held-out score on the original task descriptions and on
hand-written rewordings that keep their meaning.

A rewordings file (OpenAGI's: ``REWORDINGS_FILE`` of its task data) holds, for every held-out task
(OpenAGI: the validation and test tasks of the persisted lite and full splits), rewordings of its
description, keyed by the original (test data: no planner trains on them). :func:`evaluate_rewordings` runs the
planner's constrained beam search (the ``finetuned`` / ``rltf`` schema of the main job) on each
task as written and on each of its rewordings — only the description changes: the task's inputs,
target, samples and metric, hence its grammar and scoring, stay — and reports the mean score on
the originals, on the rewordings, and how often a rewording gets the same plan as the original.
``python benchmarks/rewordings.py planner.model=<planner dir>`` prints it for a saved planner.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rltf.evaluation import schemas as ev


def load_rewordings(path: str | Path) -> dict[str, list[str]]:
    """``{original description: [rewording, ...]}``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {k: list(v) for k, v in data["rewordings"].items()}


def evaluate_rewordings(planner, env, tasks: Sequence[Any], num_beams: int,
                        rewordings: dict[str, list[str]]) -> dict:
    """Scores of ``planner``'s best constrained plan per task on the original descriptions and on
    every rewording (``rewordings``: :func:`load_rewordings` of a file; every task must have some).

    Returns ``{"original": mean score, "reworded": mean over tasks of the mean over the task's
    rewordings, "same_plan": fraction of (task, rewording) pairs planned as the original,
    "per_task": [{"id", "description", "original": {plan, score}, "reworded": [{text, plan, score}]}]}``."""
    missing = [t.description for t in tasks if not rewordings.get(t.description)]
    if missing:
        raise KeyError(f"no rewordings for {len(missing)} task(s), e.g. {missing[0]!r}")
    original = ev.constrained_schema("original", planner, env, tasks, num_beams)
    width = max(len(rewordings[t.description]) for t in tasks)
    per_task = [{"id": t.id, "description": t.description,
                 "original": {"plan": original.plans[t.id], "score": original.scores[t.id]}, "reworded": []}
                for t in tasks]
    for j in range(width):  # the j-th rewording of every task that has one, in one beam search
        idx = [i for i, t in enumerate(tasks) if j < len(rewordings[t.description])]
        variant = [dataclasses.replace(tasks[i], description=rewordings[tasks[i].description][j]) for i in idx]
        res = ev.constrained_schema(f"reworded-{j}", planner, env, variant, num_beams)
        for i, t in zip(idx, variant):
            per_task[i]["reworded"].append({"text": t.description, "plan": res.plans[t.id], "score": res.scores[t.id]})
    same = [r["plan"] == p["original"]["plan"] for p in per_task for r in p["reworded"]]
    return {
        "original": float(np.mean([p["original"]["score"] for p in per_task])),
        "reworded": float(np.mean([np.mean([r["score"] for r in p["reworded"]]) for p in per_task])),
        "same_plan": float(np.mean(same)),
        "n_tasks": len(per_task),
        "n_rewordings": len(same),
        "per_task": per_task,
    }
