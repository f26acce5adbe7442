"""``python -m envs.travel.solver [--split all|train|validation|test] [--seed 0] [--limit N]``: solve
every query exactly (:class:`envs.travel.solver.TravelSolver`) and evaluate the plans in both
evaluator modes.

Last line: ``solver final pass rate: <x> on <n> queries``. The command-line entry point lives here,
not in the solver's module, so the solver imports nothing above it (the evaluator, the query
generator and the split all sit above the solver).
"""

from __future__ import annotations

import argparse
import time

from envs.travel.evaluator import TravelEvaluator, summarize
from envs.travel.queries import default_queries
from envs.travel.solver import TravelSolver
from envs.travel.split import SPLITS, load_split


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m envs.travel.solver",
                                 description="Solve every query exactly and evaluate the plans.")
    ap.add_argument("--split", default="all", choices=("all", *SPLITS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    index, queries = default_queries(args.seed)
    if args.split != "all":
        ids = set(load_split(seed=args.seed)[args.split])
        queries = [q for q in queries if q.id in ids]
    if args.limit:
        queries = queries[: args.limit]
    t1 = time.perf_counter()
    solver = TravelSolver(index)
    results = [solver.solve(q) for q in queries]
    t2 = time.perf_counter()
    strict = TravelEvaluator(index)
    quirks = TravelEvaluator(index, official_quirks=True)
    evs = [strict.evaluate(q, r.plan if r else "") for q, r in zip(queries, results)]
    evq = [quirks.evaluate(q, r.plan if r else "") for q, r in zip(queries, results)]
    s, sq = summarize(queries, evs), summarize(queries, evq)
    slack = [q.budget / r.cost for q, r in zip(queries, results) if r]
    print(f"database + {len(queries)} queries built in {t1 - t0:.2f} s; solved in {t2 - t1:.2f} s "
          f"({1000 * (t2 - t1) / max(1, len(queries)):.1f} ms/query)")
    print("metric            strict  official")
    for k in ("delivery_rate", "commonsense_micro", "commonsense_macro", "hard_micro", "hard_macro", "final_pass"):
        print(f"{k:<17} {s[k]:.3f}   {sq[k]:.3f}")
    if slack:
        print(f"budget / optimal cost: min {min(slack):.2f}, median {sorted(slack)[len(slack) // 2]:.2f}, "
              f"max {max(slack):.2f}")
    bad = [e for e in evs if not e.final_pass]
    for e in bad[:5]:
        print(f"query {e.query_id} fails: {e.violations()}")
    print(f"solver final pass rate: {s['final_pass']:.3f} on {len(queries)} queries")


if __name__ == "__main__":
    main()
