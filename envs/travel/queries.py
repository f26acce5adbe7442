"""Seeded TravelPlanner-style queries over the sandbox, feasible by construction, and the loader
for the real benchmark's queries (hub dataset ``osunlp/TravelPlanner``).

A query has an origin city, a destination (a city for 3 days, a state for 5 / 7 days with 2 / 3
cities to visit), consecutive dates in March 2022, a number of people, local constraints by level
(as in the paper: easy -- budget only, one person; medium -- plus one of house rule / cuisine /
room type, 2-8 people; hard -- three of house rule / cuisine / room type / transportation) and a
budget. Every query is solved exactly (:mod:`envs.travel.solver`) while it is generated and its
budget is the optimal cost times a random slack of 1.05-1.45, rounded up to $100: a plan within
budget exists by construction, and a careless one overspends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date as _date
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from envs.travel.index import SandboxIndex, default_index
from envs.travel.query import TravelQuery, empty_constraints
from envs.travel.schema import (
    CITIES_PER_DAYS,
    DAYS,
    HOUSE_RULES,
    HUB_REQUIRED,
    LEVELS,
    QUERY_CUISINES,
    ROOM_TYPE_CONSTRAINTS,
    TRANSPORT_CONSTRAINTS,
)
from envs.travel.solver import TravelSolver

__all__ = ["TravelQuery", "QueryConfig", "generate_queries", "default_queries", "query_text",
           "load_hub_queries"]


@dataclass(frozen=True)
class QueryConfig:
    per_cell: int = 40  # queries per (level, days) cell: 9 cells
    slack: tuple[float, float] = (1.05, 1.45)
    max_tries: int = 200


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 11 <= n % 100 <= 13 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _day_text(iso: str) -> str:
    d = _date.fromisoformat(iso)
    return f"{d.strftime('%B')} {_ordinal(d.day)}"


_TRIP = (
    "Please help me plan a trip from {org} to {dest} spanning {days} days from {start} to {end}, 2022.",
    "Could you create a {days}-day travel plan starting in {org} and heading to {dest}, from {start} to {end}, 2022?",
    ("I am departing from {org} for a {days}-day trip to {dest} between {start} and {end}, 2022. "
     "Please draft an itinerary."),
    ("Can you put together an itinerary for a {days}-day journey from {org} to {dest}, "
     "running from {start} to {end}, 2022?"),
    "Please design a travel plan from {org} to {dest} for {days} days, {start} through {end}, 2022.",
)
_CITIES = (" We would like to visit {k} cities in {dest}.", " The route should cover {k} cities in {dest}.")
_PEOPLE_ONE = ("The travel is for a single person", "I will be travelling alone", "This trip is for one person")
_PEOPLE_MANY = ("The travel is for a group of {n}", "There will be {n} of us", "The plan should accommodate {n} people")
_BUDGET = (" with a budget of ${b:,}.", ", and the total budget is ${b:,}.", " and we cannot spend more than ${b:,}.")
_RULE = {
    "smoking": "Our accommodation must allow smoking.",
    "parties": "We plan to host a small party, so the accommodation must allow parties.",
    "children under 10": "We are bringing children under 10, so the accommodation must allow them.",
    "visitors": "The accommodation should allow visitors.",
    "pets": "We are travelling with a pet, so the accommodation must allow pets.",
}
_ROOM = {
    "entire room": "We would like to stay in entire rooms.",
    "private room": "We prefer private rooms.",
    "shared room": "Shared rooms are fine with us; please book shared rooms.",
    "not shared room": "We do not want shared rooms.",
}
_TRANSPORT = {"no flight": "Please do not plan any flights.", "no self-driving": "We would rather not drive ourselves."}


def query_text(q: TravelQuery, variant: int = 0) -> str:
    dest = q.dest
    parts = [_TRIP[variant % len(_TRIP)].format(org=q.org, dest=dest, days=q.days,
                                                start=_day_text(q.date[0]), end=_day_text(q.date[-1]))]
    if q.days > 3:
        parts[0] += _CITIES[variant % len(_CITIES)].format(k=q.visiting_city_number, dest=dest)
    people = (_PEOPLE_ONE[variant % 3] if q.people_number == 1
              else _PEOPLE_MANY[variant % 3].format(n=q.people_number))
    parts.append(people + _BUDGET[variant % 3].format(b=q.budget))
    lc = q.local_constraint
    if lc.get("house rule"):
        parts.append(_RULE[lc["house rule"]])
    if lc.get("room type"):
        parts.append(_ROOM[lc["room type"]])
    if lc.get("cuisine"):
        cu = list(lc["cuisine"])
        listed = cu[0] if len(cu) == 1 else ", ".join(cu[:-1]) + f" and {cu[-1]}"
        parts.append(f"We would like to try {listed} cuisine during the trip.")
    if lc.get("transportation"):
        parts.append(_TRANSPORT[lc["transportation"]])
    return " ".join(parts)


def _local_constraints(rng: np.random.Generator, level: str) -> dict[str, Any]:
    lc = empty_constraints()
    if level == "easy":
        return lc
    pool = (["house rule", "cuisine", "room type"] if level == "medium"
            else ["house rule", "cuisine", "room type", "transportation"])
    chosen = [pool[i] for i in rng.choice(len(pool), size=1 if level == "medium" else 3, replace=False)]
    for key in chosen:
        if key == "house rule":
            lc[key] = str(rng.choice(HOUSE_RULES))
        elif key == "room type":
            lc[key] = str(rng.choice(ROOM_TYPE_CONSTRAINTS))
        elif key == "transportation":
            lc[key] = str(rng.choice(TRANSPORT_CONSTRAINTS))
        else:
            k = int(rng.choice([1, 2, 3], p=[0.3, 0.45, 0.25]))
            lc[key] = [str(c) for c in rng.choice(QUERY_CUISINES, size=k, replace=False)]
    return lc


def generate_queries(index: SandboxIndex, seed: int = 0, config: QueryConfig | None = None) -> list[TravelQuery]:
    """``config.per_cell`` queries for each (level, days), ids 0.. in (days, level, k) order;
    each feasible (the solver's optimum is within its budget)."""
    cfg = config or QueryConfig()
    solver = TravelSolver(index)
    dates = sorted({d for (_, _, d) in index.flights_on}) or [f"2022-03-{d:02d}" for d in range(1, 32)]
    cities = list(index.city_state)
    states = {s: cs for s, cs in index.states.items()}
    out: list[TravelQuery] = []
    seen: set[tuple] = set()
    for days in DAYS:
        k = CITIES_PER_DAYS[days]
        for li, level in enumerate(LEVELS):
            rng = np.random.default_rng([seed, days, li])
            made = 0
            tries = 0
            while made < cfg.per_cell:
                tries += 1
                if tries > cfg.max_tries * cfg.per_cell:
                    raise RuntimeError(f"could not generate feasible {level} {days}-day queries")
                org = str(rng.choice(cities))
                if days == 3:
                    dest = str(rng.choice([c for c in cities if c != org]))
                else:
                    ok = [s for s, cs in states.items() if index.city_state[org] != s and len(cs) >= k]
                    dest = str(rng.choice(ok))
                start = int(rng.integers(0, len(dates) - days + 1))
                trip = tuple(dates[start:start + days])
                people = 1 if level == "easy" else int(rng.integers(2, 9))
                lc = _local_constraints(rng, level)
                key = (org, dest, trip, people, repr(lc))
                if key in seen:
                    continue
                draft = TravelQuery(id=len(out), org=org, dest=dest, days=days, visiting_city_number=k,
                                    date=trip, people_number=people, local_constraint=lc, budget=10**9,
                                    level=level)
                res = solver.solve(draft)
                if res is None:
                    continue
                slack = float(rng.uniform(*cfg.slack))
                budget = int(math.ceil(res.cost * slack / 100.0) * 100)
                q = TravelQuery(id=len(out), org=org, dest=dest, days=days, visiting_city_number=k, date=trip,
                                people_number=people, local_constraint=lc, budget=budget, level=level)
                q = TravelQuery(**{**q.__dict__, "query": query_text(q, variant=int(rng.integers(0, 30)))})
                seen.add(key)
                out.append(q)
                made += 1
    return out


@lru_cache(maxsize=4)
def _cached_queries(seed: int) -> tuple[TravelQuery, ...]:
    return tuple(generate_queries(default_index(seed), seed))


def default_queries(seed: int = 0) -> tuple[SandboxIndex, list[TravelQuery]]:
    """The default sandbox index and its query set for ``seed`` (built once per process)."""
    return default_index(seed), list(_cached_queries(seed))


# ------------------------------------------------------------------------- the real benchmark
def load_hub_queries(source: str | Path = "osunlp/TravelPlanner", split: str = "validation",
                     **load_kwargs: Any) -> list[TravelQuery]:
    """Queries from the hub dataset (``osunlp/TravelPlanner``, config = split) or from a local copy
    in its columns: a directory holding ``{split}.csv`` / ``.jsonl`` / ``.json``, or such a file.
    Loaded with :func:`datasets.load_dataset`; a missing column is named in the error."""
    import datasets  # deferred: a heavy import that only the real benchmark's queries need

    path = Path(source)
    if path.exists():
        if path.is_dir():
            files = [path / f"{split}{ext}" for ext in (".csv", ".jsonl", ".json")]
            found = [f for f in files if f.is_file()]
            if not found:
                raise FileNotFoundError(f"no {split}.csv / {split}.jsonl / {split}.json in {path}")
            path = found[0]
        builder = "csv" if path.suffix == ".csv" else "json"
        ds = datasets.load_dataset(builder, data_files={split: str(path)}, split=split, **load_kwargs)
    else:
        ds = datasets.load_dataset(str(source), split, split=split, **load_kwargs)
    missing = [c for c in HUB_REQUIRED if c not in ds.column_names]
    if missing:
        raise ValueError(f"{source} ({split}): missing column(s) {missing}; the hub dataset has {HUB_REQUIRED}")
    return [TravelQuery.from_record(row, i) for i, row in enumerate(ds)]


def queries_by_id(queries: Sequence[TravelQuery]) -> dict[int, TravelQuery]:
    return {q.id: q for q in queries}
