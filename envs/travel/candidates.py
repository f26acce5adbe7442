"""Per-query candidate entities: everything a plan for the query may name, in the exact strings
the plan format uses. This is the interface a per-query grammar for constrained decoding needs
(every entity in the sandbox and in a city of the route, every field present); it deliberately
ignores the local constraints and the budget, which the planner has to learn.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from envs.travel.index import SandboxIndex
from envs.travel.query import TravelQuery
from envs.travel.text import entity, flight_text, ground_text


@dataclass
class QueryCandidates:
    query_id: int
    days: int
    org: str
    dates: list[str]
    visiting_city_number: int
    route_cities: list[str]                       # cities that may be visited (dest, or its state's cities)
    restaurants: dict[str, list[str]] = field(default_factory=dict)      # city -> ["Name, City", ...]
    attractions: dict[str, list[str]] = field(default_factory=dict)
    accommodations: dict[str, list[str]] = field(default_factory=dict)
    # (origin, dest) -> day index (0-based) -> transportation strings possible that day
    transport: dict[tuple[str, str], dict[int, list[str]]] = field(default_factory=dict)

    def field_options(self, field_name: str, cities: list[str]) -> list[str]:
        """The values a meal / attraction item / accommodation field may take on a day whose
        cities are ``cities`` (one, or two on a travel day), '-' included for meals."""
        table = {"breakfast": self.restaurants, "lunch": self.restaurants, "dinner": self.restaurants,
                 "attraction": self.attractions, "accommodation": self.accommodations}[field_name]
        out = ["-"]
        for c in (cities[-1:] if field_name == "accommodation" else cities):
            out += table.get(c, [])
        return out

    def current_city_options(self, day: int) -> list[str]:
        """current_city strings allowed on day ``day`` (1-based): a stay or a move."""
        stops = [self.org, *self.route_cities]
        moves = [f"from {a} to {b}" for (a, b) in self.transport if a in stops and b in stops]
        return list(self.route_cities) + moves

    def as_json(self) -> dict:
        return {"query_id": self.query_id, "days": self.days, "org": self.org, "dates": self.dates,
                "visiting_city_number": self.visiting_city_number, "route_cities": self.route_cities,
                "restaurants": self.restaurants, "attractions": self.attractions,
                "accommodations": self.accommodations,
                "transport": {f"{a}|{b}": {str(d): v for d, v in days.items()}
                              for (a, b), days in self.transport.items()}}


def query_candidates(index: SandboxIndex, q: TravelQuery) -> QueryCandidates:
    if q.days <= 3 and q.dest in index.city_state:
        route = [q.dest]
    else:
        route = [c for c in index.states.get(q.dest, []) if c != q.org]
    cand = QueryCandidates(q.id, q.days, q.org, list(q.date), q.visiting_city_number, route)
    for c in [q.org, *route]:
        cand.restaurants[c] = [entity(r.name, c) for r in index.restaurants.in_city(c)]
        cand.attractions[c] = [entity(a.name, c) for a in index.attractions.in_city(c)]
        cand.accommodations[c] = [entity(h.name, c) for h in index.hotels.in_city(c)]
    stops = [q.org, *route]
    for a in stops:
        for b in stops:
            if a == b or (a == q.org and b == q.org):
                continue
            per_day: dict[int, list[str]] = {}
            road = index.road(a, b)
            ground = []
            if road is not None and road.taxi_cost is not None:
                ground = [ground_text("self-driving", a, b, road.duration, road.distance, road.self_driving_cost),
                          ground_text("taxi", a, b, road.duration, road.distance, road.taxi_cost)]
            for i, d in enumerate(q.date):
                opts = [flight_text(f.number, a, b, f.dep_time, f.arr_time) for f in index.flights_between(a, b, d)]
                if opts or ground:
                    per_day[i] = opts + ground
            if per_day:
                cand.transport[(a, b)] = per_day
    return cand


def capped_candidates(c: QueryCandidates, limit: int, keep: str, seed: int, cities: int = 0) -> QueryCandidates:
    """``c`` with at most ``limit`` options per city and kind (restaurants, attractions,
    accommodations) and per leg and day (transport): every option that ``keep`` names (a train
    query's solver's plan text, so that the plan the flat planner is taught stays in its grammar; never
    a held-out query's plan: :func:`envs.travel.grammar_caps.grammar_caps`), then a sample of the others,
    drawn with ``(seed, query id)``; kept in their original order. ``limit`` 0: ``c`` itself. The real
    tables offer several hundred options per city, the synthetic sandbox a few dozen: the flat
    planner's grammar grows with them (``env.travel.max_options``). ``cities`` > 0: at most that many
    route cities as well (those ``keep`` visits, then a sample), and only their options and legs: a
    state's 5-7 day query may route over twenty cities and four hundred legs
    (``env.travel.max_cities``)."""
    if limit <= 0 and cities <= 0:
        return c
    rng = np.random.default_rng([seed, c.query_id])
    if 0 < cities < len(c.route_cities):
        visited = [x for x in c.route_cities if f"from {x} to" in keep or f"to {x}" in keep or f"({x})" in keep
                   or f", {x}" in keep]
        rest = [x for x in c.route_cities if x not in visited]
        drawn = rng.choice(len(rest), size=max(0, min(len(rest), cities - len(visited))), replace=False)
        route = [x for x in c.route_cities if x in visited or x in {rest[i] for i in drawn}]
        stops = {c.org, *route}
        c = replace(c, route_cities=route,
                    restaurants={k: v for k, v in c.restaurants.items() if k in stops},
                    attractions={k: v for k, v in c.attractions.items() if k in stops},
                    accommodations={k: v for k, v in c.accommodations.items() if k in stops},
                    transport={leg: v for leg, v in c.transport.items() if leg[0] in stops and leg[1] in stops})
    if limit <= 0:
        return c

    def pick(options: list[str]) -> list[str]:
        if len(options) <= limit:
            return list(options)
        named = {o for o in options if o in keep}
        rest = [o for o in options if o not in named]
        drawn = rng.choice(len(rest), size=max(0, min(len(rest), limit - len(named))), replace=False)
        chosen = named | {rest[i] for i in drawn}
        return [o for o in options if o in chosen]

    return replace(c, restaurants={k: pick(v) for k, v in c.restaurants.items()},
                   attractions={k: pick(v) for k, v in c.attractions.items()},
                   accommodations={k: pick(v) for k, v in c.accommodations.items()},
                   transport={leg: {d: pick(v) for d, v in days.items()} for leg, days in c.transport.items()})
