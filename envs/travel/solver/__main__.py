"""``python -m envs.travel.solver [--database DIR] [--queries FILE|DIR|HUB_ID] [--split NAME] [--seed 0]
[--limit N]``: solve every query exactly (:class:`envs.travel.solver.TravelSolver`) and evaluate the
plans in both evaluator modes.

Data (:mod:`envs.travel.cli`): by default the synthetic sandbox and its persisted split;
``--database DIR`` alone: the real tables with queries generated over them
(:mod:`envs.travel.real_sandbox`); ``--queries`` (a hub-format file / folder or the hub id): those
queries of ``--split`` (``train`` / ``validation`` / ``test``: the hub's splits;
``<hub split>:re-split:<part>``), against ``--database DIR`` or, without it (or with
``--database reference_information``), sole-planning: each query against its own reference
rows only. A loading error is one line, exit 2.

Last line: ``solver final pass rate: <x> on <n> queries``. The command-line entry point lives here,
not in the solver's module, so the solver imports nothing above it (the evaluator, the query
generator and the split all sit above the solver).
"""

from __future__ import annotations

import argparse
import time

from envs.travel.cli import CommandError, add_data_options, loading, run_command
from envs.travel.evaluator import TravelEvaluator, summarize
from envs.travel.index import SandboxIndex
from envs.travel.queries import default_queries
from envs.travel.real_sandbox import real_queries
from envs.travel.reference_info import SOLE_PLANNING, reference_database
from envs.travel.sandbox import load_database
from envs.travel.solver import TravelSolver
from envs.travel.split import SPLITS, hub_split, load_split


def load_queries(args) -> tuple[list, list, str]:
    """``(queries, their indexes, what was loaded)``: one index per query (sole-planning) or the
    same index for all."""
    if args.queries is None:
        split = args.split or "all"
        if split not in ("all", *SPLITS):
            raise CommandError(f"--split {split!r}: without --queries the splits are all, {', '.join(SPLITS)}")
        if args.database is None:
            index, queries = default_queries(args.seed)
            parts = None if split == "all" else load_split(seed=args.seed)
            where = f"synthetic sandbox seed {args.seed}"
        elif args.database == SOLE_PLANNING:
            raise CommandError("--database reference_information needs --queries (the hub-format queries whose "
                               "reference_information column is read)")
        else:
            with loading(f"the database {args.database}"):
                index, queries, parts, where = real_queries(args.database, args.flights, args.seed)
        if split != "all":
            ids = set(parts[split])
            queries = [q for q in queries if q.id in ids]
        return queries, [index] * len(queries), where
    split = args.split or "validation"
    with loading(f"the queries {args.queries} ({split})"):
        queries, rows, ids = hub_split(args.queries, split, args.seed)
    keep = set(ids)
    pairs = [(q, r) for q, r in zip(queries, rows) if q.id in keep]
    if args.limit:
        pairs = pairs[: args.limit]
    queries = [q for q, _ in pairs]
    if args.database is None or args.database == SOLE_PLANNING:
        indexes = [SandboxIndex(reference_database(q, r.get("reference_information"))) for q, r in pairs]
        return queries, indexes, f"{args.queries} ({split}), sole-planning on each query's reference_information"
    with loading(f"the database {args.database}"):
        index = SandboxIndex(load_database(args.database, flights=args.flights, flights_seed=args.seed))
    return queries, [index] * len(queries), f"{args.queries} ({split}) on {args.database}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m envs.travel.solver",
                                 description="Solve every query exactly and evaluate the plans.")
    add_data_options(ap, split_default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    queries, indexes, where = load_queries(args)
    if args.limit:
        queries, indexes = queries[: args.limit], indexes[: args.limit]
    t1 = time.perf_counter()
    results = [TravelSolver(ix).solve(q) for q, ix in zip(queries, indexes)]
    t2 = time.perf_counter()
    evs = [TravelEvaluator(ix).evaluate(q, r.plan if r else "") for q, r, ix in zip(queries, results, indexes)]
    evq = [TravelEvaluator(ix, official_quirks=True).evaluate(q, r.plan if r else "")
           for q, r, ix in zip(queries, results, indexes)]
    s, sq = summarize(queries, evs), summarize(queries, evq)
    slack = [q.budget / r.cost for q, r in zip(queries, results) if r and r.cost]
    print(f"queries: {where}")
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
    run_command(main)
