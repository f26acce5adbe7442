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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date as _date
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from envs.travel import hub
from envs.travel.index import SandboxIndex, default_index
from envs.travel.query import TravelQuery, empty_constraints
from envs.travel.schema import (
    CITIES_PER_DAYS,
    DAYS,
    HOUSE_RULES,
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
    # a database with sparse links (the real tables): draw the destination among the cities / states
    # linked to the origin both ways (a flight on some date or a road), not among all of them
    reachable_only: bool = False
    # what the local constraints are drawn from (the defaults: the benchmark's vocabularies)
    house_rules: tuple[str, ...] = HOUSE_RULES
    room_types: tuple[str, ...] = ROOM_TYPE_CONSTRAINTS
    cuisines: tuple[str, ...] = QUERY_CUISINES


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


def _local_constraints(rng: np.random.Generator, level: str, cfg: QueryConfig) -> dict[str, Any]:
    lc = empty_constraints()
    if level == "easy":
        return lc
    pool = (["house rule", "cuisine", "room type"] if level == "medium"
            else ["house rule", "cuisine", "room type", "transportation"])
    chosen = [pool[i] for i in rng.choice(len(pool), size=1 if level == "medium" else 3, replace=False)]
    for key in chosen:
        if key == "house rule":
            lc[key] = str(rng.choice(cfg.house_rules))
        elif key == "room type":
            lc[key] = str(rng.choice(cfg.room_types))
        elif key == "transportation":
            lc[key] = str(rng.choice(TRANSPORT_CONSTRAINTS))
        else:
            k = int(rng.choice([1, 2, 3], p=[0.3, 0.45, 0.25]))
            lc[key] = [str(c) for c in rng.choice(cfg.cuisines, size=min(k, len(cfg.cuisines)), replace=False)]
    return lc


def _linked(index: SandboxIndex) -> dict[str, set[str]]:
    """City -> the cities linked to it both ways (a flight on some date, or a drivable road)."""
    links = {(o, d) for (o, d, _) in index.flights_on}
    links |= {k for k, r in index.roads.items() if r.taxi_cost is not None}
    out: dict[str, set[str]] = {c: set() for c in index.city_state}
    for o, d in links:
        if o in out and d in out and o != d and (d, o) in links:
            out[o].add(d)
    return out


def generate_queries(index: SandboxIndex, seed: int = 0, config: QueryConfig | None = None,
                     accept: Callable[[TravelQuery, Any], bool] | None = None) -> list[TravelQuery]:
    """``config.per_cell`` queries for each (level, days), ids 0.. in (days, level, k) order;
    each feasible (the solver's optimum is within its budget). ``accept(query, solve result)``, when
    given, must hold too (e.g. the evaluator passes the solver's plan)."""
    cfg = config or QueryConfig()
    solver = TravelSolver(index)
    dates = sorted({d for (_, _, d) in index.flights_on}) or [f"2022-03-{d:02d}" for d in range(1, 32)]
    cities = list(index.city_state)
    states = {s: cs for s, cs in index.states.items()}
    linked = _linked(index) if cfg.reachable_only else {}
    if cfg.reachable_only:
        cities = [c for c in cities if linked[c]]
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
                    near = sorted(linked[org]) if cfg.reachable_only else [c for c in cities if c != org]
                    dest = str(rng.choice(near))
                else:
                    ok = [s for s, cs in states.items() if index.city_state[org] != s and len(cs) >= k
                          and (not cfg.reachable_only or any(c in linked[org] for c in cs))]
                    if not ok:
                        continue
                    dest = str(rng.choice(ok))
                start = int(rng.integers(0, len(dates) - days + 1))
                trip = tuple(dates[start:start + days])
                people = 1 if level == "easy" else int(rng.integers(2, 9))
                lc = _local_constraints(rng, level, cfg)
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
                if accept is not None and not accept(q, res):
                    continue
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
def load_hub_queries(source: str | Path = "osunlp/TravelPlanner", split: str = "validation", id_offset: int = 0,
                     **load_kwargs: Any) -> list[TravelQuery]:
    """Queries of one split of the hub dataset (``osunlp/TravelPlanner``, config = split) or of a
    local copy in its columns (a folder holding ``{split}.csv`` / ``.jsonl`` / ``.json``, or such a
    file), ids ``id_offset`` + row; :mod:`envs.travel.hub` reads and checks them (a wrong type is a
    one-line :class:`envs.travel.hub.HubFormatError` naming the row and the field)."""
    return hub.load_split(source, split, id_offset, **load_kwargs)[0]


def queries_by_id(queries: Sequence[TravelQuery]) -> dict[int, TravelQuery]:
    return {q.id: q for q in queries}
