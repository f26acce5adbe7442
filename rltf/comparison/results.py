"""Reading a comparison's finished runs back: results, per-step history, plans per step, times.

A run counts when its results file exists. An arm's ``reader`` (``module:function``) reads its
results file; the default, :func:`read_table_results`, reads the ``{"table": ..., "scores": ...}``
file of ``rltf.stages.plan_job.report`` and ``train/grpo.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rltf.comparison.runs import run_record_path
from rltf.comparison.suites import HEADLINE, Arm, Suite, resolve


def read_table_results(run_dir: Path, arm: Arm) -> dict:
    """The results file of ``rltf.stages.plan_job.report`` / ``train/grpo.py``: rows, per-task scores,
    seconds; a row's held-out valid-plan rate is its ``valid`` column, else the table's ``valid_rate``."""
    data = json.loads((run_dir / arm.results).read_text())
    table = data["table"]
    rows = {schema: ({"valid": table["valid_rate"][schema]} | row  # the table's own valid column wins
                     if table.get("valid_rate", {}).get(schema) is not None else row)
            for schema, row in table["rows"].items()}
    return {"rows": rows, "scores": data.get("scores", {}), "seconds": data.get("seconds"),
            "intervals": table.get("intervals", {})}


def _config_value(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = node[part]
    return node


def plans_per_step(run_dir: Path, arm: Arm) -> int | None:
    """Plans sampled per training step: the product of the arm's ``plans_per_step`` keys in the
    run's resolved ``config.yaml`` (None without one)."""
    path = run_dir / "config.yaml"
    if not path.is_file() or not arm.plans_per_step:
        return None
    cfg = yaml.safe_load(path.read_text())
    try:
        return int(np.prod([_config_value(cfg, k) for k in arm.plans_per_step]))
    except (KeyError, TypeError):
        return None


def read_history(run_dir: Path, arm: Arm) -> list[dict]:
    """The run's per-step metrics (the arm's ``history`` file, a list of rows); empty without one."""
    if arm.history is None or not (run_dir / arm.history).is_file():
        return []
    data = json.loads((run_dir / arm.history).read_text())
    return data if isinstance(data, list) else []


@dataclass
class SeedRun:
    """One finished (arm, seed) run as read back: what its reader gave, its history, its times."""

    seed: int
    run_dir: Path
    results: dict
    history: list[dict]
    plans_per_step: int | None
    wall_s: float | None
    cpu_s: float | None = None


def needs_env_values(suite: Suite, arm: str) -> bool:
    """Whether ``arm``'s runs are re-scored by their env (:mod:`rltf.comparison.env_values`): the suite
    reports per split, or a row of the arm reads the env's headline."""
    return any(r.arm == arm and (suite.splits is not None or r.column == HEADLINE) for r in suite.rows)


def read_runs(suite: Suite, root: Path, seeds: Sequence[int] | None = None) -> dict[str, list[SeedRun]]:
    """Every finished (arm, seed) run under ``root`` (a run counts when its results file exists)."""
    seeds = list(range(suite.seeds)) if seeds is None else list(seeds)
    out: dict[str, list[SeedRun]] = {}
    for arm in suite.arms:
        reader = resolve(arm.reader) if arm.reader else read_table_results
        runs = []
        for s in seeds:
            run_dir = root / arm.name / f"seed{s}"
            if not (run_dir / arm.results).is_file():
                continue
            results = reader(run_dir, arm)
            rec = run_record_path(root / arm.name, s)
            if needs_env_values(suite, arm.name):  # the env's own per-task metrics (and splits), not the reward
                from rltf.comparison.env_values import env_task_values  # deferred: builds envs

                args = (json.loads(rec.read_text()).get("args") or [])[1:] if rec.is_file() else None
                plans = results.get("plans") or json.loads((run_dir / arm.results).read_text()).get("plans") or {}
                scored = env_task_values(run_dir, {**results, "plans": plans}, suite.splits,
                                         (lambda a=args: resolve(arm.loader)(a)) if args else None)
                own = results.get("task_values", {})
                merged = {schema: {**scored["task_values"].get(schema, {}), **own.get(schema, {})}
                          for schema in {*scored["task_values"], *own}}
                results = {**results, **scored, "task_values": merged}
            recorded = json.loads(rec.read_text()) if rec.is_file() else {}
            wall = recorded.get("wall_s")
            if wall is None:  # not run by the comparison: the run's own time (from its start stage)
                wall = results.get("seconds")
            runs.append(SeedRun(s, run_dir, results, read_history(run_dir, arm), plans_per_step(run_dir, arm), wall,
                                recorded.get("cpu_s")))
        out[arm.name] = runs
    return out
