"""``python -m envs.travel.sandbox [--export DIR] [--seed 0] [--no-plans]``: generate the sandbox
database (and print its table sizes); with ``--export``, write ``DIR/database/``, ``DIR/queries/``
and ``DIR/plans/`` in the public TravelPlanner layout (:func:`envs.travel.interchange.export_all`).

The command-line entry point lives here, not in the database module: the exporter needs the query
generator, the solver and the split, which all sit above the database.
"""

from __future__ import annotations

import argparse

from envs.travel.interchange import export_all
from envs.travel.sandbox import generate_database


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m envs.travel.sandbox",
                                 description="Generate the travel sandbox database; --export writes it in the "
                                             "public TravelPlanner layout.")
    ap.add_argument("--export", metavar="DIR", help="write database/, queries/ and plans/ under DIR")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-plans", action="store_true", help="skip solving the queries (plans/)")
    args = ap.parse_args(argv)
    db = generate_database(args.seed)
    print("sandbox", {k: v for k, v in db.sizes().items()})
    if args.export:
        written = export_all(db, args.export, seed=args.seed, with_plans=not args.no_plans)
        for p in written:
            print("wrote", p)


if __name__ == "__main__":
    main()
