"""``python -m envs.travel.sandbox [--database DIR] [--queries FILE|DIR|HUB_ID] [--split NAME]
[--export DIR] [--seed 0] [--no-plans]``: the sandbox database -- generated (seeded) by default, or
loaded from ``--database DIR`` -- and its table sizes.

``--export DIR`` writes ``DIR/database/``, ``DIR/queries/`` and ``DIR/plans/`` in the public
TravelPlanner layout (:func:`envs.travel.interchange.export_all`); with ``--queries`` it writes those
queries of ``--split`` instead, with the ``reference_information`` column computed from the database
(:func:`envs.travel.interchange.export_queries`: a file sole-planning reads alone). Generated flights
are written as ``flights/generated_Flights_seed<seed>.csv``, never under the official file name, and
each query row's ``generated`` column says what of it is made up. The data options
are the solver's (:mod:`envs.travel.cli`); a loading error is one line, exit 2.

The command-line entry point lives here, not in the database module: the exporter needs the query
generator, the solver and the split, which all sit above the database.
"""

from __future__ import annotations

import argparse

from envs.travel.cli import CommandError, add_data_options, loading, run_command
from envs.travel.index import SandboxIndex
from envs.travel.interchange import export_all, export_queries
from envs.travel.reference_info import SOLE_PLANNING, union_database
from envs.travel.sandbox import generate_database, load_database
from envs.travel.split import hub_split


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m envs.travel.sandbox",
                                 description="Generate (or load) the travel sandbox database; --export writes it "
                                             "in the public TravelPlanner layout.")
    add_data_options(ap, split_default="validation")
    ap.add_argument("--export", metavar="DIR", help="write database/, queries/ and plans/ under DIR")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-plans", action="store_true", help="skip solving the queries (plans/)")
    args = ap.parse_args(argv)
    queries = rows = None
    if args.queries is not None:
        with loading(f"the queries {args.queries} ({args.split})"):
            queries, rows, ids = hub_split(args.queries, args.split, args.seed)
        keep = set(ids)
        rows = [r for q, r in zip(queries, rows) if q.id in keep]
        queries = [q for q in queries if q.id in keep]
    if args.database == SOLE_PLANNING:
        if queries is None:
            raise CommandError("--database reference_information needs --queries (the hub-format queries whose "
                               "reference_information column is read)")
        with loading(f"the reference_information of {args.queries}"):
            db = union_database(zip(queries, (r.get("reference_information") for r in rows)))
    elif args.database is not None:
        with loading(f"the database {args.database}"):
            db = load_database(args.database, flights=args.flights, flights_seed=args.seed)
    else:
        db = generate_database(args.seed)
    print("sandbox", {k: v for k, v in db.sizes().items()}, f"({db.source})")
    if queries is not None:
        print(f"queries {args.queries} ({args.split}): {len(queries)}")
    if args.export:
        if queries is not None:
            written = export_queries(SandboxIndex(db), queries, args.export, args.split, with_plans=not args.no_plans)
        else:
            written = export_all(db, args.export, seed=args.seed, with_plans=not args.no_plans)
        for p in written:
            print("wrote", p)


if __name__ == "__main__":
    run_command(main)
