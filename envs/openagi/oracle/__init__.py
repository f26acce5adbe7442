"""The oracle: for every task, the best valid plan by exhaustive search up to a length limit.

It bounds what any planner can reach on the suite (``OpenAGIEnv.oracle_plans``), and the gap
between the oracle and the reference plans (the supervised labels) is the headroom RLTF has to
learn. Run (the command line: ``__main__.py``)::

    python -m envs.openagi.oracle [--split all] [--max-tools 5] [--n-samples 20]

The last line is ``headroom: <k>/<n> tasks`` (tasks where the oracle beats the reference by >0.01).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def oracle_for_task(env: Any, task: Task, limits: PlanLimits | None = None) -> OracleEntry:
    """Score every valid plan on all of the task's samples (ties go to the shorter, earlier plan)."""
    limits = limits or env.limits
    plans = sorted(enumerate_plans(env.registry, task.inputs, task.target, limits), key=len)
    results = env.reward_plans([(task, p) for p in plans])
    best = max(range(len(plans)), key=lambda i: (results[i].reward, -i))
    ref = env.reward_plans([(task, task.reference_plan)])[0]
    return OracleEntry(task.id, format_plan(task.reference_plan), ref.reward,
                       results[best].plan_text, results[best].reward, len(plans))


def run_oracle(env: Any, limits: PlanLimits | None = None) -> list[OracleEntry]:
    return [oracle_for_task(env, t, limits) for t in env.tasks()]
