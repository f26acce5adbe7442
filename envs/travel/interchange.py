"""Export of the sandbox in the real benchmark's files: the database (``sandbox.export_database``),
the queries in the hub dataset's columns (``queries/{split}.csv``; ``train.csv`` also carries
``annotated_plan``, as on the hub) and plans in the official submission format
(``plans/solver_{split}.jsonl``: one ``{"idx", "query", "plan"}`` per line, aligned with the CSV).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from envs.travel.candidates import query_candidates
from envs.travel.index import SandboxIndex
from envs.travel.plans import Plan
from envs.travel.queries import default_queries, generate_queries
from envs.travel.query import TravelQuery
from envs.travel.sandbox import SandboxDB, export_database
from envs.travel.solver import TravelSolver
from envs.travel.split import SPLITS, load_split, make_split
from envs.travel.tools import TravelTools


def reference_information(index: SandboxIndex, q: TravelQuery, tools=None) -> str:
    """The hub's ``reference_information`` column: the tool outputs a planner would collect
    (a Python-literal list of {"Description", "Content"})."""
    tools = tools or TravelTools(index)
    cand = query_candidates(index, q)
    notes = []
    for c in cand.route_cities:
        notes.append({"Description": f"Attractions in {c}",
                      "Content": tools.attractions(c)[["Name", "Address", "City"]].to_string(index=False)})
        notes.append({"Description": f"Restaurants in {c}", "Content": tools.restaurants(c).to_string(index=False)})
        notes.append({"Description": f"Accommodations in {c}",
                      "Content": tools.accommodations(c).to_string(index=False)})
    for (a, b), days in cand.transport.items():
        for i in sorted(days)[:1] if a != q.org and b != q.org else sorted(days):
            notes.append({"Description": f"Flight from {a} to {b} on {q.date[i]}",
                          "Content": tools.call(f"FlightSearch[{a}, {b}, {q.date[i]}]")})
        for mode in ("self-driving", "taxi"):
            notes.append({"Description": f"{mode} from {a} to {b}",
                          "Content": tools.call(f"GoogleDistanceMatrix[{a}, {b}, {mode}]")})
    return repr(notes)


def queries_frame(queries: Sequence[TravelQuery], index: SandboxIndex | None = None,
                  plans: dict[int, Plan] | None = None) -> pd.DataFrame:
    tools = TravelTools(index) if index is not None else None
    rows = []
    for q in queries:
        row = q.to_hub()
        row["reference_information"] = reference_information(index, q, tools) if index is not None else "[]"
        if plans is not None:
            row["annotated_plan"] = repr(plans.get(q.id))
        rows.append(row)
    return pd.DataFrame(rows)


def write_submission(path: str | Path, queries: Sequence[TravelQuery], plans: Sequence[Plan | None]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for i, (q, p) in enumerate(zip(queries, plans), 1):
            f.write(json.dumps({"idx": i, "query": q.query, "plan": p}, ensure_ascii=False) + "\n")
    return path


def read_submission(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").strip().split("\n") if line.strip()]


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
        frame = queries_frame(qs, index if reference_info else None, plans if split == "train" else None)
        path = out / "queries" / f"{split}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        written.append(path)
        if with_plans:
            written.append(write_submission(out / "plans" / f"solver_{split}.jsonl", qs, [plans.get(q.id) for q in qs]))
    return written
