"""The oracle: for every task, the best valid plan by exhaustive search up to a length limit.

It bounds what any planner can reach on the suite, and the gap between the oracle and the
reference plans (the supervised labels) is the headroom RLTF has to learn. Run::

    python -m envs.openagi.oracle [--split all] [--max-tools 5] [--n-samples 20]

The last line is ``headroom: <k>/<n> tasks`` (tasks where the oracle beats the reference by >0.01).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from envs.openagi.env import OpenAGIEnv
from envs.openagi.plans import PlanLimits, enumerate_plans, format_plan
from envs.openagi.suite import SUITE_LIMITS
from envs.openagi.tasks import Task

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


def oracle_for_task(env: OpenAGIEnv, task: Task, limits: PlanLimits | None = None) -> OracleEntry:
    """Score every valid plan on all of the task's samples (ties go to the shorter, earlier plan)."""
    limits = limits or env.limits
    plans = sorted(enumerate_plans(env.registry, task.inputs, task.target, limits), key=len)
    results = env.reward_plans([(task, p) for p in plans])
    best = max(range(len(plans)), key=lambda i: (results[i].reward, -i))
    ref = env.reward_plans([(task, task.reference_plan)])[0]
    return OracleEntry(task.id, format_plan(task.reference_plan), ref.reward,
                       results[best].plan_text, results[best].reward, len(plans))


def run_oracle(env: OpenAGIEnv, limits: PlanLimits | None = None) -> list[OracleEntry]:
    return [oracle_for_task(env, t, limits) for t in env.tasks()]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", default="all", choices=("all", "train", "validation", "test"))
    p.add_argument("--n-samples", type=int, default=20)
    p.add_argument("--data-seed", type=int, default=0)
    d = SUITE_LIMITS["lite"]
    p.add_argument("--max-tools", type=int, default=d.max_tools, help="longest linear plan searched")
    p.add_argument("--max-branch", type=int, default=d.max_branch)
    p.add_argument("--max-tail", type=int, default=d.max_tail)
    args = p.parse_args(argv)
    limits = PlanLimits(args.max_tools, args.max_branch, args.max_tail)
    env = OpenAGIEnv(split=args.split, n_samples=args.n_samples, data_seed=args.data_seed, limits=limits)
    t0 = time.perf_counter()
    entries = []
    for task in env.tasks():
        e = oracle_for_task(env, task, limits)
        entries.append(e)
        flag = "*" if e.headroom > HEADROOM_MARGIN else " "
        print(f"{flag} task {task.id:3d} {task.description}")
        print(f"    reference {e.reference_score:.4f}  {e.reference_plan}")
        print(f"    oracle    {e.oracle_score:.4f}  {e.oracle_plan}   ({e.n_plans} plans)")
    n = len(entries)
    k = sum(e.headroom > HEADROOM_MARGIN for e in entries)
    ref = sum(e.reference_score for e in entries) / n
    orc = sum(e.oracle_score for e in entries) / n
    stats = env.cache_stats()
    print(f"mean reference {ref:.4f}  mean oracle {orc:.4f}  ({time.perf_counter() - t0:.1f}s, "
          f"cache hit rate {stats.hit_rate:.2%})")
    print(f"headroom: {k}/{n} tasks")


if __name__ == "__main__":
    main()
