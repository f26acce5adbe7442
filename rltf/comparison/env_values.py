"""Per-task values of a finished run, re-scored by its env: the env's headline metric and its splits.

A run's results file holds, per schema, the plan written for every held-out task (``plans``) and its
reward (``scores``). The reward is what training optimised: with reward shaping (pddl's
``env.pddl.shaping``) it is not the headline metric (pddl's plain goal rate). So a suite row whose
``column`` is ``headline`` (:data:`rltf.comparison.suites.HEADLINE`), and every row of a suite with
``splits``, reads values the env computes itself: the env of the run's own ``env`` section (its
``config.yaml``), built per split through the env interface (``envs.make(section, split)``), scores
each task's plan alone with ``env.table_columns([task], {task: plan})`` -- the env's own table columns,
its ``headline`` among them. Nothing here knows an env by name. An env whose ``table_columns`` are
empty (OpenAGI) has the ``overall`` headline: the per-task reward is its value.

:func:`env_task_values` returns ``{"headline": name, "task_values": {schema: {column: {task: value}}},
"split_tasks": {split: [task ids evaluated]}}`` for :func:`rltf.comparison.results.read_runs`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

import envs as env_factory
from rltf.config.loading import ConfigError
from rltf.evaluation.schemas import headline as env_headline

ALL = "all"  # the split of every task (EnvSpec.make)
_ENVS: dict[tuple[str, str], Any] = {}  # (the env section's YAML, split) -> env: one build per comparison


def run_env_section(run_dir: Path, load_args: Callable[[], Any] | None = None) -> dict:
    """The ``env`` section of the run's resolved ``config.yaml``; without one (``train/evaluate.py`` writes
    none), the ``env`` of the config ``load_args()`` loads (the arm's loader on the run's recorded arguments)."""
    path = Path(run_dir) / "config.yaml"
    if path.is_file():
        section = (yaml.safe_load(path.read_text()) or {}).get("env")
    elif load_args is not None:
        env = getattr(load_args(), "env", None)
        section = dataclasses.asdict(env) if dataclasses.is_dataclass(env) else env
    else:
        section = None
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: no config.yaml with an env section: the run's env cannot be rebuilt to score "
                          "its plans")
    return section


def split_env(section: dict, split: str):
    """The env of ``split`` for an ``env`` section (cached: every run of a suite shares a few)."""
    key = (yaml.safe_dump(section, sort_keys=True), split)
    if key not in _ENVS:
        try:
            _ENVS[key] = env_factory.make(section, split)
        except ValueError as e:  # an unknown split, a bad section
            raise ConfigError(f"split {split!r} of the env {section.get('name')!r}: {e}") from None
    return _ENVS[key]


def clear_cache() -> None:
    _ENVS.clear()


def _task_values(env, plans: dict[str, Any], scores: dict[str, float], tasks) -> dict[str, dict[str, float]]:
    """``{column: {task: value}}`` over the ``tasks`` that have a plan: the env's table columns of each
    task alone, and ``reward`` (the run's own per-task score); the headline falls back on the reward
    for an env without table columns."""
    out: dict[str, dict[str, float]] = {}
    head = env_headline(env)
    for task in tasks:
        tid = str(task.id)
        if tid not in plans:
            continue
        columns = env.table_columns([task], {task.id: plans[tid]}) or {}
        for column, value in columns.items():
            out.setdefault(column, {})[tid] = float(value)
        if tid in scores:
            out.setdefault("reward", {})[tid] = float(scores[tid])
            if head not in columns:
                out.setdefault(head, {})[tid] = float(scores[tid])
    return out


def env_task_values(run_dir: Path, results: dict, splits: Sequence[str] | None = None,
                    load_args: Callable[[], Any] | None = None) -> dict:
    """The run's per-task values as its env scores them (see the module docstring); ``splits``: the
    splits whose tasks are listed in ``split_tasks`` (None: ``all``, the run's evaluated tasks);
    ``load_args``: see :func:`run_env_section`."""
    section = run_env_section(run_dir, load_args)
    plans_by_schema = {s: {str(k): v for k, v in p.items()} for s, p in (results.get("plans") or {}).items()}
    scores_by_schema = {s: {str(k): float(v) for k, v in p.items()} for s, p in (results.get("scores") or {}).items()}
    task_values: dict[str, dict[str, dict[str, float]]] = {}
    split_tasks: dict[str, list[str]] = {}
    head = None
    for split in (splits or (ALL,)):
        env = split_env(section, split)
        head = env_headline(env)
        tasks = env.tasks()
        evaluated = set().union(*plans_by_schema.values()) if plans_by_schema else set()
        split_tasks[split] = [str(t.id) for t in tasks if str(t.id) in evaluated]
        for schema, plans in plans_by_schema.items():
            values = _task_values(env, plans, scores_by_schema.get(schema, {}), tasks)
            for column, per_task in values.items():
                task_values.setdefault(schema, {}).setdefault(column, {}).update(per_task)
    return {"headline": head, "task_values": task_values, "split_tasks": split_tasks}
