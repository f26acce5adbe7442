"""``python -m envs.openagi.oracle``: the oracle of every task of a split, and the headroom
(see the package docstring)."""

from __future__ import annotations

import argparse
import time

from envs.openagi import oracle
from envs.openagi.env import OpenAGIEnv
from envs.openagi.oracle import HEADROOM_MARGIN, oracle_for_task
from envs.openagi.plans import PlanLimits
from envs.openagi.suite import SUITE_LIMITS


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=oracle.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
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
