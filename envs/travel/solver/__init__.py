"""Exact minimum-cost solver: for a query, the cheapest plan that passes every constraint.

``python -m envs.travel.solver [--split all|train|validation|test] [--seed 0] [--limit N]`` solves
every query and evaluates the plans (the command line is ``solver/__main__.py``).

The search is exact by decomposition. A plan's cost is transport + accommodation + meals
(attractions are free), and once the route is fixed -- the ordered cities and the days on which the
traveller moves -- the three parts only interact through the route:

* transport: the non-conflicting rule allows {flight, taxi} legs or all self-driving legs, so the
  cheapest option is min(sum of per-leg min(flight, taxi), sum of self-driving legs), each subject
  to the query's transportation rule;
* accommodation: for a stay of n nights in a city the cheapest valid choice is the single hotel
  with the lowest nightly cost whose minimum nights <= n (any mix of hotels costs at least that);
* meals: full days need 3 distinct restaurants of the city, travel days may hold optional meals of
  either city; without a cuisine rule the cheapest are the k cheapest restaurants, with one an
  exact DP over cities x covered cuisines x meals moved to travel days, where each city's cost for
  (cuisine mask, count) is the minimum over covering sets (one restaurant per cuisine) plus the
  cheapest others.

Routes are enumerated (at most 120 city orders x 10 day patterns for 7-day trips) with a lower bound
(meals without the cuisine rule) and evaluated exactly in lower-bound order until the bound passes
the best cost: branch and bound, so the result is the optimum. Ties go to the first route in
(cities, day pattern) order and to names, so results are deterministic.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from envs.travel.index import SandboxIndex
from envs.travel.meal_costs import INF
from envs.travel.plans import Plan, make_day
from envs.travel.query import TravelQuery
from envs.travel.route_costs import Leg, RouteCosts
from envs.travel.text import attractions_text, entity


@dataclass
class SolveResult:
    query_id: int
    plan: Plan
    cost: float
    cities: tuple[str, ...]
    move_days: tuple[int, ...]
    legs: list[Leg] = field(default_factory=list)
    routes_examined: int = 0

    def within_budget(self, budget: float) -> bool:
        return self.cost <= budget + 1e-9


def transition_patterns(days: int, k: int) -> list[tuple[int, ...]]:
    """Travel days 1 = t0 < t1 < ... < tk = days (every city gets at least one night)."""
    if days < k + 1:
        return []
    return [(1, *mid, days) for mid in itertools.combinations(range(2, days), k - 1)]


class TravelSolver:
    """Exact minimum-cost plans by branch and bound over routes (see the module docstring)."""

    def __init__(self, index: SandboxIndex, attractions_per_day: int = 2):
        self.index = index
        self.attractions_per_day = attractions_per_day

    # ------------------------------------------------------------------------------ candidates
    def route_cities(self, q: TravelQuery) -> list[tuple[str, ...]]:
        k = q.visiting_city_number
        if q.days <= 3 or k == 1 and q.dest in self.index.city_state:
            return [(q.dest,)] if q.dest in self.index.city_state and q.dest != q.org else []
        pool = [c for c in self.index.states.get(q.dest, []) if c != q.org]
        return list(itertools.permutations(pool, k))

    def solve(self, q: TravelQuery) -> SolveResult | None:
        """The cheapest plan passing every constraint but the budget (None if there is none);
        check ``result.within_budget(q.budget)`` for the budget."""
        ctx = RouteCosts(self.index, q)
        k = q.visiting_city_number
        patterns = transition_patterns(q.days, k)
        candidates = []
        for cities in self.route_cities(q):
            for pat in patterns:
                lb = ctx.lower_bound(cities, pat)
                if lb < INF:
                    candidates.append((lb, cities, pat))
        candidates.sort(key=lambda c: c[0])
        best: tuple[float, Any] | None = None
        examined = 0
        for lb, cities, pat in candidates:
            if best is not None and lb >= best[0] - 1e-9:
                break
            examined += 1
            res = ctx.exact(cities, pat)
            if res is not None and (best is None or res[0] < best[0] - 1e-9):
                best = (res[0], (cities, pat, res[1]))
        if best is None:
            return None
        cost, (cities, pat, detail) = best
        plan, legs = assemble_plan(self.index, q, cities, pat, detail, self.attractions_per_day)
        return SolveResult(q.id, plan, cost, cities, pat, legs, examined)


# ------------------------------------------------------------------------------ plan assembly
def assemble_plan(index: SandboxIndex, q: TravelQuery, cities: tuple[str, ...], pat: tuple[int, ...], detail,
                  per_day: int) -> tuple[Plan, list[Leg]]:
    """The plan of a solved route: ``detail`` is :meth:`RouteCosts.exact`'s (legs, hotels, meal
    choices); ``per_day`` attractions on each full day."""
    legs, hotels, meal_choices = detail
    stops = [q.org, *cities, q.org]
    move = {d: j for j, d in enumerate(pat)}
    plan: Plan = []
    # where each chosen restaurant goes
    full_meals: dict[int, list[str]] = {}
    travel_meals: dict[int, list[str]] = {}
    used_attr: dict[str, int] = {}
    for j, city in enumerate(cities):
        rs, a, b = meal_choices[j]
        names = [entity(r.name, city) for r in rs]
        nfull = pat[j + 1] - pat[j] - 1
        req = names[: 3 * nfull]
        extra = names[3 * nfull:]
        for d in range(nfull):
            full_meals[pat[j] + 1 + d] = req[3 * d: 3 * d + 3]
        travel_meals.setdefault(pat[j], []).extend(extra[:a])  # arrival day
        travel_meals.setdefault(pat[j + 1], []).extend(extra[a:a + b])  # departure day
    for d in range(1, q.days + 1):
        if d in move:
            j = move[d]
            a, b = stops[j], stops[j + 1]
            ms = travel_meals.get(d, []) + ["-"] * 3
            acc = entity(hotels[j].name, b) if d < q.days else "-"
            plan.append(make_day(d, f"from {a} to {b}", legs[j].text, ms[0], "-", ms[1], ms[2], acc))
        else:
            j = max(i for i, t in enumerate(pat) if t < d)
            city = cities[j]
            attrs = index.attractions.in_city(city)
            start = used_attr.get(city, 0)
            # leave enough attractions for the remaining full days in this city
            remaining_days = pat[j + 1] - d - 1
            take = max(1, min(per_day, len(attrs) - start - remaining_days))
            chosen = [entity(x.name, city) for x in attrs[start:start + take]]
            used_attr[city] = start + take
            bl, lu, di = full_meals[d]
            plan.append(make_day(d, city, "-", bl, attractions_text(chosen), lu, di, entity(hotels[j].name, city)))
    return plan, legs
