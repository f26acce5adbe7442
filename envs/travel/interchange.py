"""Export of the sandbox in the real benchmark's files: the database (``sandbox.export_database``),
the queries in the hub dataset's columns (``queries/{split}.csv``; ``train.csv`` also carries
``annotated_plan``, as on the hub; every row a ``generated`` column saying what of it is made up:
the query, its reference information, its flights -- ``none`` for a benchmark query over the real
tables and the official flights) and plans in the official submission format
(``plans/solver_{split}.jsonl``: one ``{"idx", "query", "plan"}`` per line, aligned with the CSV).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from envs.travel.candidates import query_candidates
from envs.travel.index import SandboxIndex
from envs.travel.plans import Plan
from envs.travel.queries import default_queries, generate_queries
from envs.travel.query import TravelQuery
from envs.travel.sandbox import SandboxDB, export_database, generated_mark
from envs.travel.solver import TravelSolver
from envs.travel.split import SPLITS, load_split, make_split
from envs.travel.submission import read_submission, write_submission  # noqa: F401  (the submission file)
from envs.travel.tools import TravelTools


def reference_information(index: SandboxIndex, q: TravelQuery, tools=None) -> str:
    """The hub's ``reference_information`` column: the notes an agent would collect for ``q``, in
    the official notebook's format (the literal of a list of {"Description", "Content"}; tables as
    ``to_string(index=False)`` of the official tools' columns). It holds every candidate of
    :func:`query_candidates` -- each route city's tables, every flight on each day a leg is possible,
    the distances -- so :func:`envs.travel.reference_info.reference_database` rebuilds the same
    candidates from it (sole-planning)."""
    tools = tools or TravelTools(index)
    cand = query_candidates(index, q)
    notes = []
    for c in [q.org, *cand.route_cities]:
        for label, table in (("Attractions", tools.attractions(c)), ("Restaurants", tools.restaurants(c)),
                             ("Accommodations", tools.accommodations(c))):
            notes.append({"Description": f"{label} in {c}",
                          "Content": table.to_string(index=False) if len(table) else f"There is no {label.lower()} "
                          f"in {c}."})
    for (a, b), days in cand.transport.items():
        for i in sorted(days):
            notes.append({"Description": f"Flight from {a} to {b} on {q.date[i]}",
                          "Content": tools.call(f"FlightSearch[{a}, {b}, {q.date[i]}]")})
        for mode, label in (("self-driving", "Self-driving"), ("taxi", "Taxi")):
            notes.append({"Description": f"{label} from {a} to {b}",
                          "Content": tools.call(f"GoogleDistanceMatrix[{a}, {b}, {mode}]")})
    return repr(notes)


def queries_frame(queries: Sequence[TravelQuery], index: SandboxIndex | None = None,
                  plans: dict[int, Plan] | None = None, generated: str | None = None) -> pd.DataFrame:
    """The hub's columns; ``generated``: the rows' ``generated`` column (what of them is made up,
    :func:`envs.travel.sandbox.generated_mark`), absent when None."""
    tools = TravelTools(index) if index is not None else None
    rows = []
    for q in queries:
        row = q.to_hub()
        row["reference_information"] = reference_information(index, q, tools) if index is not None else "[]"
        if plans is not None:
            row["annotated_plan"] = repr(plans.get(q.id))
        if generated is not None:
            row["generated"] = generated
        rows.append(row)
    return pd.DataFrame(rows)


def export_all(db: SandboxDB, out_dir: str | Path, seed: int = 0, with_plans: bool = True,
               reference_info: bool = True) -> list[Path]:
    """database/, queries/{split}.csv and (with_plans) plans/solver_{split}.jsonl under out_dir."""
    out = Path(out_dir)
    written = [export_database(db, out)]
    index, queries = default_queries(seed)
    if not db.equals(index.db):
        index = SandboxIndex(db)
        queries = generate_queries(index, seed)
        parts = make_split(queries, seed)
    else:
        parts = load_split(seed)
    by_id = {q.id: q for q in queries}
    solver = TravelSolver(index)
    for split in SPLITS:
        qs = [by_id[i] for i in parts[split]]
        plans = ({q.id: r.plan for q in qs if (r := solver.solve(q)) is not None}
                 if (with_plans or split == "train") else {})
        frame = queries_frame(qs, index if reference_info else None, plans if split == "train" else None,
                              generated=generated_mark(db, True, seed))
        path = out / "queries" / f"{split}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        written.append(path)
        if with_plans:
            written.append(write_submission(out / "plans" / f"solver_{split}.jsonl", qs, [plans.get(q.id) for q in qs]))
    return written


def export_queries(index: SandboxIndex, queries: Sequence[TravelQuery], out_dir: str | Path, name: str,
                   with_plans: bool = True, generated: bool = False) -> list[Path]:
    """``queries/{name}.csv`` (hub columns, ``reference_information`` from ``index``: a file the
    sole-planning setting reads alone; the ``generated`` column says what of a row is made up --
    ``generated``: the queries themselves) and, with plans, ``plans/solver_{name}.jsonl``; a split
    name's ``:`` is written ``_`` in file names."""
    out, stem = Path(out_dir), name.replace(":", "_")
    solver = TravelSolver(index)
    plans = {q.id: r.plan for q in queries if (r := solver.solve(q)) is not None} if with_plans else {}
    path = out / "queries" / f"{stem}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    queries_frame(queries, index, plans if with_plans else None,
                  generated=generated_mark(index.db, generated)).to_csv(path, index=False)
    written = [path]
    if with_plans:
        written.append(write_submission(out / "plans" / f"solver_{stem}.jsonl", queries,
                                        [plans.get(q.id) for q in queries]))
    return written
