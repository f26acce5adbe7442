"""Exact minimum-cost solver: for a query, the cheapest plan that passes every constraint.

    python -m envs.travel.solver [--split all|train|validation|test] [--seed 0] [--limit N]

Last line: ``solver final pass rate: <x> on <n> queries``.

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

import argparse
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

from envs.travel.index import Hotel, Restaurant, SandboxIndex
from envs.travel.plans import Plan, make_day
from envs.travel.query import TravelQuery
from envs.travel.schema import HOUSE_RULE_TEXT, SELF_DRIVING_PER_CAR, TAXI_PER_CAR
from envs.travel.text import attractions_text, entity, flight_text, ground_text

ROOM_OK = {
    None: lambda t: True,
    "not shared room": lambda t: t != "Shared room",
    "shared room": lambda t: t == "Shared room",
    "private room": lambda t: t == "Private room",
    "entire room": lambda t: t == "Entire home/apt",
}
INF = float("inf")


@dataclass
class Leg:
    origin: str
    dest: str
    date: str
    mode: str  # "flight" | "taxi" | "self-driving"
    cost: float
    text: str


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
        ctx = _QueryContext(self.index, q)
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
        plan, legs = ctx.build_plan(cities, pat, detail, self.attractions_per_day)
        return SolveResult(q.id, plan, cost, cities, pat, legs, examined)


class _QueryContext:
    """Per-query memo tables: leg options, hotel costs, restaurant lists and meal DP pieces."""

    def __init__(self, index: SandboxIndex, q: TravelQuery):
        self.ix = index
        self.q = q
        self.p = q.people_number
        lc = q.local_constraint
        self.no_flight = lc.get("transportation") == "no flight"
        self.no_driving = lc.get("transportation") == "no self-driving"
        banned = HOUSE_RULE_TEXT.get(lc.get("house rule")) if lc.get("house rule") else None
        room_ok = ROOM_OK.get(lc.get("room type"), lambda t: True)
        self.hotel_ok = lambda h: room_ok(h.room_type) and not (banned and banned in h.house_rules)
        self.cuisines: tuple[str, ...] = tuple(dict.fromkeys(lc.get("cuisine") or ()))
        self._legs: dict = {}
        self._hotels: dict = {}
        self._rest: dict = {}
        self._meal: dict = {}

    # transport
    def leg_options(self, a: str, b: str, date: str) -> dict[str, Leg]:
        key = (a, b, date)
        if key in self._legs:
            return self._legs[key]
        out: dict[str, Leg] = {}
        if not self.no_flight:
            f = self.ix.cheapest_flight(a, b, date)
            if f is not None:
                out["flight"] = Leg(a, b, date, "flight", f.price * self.p,
                                    flight_text(f.number, a, b, f.dep_time, f.arr_time))
        road = self.ix.road(a, b)
        if road is not None and road.taxi_cost is not None:
            out["taxi"] = Leg(a, b, date, "taxi", road.taxi_cost * math.ceil(self.p / TAXI_PER_CAR),
                              ground_text("taxi", a, b, road.duration, road.distance, road.taxi_cost))
            if not self.no_driving:
                out["self-driving"] = Leg(a, b, date, "self-driving",
                                          road.self_driving_cost * math.ceil(self.p / SELF_DRIVING_PER_CAR),
                                          ground_text("self-driving", a, b, road.duration, road.distance,
                                                      road.self_driving_cost))
        self._legs[key] = out
        return out

    def transport(self, stops: list[str], pat: tuple[int, ...]) -> tuple[float, list[Leg]] | None:
        legs = [self.leg_options(stops[j], stops[j + 1], self.q.date[pat[j] - 1]) for j in range(len(pat))]
        best: tuple[float, list[Leg]] | None = None
        air = []
        for opts in legs:
            cands = [opts[m] for m in ("flight", "taxi") if m in opts]
            if not cands:
                air = None
                break
            air.append(min(cands, key=lambda l: (l.cost, l.mode)))
        if air is not None:
            best = (sum(l.cost for l in air), air)
        if all("self-driving" in opts for opts in legs):
            drive = [opts["self-driving"] for opts in legs]
            c = sum(l.cost for l in drive)
            if best is None or c < best[0] - 1e-9:
                best = (c, drive)
        return best

    # accommodation
    def hotel(self, city: str, nights: int) -> tuple[float, Hotel] | None:
        key = (city, nights)
        if key not in self._hotels:
            best = None
            for h in self.ix.hotels.in_city(city):
                if not self.hotel_ok(h) or h.min_nights > nights:
                    continue
                c = h.price * math.ceil(self.p / h.max_occupancy) * nights
                if best is None or (c, h.name) < (best[0], best[1].name):
                    best = (c, h)
            self._hotels[key] = best
        return self._hotels[key]

    # meals
    def restaurants(self, city: str) -> tuple[list[Restaurant], list[float]]:
        if city not in self._rest:
            rs = sorted(self.ix.restaurants.in_city(city), key=lambda r: (r.cost, r.name))
            prefix = [0.0]
            for r in rs:
                prefix.append(prefix[-1] + r.cost * self.p)
            self._rest[city] = (rs, prefix)
        return self._rest[city]

    def city_meals(self, city: str, mask: int, n: int) -> tuple[float, tuple[Restaurant, ...]] | None:
        """Cheapest n distinct restaurants of the city serving every cuisine in ``mask``."""
        key = (city, mask, n)
        if key in self._meal:
            return self._meal[key]
        rs, prefix = self.restaurants(city)
        result = None
        if n <= len(rs):
            if mask == 0:
                result = (prefix[n], tuple(rs[:n]))
            else:
                n_wanted = bin(mask).count("1")
                best_cost, best_set = INF, None
                for cover in self._covers(city, mask):
                    if len(cover) > n:
                        continue
                    base = sum(r.cost for r in cover) * self.p
                    if base + prefix[max(0, n - n_wanted)] >= best_cost:
                        break  # covers come cheapest first: no later one can win
                    chosen = list(cover)
                    need = n - len(cover)
                    for r in rs:
                        if need == 0:
                            break
                        if r not in cover:
                            chosen.append(r)
                            need -= 1
                    c = sum(r.cost for r in chosen) * self.p
                    if c < best_cost - 1e-9:
                        best_cost, best_set = c, tuple(chosen)
                if best_set is not None:
                    result = (best_cost, best_set)
        self._meal[key] = result
        return result

    def _covers(self, city: str, mask: int) -> list[tuple[Restaurant, ...]]:
        key = ("covers", city, mask)
        if key not in self._meal:
            rs, _ = self.restaurants(city)
            lists = []
            for i, c in enumerate(self.cuisines):
                if mask >> i & 1:
                    lists.append([r for r in rs if c in r.cuisines])
            covers = set()
            if all(lists):
                for pick in itertools.product(*lists):
                    covers.add(tuple(sorted(set(pick), key=lambda r: (r.cost, r.name))))
            self._meal[key] = sorted(covers, key=lambda t: (sum(r.cost for r in t), [r.name for r in t]))
        return self._meal[key]

    def mask_coverable(self, city: str) -> int:
        rs, _ = self.restaurants(city)
        m = 0
        for i, c in enumerate(self.cuisines):
            if any(c in r.cuisines for r in rs):
                m |= 1 << i
        return m

    # route evaluation
    def _stay(self, cities, pat):
        nights = [pat[j + 1] - pat[j] for j in range(len(cities))]
        full = [n - 1 for n in nights]
        return nights, full

    def lower_bound(self, cities: tuple[str, ...], pat: tuple[int, ...]) -> float:
        stops = [self.q.org, *cities, self.q.org]
        tr = self.transport(stops, pat)
        if tr is None:
            return INF
        nights, full = self._stay(cities, pat)
        total = tr[0]
        for city, n, f in zip(cities, nights, full):
            h = self.hotel(city, n)
            if h is None or len(self.ix.attractions.in_city(city)) < f:
                return INF
            rs, prefix = self.restaurants(city)
            if 3 * f > len(rs):
                return INF
            total += h[0] + prefix[3 * f]
        if self.cuisines:
            full_mask = (1 << len(self.cuisines)) - 1
            got = 0
            for city in cities:
                got |= self.mask_coverable(city)
            if got != full_mask:
                return INF
        return total

    def exact(self, cities: tuple[str, ...], pat: tuple[int, ...]):
        stops = [self.q.org, *cities, self.q.org]
        tr = self.transport(stops, pat)
        if tr is None:
            return None
        nights, full = self._stay(cities, pat)
        hotels = []
        total = tr[0]
        for city, n in zip(cities, nights):
            h = self.hotel(city, n)
            if h is None:
                return None
            hotels.append(h[1])
            total += h[0]
        meals = self.meal_dp(cities, full)
        if meals is None:
            return None
        total += meals[0]
        return total, (tr[1], hotels, meals[1])

    def meal_dp(self, cities, full):
        """Min meal cost over cities: returns (cost, [(restaurants, a_j, b_j) per city]) where a_j /
        b_j meals go to the arrival / departure travel day."""
        ncu = len(self.cuisines)
        full_mask = (1 << ncu) - 1
        max_extra = ncu  # more than one extra meal per wanted cuisine never helps
        # state: (mask, b_prev) -> (cost, choices)
        states: dict[tuple[int, int], tuple[float, list]] = {(0, 0): (0.0, [])}
        for j, city in enumerate(cities):
            req = 3 * full[j]
            nxt: dict[tuple[int, int], tuple[float, list]] = {}
            cov = self.mask_coverable(city) if ncu else 0
            sub_masks = [m for m in range(full_mask + 1) if m & ~cov == 0]
            for (mask, b_prev), (cost, choices) in states.items():
                for a in range(0, min(3 - b_prev, max_extra) + 1):
                    for b in range(0, min(3, max_extra - a) + 1):
                        for m in sub_masks:
                            if m & mask and m != 0 and (m & ~mask) == 0:
                                continue  # covering only already-covered cuisines never helps
                            r = self.city_meals(city, m, req + a + b)
                            if r is None:
                                continue
                            key = (mask | m, b)
                            c = cost + r[0]
                            if key not in nxt or c < nxt[key][0] - 1e-9:
                                nxt[key] = (c, choices + [(r[1], a, b)])
            states = nxt
        best = None
        for (mask, _b), (cost, choices) in states.items():
            if mask == full_mask and (best is None or cost < best[0] - 1e-9):
                best = (cost, choices)
        return best

    # plan assembly
    def build_plan(self, cities, pat, detail, per_day: int) -> tuple[Plan, list[Leg]]:
        legs, hotels, meal_choices = detail
        q = self.q
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
                attrs = self.ix.attractions.in_city(city)
                start = used_attr.get(city, 0)
                # leave enough attractions for the remaining full days in this city
                remaining_days = pat[j + 1] - d - 1
                take = max(1, min(per_day, len(attrs) - start - remaining_days))
                chosen = [entity(x.name, city) for x in attrs[start:start + take]]
                used_attr[city] = start + take
                bl, lu, di = full_meals[d]
                plan.append(make_day(d, city, "-", bl, attractions_text(chosen), lu, di, entity(hotels[j].name, city)))
        return plan, legs


# ------------------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> None:
    from envs.travel.evaluator import TravelEvaluator, summarize
    from envs.travel.queries import default_queries
    from envs.travel.split import SPLITS, load_split

    ap = argparse.ArgumentParser(description="Solve every query exactly and evaluate the plans.")
    ap.add_argument("--split", default="all", choices=("all", *SPLITS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    index, queries = default_queries(args.seed)
    if args.split != "all":
        ids = set(load_split(seed=args.seed)[args.split])
        queries = [q for q in queries if q.id in ids]
    if args.limit:
        queries = queries[: args.limit]
    t1 = time.perf_counter()
    solver = TravelSolver(index)
    results = [solver.solve(q) for q in queries]
    t2 = time.perf_counter()
    strict = TravelEvaluator(index)
    quirks = TravelEvaluator(index, official_quirks=True)
    evs = [strict.evaluate(q, r.plan if r else "") for q, r in zip(queries, results)]
    evq = [quirks.evaluate(q, r.plan if r else "") for q, r in zip(queries, results)]
    s, sq = summarize(queries, evs), summarize(queries, evq)
    slack = [q.budget / r.cost for q, r in zip(queries, results) if r]
    print(f"database + {len(queries)} queries built in {t1 - t0:.2f} s; solved in {t2 - t1:.2f} s "
          f"({1000 * (t2 - t1) / max(1, len(queries)):.1f} ms/query)")
    print("metric            strict  official")
    for k in ("delivery_rate", "commonsense_micro", "commonsense_macro", "hard_micro", "hard_macro", "final_pass"):
        print(f"{k:<17} {s[k]:.3f}   {sq[k]:.3f}")
    if slack:
        print(f"budget / optimal cost: min {min(slack):.2f}, median {sorted(slack)[len(slack) // 2]:.2f}, max {max(slack):.2f}")
    bad = [e for e in evs if not e.final_pass]
    for e in bad[:5]:
        print(f"query {e.query_id} fails: {e.violations()}")
    print(f"solver final pass rate: {s['final_pass']:.3f} on {len(queries)} queries")


if __name__ == "__main__":
    main()
