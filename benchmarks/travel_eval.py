"""Benchmark: the travel evaluator (indexed lookups) against a row-by-row re-implementation of the
official code (a DataFrame filter per entity lookup), on the same plans in the same run.

The workload is the RL-like mix: for every ``--stride``-th query its solver plan, a greedy plan, a
random plan and one perturbation of each kind (wrong city, unknown name, repeats, missing fields,
swapped transport ...), fixed seed. Both evaluators judge the same parsed plans with the official
rules (``official_quirks=True``, which the row-by-row evaluator implements), and the verdicts are compared.

    python benchmarks/travel_eval.py [--stride 4] [--ref-plans 300]

Last line: ``evaluator speedup: <ratio>x (<indexed> vs <row-by-row> plans/s)``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from envs.travel.evaluator import TravelEvaluator
from envs.travel.plans import format_plan
from envs.travel.queries import default_queries
from envs.travel.row_by_row_eval import RowByRowEvaluator
from envs.travel.simple_planners import PERTURBATIONS, greedy_plan, perturb, random_plan
from envs.travel.solver import TravelSolver


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stride", type=int, default=4, help="use every stride-th query")
    p.add_argument("--ref-plans", type=int, default=300, help="plans timed with the slow row-by-row evaluator")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    index, queries = default_queries(args.seed)
    solver = TravelSolver(index)
    rng = np.random.default_rng(args.seed)
    pairs = []
    for q in queries[:: args.stride]:
        base = solver.solve(q).plan
        pairs += [(q, base), (q, greedy_plan(index, q)), (q, random_plan(index, q, rng))]
        pairs += [(q, perturb(base, index, q, rng, kind)) for kind in PERTURBATIONS]
    order = rng.permutation(len(pairs))
    pairs = [pairs[i] for i in order]
    texts = [(q, format_plan(plan)) for q, plan in pairs]
    sub = pairs[: args.ref_plans]
    print(f"{len(pairs)} plans over {len(queries[:: args.stride])} queries; row-by-row evaluator timed on {len(sub)}")

    def rate(fn, items) -> float:
        t = time.perf_counter()
        for q, plan in items:
            fn(q, plan)
        return len(items) / (time.perf_counter() - t)

    ref = RowByRowEvaluator(index.db)
    ref_rate = rate(lambda q, plan: ref.evaluate(q.as_dict(), plan), sub)
    fast_sub = rate(TravelEvaluator(index, official_quirks=True).evaluate_parsed, sub)  # fresh (cold) memo
    fast_all = rate(TravelEvaluator(index, official_quirks=True).evaluate_parsed, pairs)
    strict_all = rate(TravelEvaluator(index).evaluate_parsed, pairs)
    text_all = rate(TravelEvaluator(index).evaluate, texts)

    fast = TravelEvaluator(index, official_quirks=True)
    agree = 0
    for q, plan in sub:
        r, e = ref.evaluate(q.as_dict(), plan), fast.evaluate_parsed(q, plan)
        same = {k: v.passed for k, v in e.commonsense.items()} == r["commonsense"] and \
            (None if e.hard is None else {k: v.passed for k, v in e.hard.items()}) == r["hard"]
        agree += same
    print(f"verdicts identical on {agree}/{len(sub)} plans")
    print(f"row by row (a DataFrame filter per lookup): {ref_rate:10.1f} plans/s")
    print(f"indexed, official rules, same plans:       {fast_sub:10.1f} plans/s")
    print(f"indexed, official rules, all plans:        {fast_all:10.1f} plans/s")
    print(f"indexed, strict rules, all plans:          {strict_all:10.1f} plans/s")
    print(f"indexed, strict rules, from plan text:     {text_all:10.1f} plans/s")
    print(f"evaluator speedup: {fast_sub / ref_rate:.0f}x ({fast_sub:.0f} vs {ref_rate:.1f} plans/s)")


if __name__ == "__main__":
    main()
