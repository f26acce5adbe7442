"""The route part of the travel solver's cost (see ``solver.py``): for a query, the cheapest
transport of a route (per-leg min(flight, taxi) or all self-driving, under the transportation
rule), the cheapest valid single hotel per stay, a route's lower bound and its exact cost (meals:
``meal_costs.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from envs.travel.index import Hotel, SandboxIndex
from envs.travel.meal_costs import INF, MealCosts
from envs.travel.query import TravelQuery
from envs.travel.schema import HOUSE_RULE_TEXT, ROOM_TYPE_OK, SELF_DRIVING_PER_CAR, TAXI_PER_CAR
from envs.travel.text import flight_text, ground_text


@dataclass
class Leg:
    origin: str
    dest: str
    date: str
    mode: str  # "flight" | "taxi" | "self-driving"
    cost: float
    text: str


class RouteCosts:
    """Per-query memo tables: leg options, hotel costs and the meal costs (:class:`MealCosts`)."""

    def __init__(self, index: SandboxIndex, q: TravelQuery):
        self.ix = index
        self.q = q
        self.p = q.people_number
        lc = q.local_constraint
        self.no_flight = lc.get("transportation") == "no flight"
        self.no_driving = lc.get("transportation") == "no self-driving"
        banned = HOUSE_RULE_TEXT.get(lc.get("house rule")) if lc.get("house rule") else None
        room_ok = ROOM_TYPE_OK.get(lc.get("room type"), lambda t: True)
        self.hotel_ok = lambda h: room_ok(h.room_type) and not (banned and banned in h.house_rules)
        self._legs: dict = {}
        self._hotels: dict = {}
        self.cuisines: tuple[str, ...] = tuple(dict.fromkeys(lc.get("cuisine") or ()))
        self.meals = MealCosts(index, self.p, self.cuisines)

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
            air.append(min(cands, key=lambda leg: (leg.cost, leg.mode)))
        if air is not None:
            best = (sum(leg.cost for leg in air), air)
        if all("self-driving" in opts for opts in legs):
            drive = [opts["self-driving"] for opts in legs]
            c = sum(leg.cost for leg in drive)
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
            rs, prefix = self.meals.restaurants(city)
            if 3 * f > len(rs):
                return INF
            total += h[0] + prefix[3 * f]
        if self.cuisines:
            full_mask = (1 << len(self.cuisines)) - 1
            got = 0
            for city in cities:
                got |= self.meals.mask_coverable(city)
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
        meals = self.meals.meal_dp(cities, full)
        if meals is None:
            return None
        total += meals[0]
        return total, (tr[1], hotels, meals[1])
