"""The oracle: for every task, the best valid plan by exhaustive search up to a length limit.

It bounds what any planner can reach on the suite (``OpenAGIEnv.oracle_plans``), and the gap
between the oracle and the reference plans (the supervised labels) is the headroom RLTF has to
learn. Run (the command line: ``__main__.py``)::

    python -m envs.openagi.oracle [--split all] [--max-tools 5] [--n-samples 20]

The last line is ``headroom: <k>/<n> tasks`` (tasks where the oracle beats the reference by >0.01).

The search is deterministic and costs seconds per task, so :func:`oracle_for_task` runs it once
per key (:mod:`.fingerprint`: everything the result depends on) and keeps the entry on disk
(:mod:`.store`: ``rltf_cache_dir('oracle')``, damaged files searched again; ``RLTF_ORACLE_CACHE=0``
searches every time); :func:`search_oracle` is the search itself.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from envs.openagi.oracle import store
from envs.openagi.oracle.fingerprint import oracle_key
from envs.openagi.plans import PlanLimits, enumerate_plans, format_plan
from envs.openagi.tasks import Task

# ``env`` below is an OpenAGIEnv (its registry, limits and rewards); not imported: the env calls
# this module (OpenAGIEnv.oracle_plans)

HEADROOM_MARGIN = 0.01


@dataclass(frozen=True)
class OracleEntry:
    task_id: int
    reference_plan: str
    reference_score: float
    oracle_plan: str
    oracle_score: float
    n_plans: int

    @property
    def headroom(self) -> float:
        return self.oracle_score - self.reference_score


def search_oracle(env: Any, task: Task, limits: PlanLimits | None = None) -> OracleEntry:
    """Score every valid plan on all of the task's samples (ties go to the shorter, earlier plan)."""
    return _search(env, task, limits or env.limits)[0]


def _search(env: Any, task: Task, limits: PlanLimits) -> tuple[OracleEntry, bool]:
    """The entry, and whether it may be kept: every plan ran on every sample without an expert error
    (a failure may be transient: an entry is only kept when nothing failed)."""
    plans = sorted(enumerate_plans(env.registry, task.inputs, task.target, limits), key=len)
    results = env.reward_plans([(task, p) for p in plans])
    best = max(range(len(plans)), key=lambda i: (results[i].reward, -i))
    ref = env.reward_plans([(task, task.reference_plan)])[0]
    clean = all(e is None for r in (*results, ref) for e in r.sample_errors)
    return (OracleEntry(task.id, format_plan(task.reference_plan), ref.reward,
                        results[best].plan_text, results[best].reward, len(plans)), clean)


def oracle_for_task(env: Any, task: Task, limits: PlanLimits | None = None, *,
                    cache_dir: str | os.PathLike | None = None) -> OracleEntry:
    """:func:`search_oracle`, searched once per key and read back from ``cache_dir`` (default
    ``rltf_cache_dir('oracle')``) after; an env the key cannot describe is searched every time."""
    limits = limits or env.limits
    key = oracle_key(env, task, limits) if store.cache_enabled() else None
    if key is None:
        return _search(env, task, limits)[0]
    directory = Path(cache_dir) if cache_dir is not None else store.default_dir()
    fields = store.load(directory, key)
    if fields is not None and fields["task_id"] == task.id:
        return OracleEntry(**{k: store.FIELDS[k](v) for k, v in fields.items()})
    entry, clean = _search(env, task, limits)
    if clean:
        store.save(directory, key, asdict(entry))
    return entry


def run_oracle(env: Any, limits: PlanLimits | None = None) -> list[OracleEntry]:
    return [oracle_for_task(env, t, limits) for t in env.tasks()]
