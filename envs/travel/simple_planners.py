"""Simple planners for measuring how much the constraints bind, and plan perturbations for tests
and the evaluator benchmark.

* :func:`greedy_plan` -- a "quality first" planner that knows the commonsense rules but ignores
  prices and the local constraints: the state's first cities in table order, moves spread evenly,
  the cheapest flight (else a drive), the best-rated restaurants and hotels.
* :func:`unconstrained_plan` -- the solver's optimum for the query stripped of its local
  constraints: a plan that is cheap but blind to house rule / cuisine / room type / transport.
* :func:`random_plan` -- right shape, random entities of the day's cities and random transport.
* :func:`perturb` -- one random edit of a plan (wrong city, unknown name, repeat, '-', swapped
  transport, dropped field ...), so that a set of plans exercises every constraint both ways.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import replace

import numpy as np

from envs.travel.index import SandboxIndex
from envs.travel.plans import Plan, make_day
from envs.travel.query import TravelQuery, empty_constraints
from envs.travel.solver import TravelSolver, transition_patterns
from envs.travel.text import attractions_text, entity, flight_text, ground_text


def _legs_text(index: SandboxIndex, a: str, b: str, date: str, prefer: list[str], rng=None) -> str:
    for mode in prefer:
        if mode == "flight":
            fl = index.flights_between(a, b, date)
            if fl:
                f = fl[int(rng.integers(len(fl)))] if rng is not None else fl[0]
                return flight_text(f.number, a, b, f.dep_time, f.arr_time)
        else:
            r = index.road(a, b)
            if r is not None and r.cost(mode) is not None:
                return ground_text(mode, a, b, r.duration, r.distance, r.cost(mode))
    return f"Taxi, from {a} to {b}"


def _route(index: SandboxIndex, q: TravelQuery, rng=None) -> tuple[list[str], tuple[int, ...]]:
    k = q.visiting_city_number
    if q.days <= 3:
        cities = [q.dest]
    else:
        pool = [c for c in index.states.get(q.dest, []) if c != q.org]
        cities = [pool[i] for i in rng.permutation(len(pool))[:k]] if rng is not None else pool[:k]
    pats = transition_patterns(q.days, len(cities))
    pat = pats[int(rng.integers(len(pats)))] if rng is not None else pats[len(pats) // 2]
    return cities, pat


def _assemble(index, q, cities, pat, pick_meals, pick_attr, pick_hotel, transport) -> Plan:
    stops = [q.org, *cities, q.org]
    move = {d: j for j, d in enumerate(pat)}
    plan: Plan = []
    for d in range(1, q.days + 1):
        if d in move:
            j = move[d]
            a, b = stops[j], stops[j + 1]
            acc = pick_hotel(b, pat[j + 1] - pat[j]) if d < q.days else "-"
            plan.append(make_day(d, f"from {a} to {b}", transport(a, b, q.date[d - 1]), "-", "-", "-", "-", acc))
        else:
            j = max(i for i, t in enumerate(pat) if t < d)
            c = cities[j]
            bl, lu, di = pick_meals(c)
            plan.append(make_day(d, c, "-", bl, pick_attr(c), lu, di, pick_hotel(c, pat[j + 1] - pat[j])))
    return plan


def greedy_plan(index: SandboxIndex, q: TravelQuery) -> Plan:
    cities, pat = _route(index, q)
    used_r: set[str] = set()
    used_a: set[str] = set()
    hotel_for: dict[str, str] = {}

    def meals(c):
        rs = sorted(index.restaurants.in_city(c), key=lambda r: (-r.rating, r.name))
        out = [entity(r.name, c) for r in rs if entity(r.name, c) not in used_r][:3]
        used_r.update(out)
        return (out + ["-"] * 3)[:3]

    def attr(c):
        xs = [entity(a.name, c) for a in index.attractions.in_city(c) if entity(a.name, c) not in used_a][:1]
        used_a.update(xs)
        return attractions_text(xs)

    def hotel(c, nights):
        if c not in hotel_for:
            hs = sorted((h for h in index.hotels.in_city(c) if h.min_nights <= nights),
                        key=lambda h: (-h.review, h.name))
            hotel_for[c] = entity(hs[0].name, c) if hs else "-"
        return hotel_for[c]

    return _assemble(index, q, cities, pat, meals, attr, hotel,
                     lambda a, b, d: _legs_text(index, a, b, d, ["flight", "taxi"]))


def unconstrained_plan(index: SandboxIndex, q: TravelQuery) -> Plan | None:
    free = replace(q, local_constraint=empty_constraints())
    res = TravelSolver(index).solve(free)
    return None if res is None else res.plan


def random_plan(index: SandboxIndex, q: TravelQuery, rng: np.random.Generator) -> Plan:
    cities, pat = _route(index, q, rng)
    modes = [["flight", "taxi"], ["taxi", "flight"], ["self-driving", "taxi"]][int(rng.integers(3))]

    def meals(c):
        rs = index.restaurants.in_city(c)
        return tuple(entity(rs[int(rng.integers(len(rs)))].name, c) for _ in range(3))

    def attr(c):
        xs = index.attractions.in_city(c)
        return attractions_text([entity(xs[int(rng.integers(len(xs)))].name, c)
                                 for _ in range(int(rng.integers(1, 3)))])

    def hotel(c, nights):
        hs = index.hotels.in_city(c)
        return entity(hs[int(rng.integers(len(hs)))].name, c)

    return _assemble(index, q, cities, pat, meals, attr, hotel,
                     lambda a, b, d: _legs_text(index, a, b, d, modes, rng))


PERTURBATIONS = ("unknown_name", "other_city", "repeat_meal", "repeat_attraction", "drop_field", "dash_field",
                 "swap_transport", "wrong_hotel", "cut_day", "garble_city", "substring_name", "no_trailing_semicolon")


def perturb(plan: Plan, index: SandboxIndex, q: TravelQuery, rng: np.random.Generator, kind: str | None = None) -> Plan:
    """One random edit of ``plan`` (a deep copy is returned)."""
    p = copy.deepcopy(plan)
    kind = kind or PERTURBATIONS[int(rng.integers(len(PERTURBATIONS)))]
    d = int(rng.integers(len(p)))
    day = p[d]
    fields = ["breakfast", "lunch", "dinner", "attraction", "accommodation", "transportation"]
    f = fields[int(rng.integers(len(fields)))]
    cities = list(index.city_state)
    if kind == "unknown_name":
        day[f] = f"Nonexistent Place, {q.dest if q.days == 3 else cities[int(rng.integers(len(cities)))]}"
    elif kind == "other_city":
        c = cities[int(rng.integers(len(cities)))]
        rs = index.restaurants.in_city(c)
        day[["breakfast", "lunch", "dinner"][int(rng.integers(3))]] = entity(rs[int(rng.integers(len(rs)))].name, c)
    elif kind == "repeat_meal":
        meals = [(i, m) for i, u in enumerate(p) for m in ("breakfast", "lunch", "dinner")
                 if u.get(m) not in ("-", "", None)]
        if len(meals) >= 2:
            (i1, m1), (i2, m2) = [meals[i] for i in rng.choice(len(meals), 2, replace=False)]
            p[i2][m2] = p[i1][m1]
    elif kind == "repeat_attraction":
        a = day.get("attraction", "-")
        if a not in ("-", ""):
            day["attraction"] = a + a
    elif kind == "drop_field":
        day.pop(f, None)
    elif kind == "dash_field":
        day[f] = "-"
    elif kind == "swap_transport":
        for u in p:
            t = u.get("transportation", "-")
            if t not in ("-", ""):
                a, b = u["current_city"].replace("from ", "").split(" to ")
                mode = ["self-driving", "taxi", "flight"][int(rng.integers(3))]
                u["transportation"] = _legs_text(index, a, b, q.date[min(len(q.date) - 1, p.index(u))], [mode], rng)
                break
    elif kind == "wrong_hotel":
        c = day.get("accommodation", "-").split(", ")[-1]
        hs = index.hotels.in_city(c) if c in index.city_state else []
        if hs:
            new = entity(hs[int(rng.integers(len(hs)))].name, c)
            for u in p:
                if u.get("accommodation") == day.get("accommodation"):
                    u["accommodation"] = new
    elif kind == "cut_day":
        p = p[:-1] if len(p) > 1 else p
    elif kind == "garble_city":
        day["current_city"] = day.get("current_city", "").replace("from ", "fro ")
    elif kind == "substring_name":
        v = day.get(f, "-")
        if v not in ("-", "") and ", " in v and "Flight" not in v:
            name, city = v.rsplit(", ", 1)
            day[f] = f"{name[: max(1, len(name) // 2)]}, {city}"
    elif kind == "no_trailing_semicolon":
        for u in p:
            if u.get("attraction", "-") not in ("-", ""):
                u["attraction"] = u["attraction"].rstrip(";").replace(";", "; ")
    return p


def all_pairs(it):
    return itertools.combinations(it, 2)
