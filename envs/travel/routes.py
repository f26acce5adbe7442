"""Decompositions of a trip: the cities in order and the days the traveller moves.

A :class:`Route` gives the trip's legs (transport), stays (accommodation) and full days (meals,
attractions) and every day's ``current_city``; :func:`city_orders` / :func:`schedules` list the
routes the sandbox allows for a query (each leg has transport that day, each city a stay meeting
the local constraints and restaurants / attractions enough), :func:`families` the transport
families that fit a route, and :func:`assemble` writes a route's chosen cells as the official JSON plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envs.travel.catalog import Catalog
from envs.travel.local_checks import FAMILIES, hotel_problems, transport_problems
from envs.travel.plans import Plan, make_day

__all__ = ["Cell", "Route", "assemble", "city_orders", "families", "schedules"]


@dataclass(frozen=True)
class Route:
    """The trip's cities in order and the days the traveller moves (``moves[0] == 1``: leave the
    origin on day 1; ``moves[-1] == days``: return on the last day)."""

    org: str
    cities: tuple[str, ...]
    moves: tuple[int, ...]
    days: int

    @property
    def stops(self) -> tuple[str, ...]:
        return (self.org, *self.cities, self.org)

    def current_city(self, day: int) -> str:
        if day in self.moves:
            j = self.moves.index(day)
            return f"from {self.stops[j]} to {self.stops[j + 1]}"
        j = max(i for i, t in enumerate(self.moves) if t < day)
        return self.cities[j]

    @property
    def current_cities(self) -> tuple[str, ...]:
        return tuple(self.current_city(d) for d in range(1, self.days + 1))

    def legs(self) -> list[tuple[int, int, str, str]]:
        """``(leg number from 1, day, from, to)``."""
        s = self.stops
        return [(j + 1, d, s[j], s[j + 1]) for j, d in enumerate(self.moves)]

    def stays(self) -> list[tuple[int, str, int, int]]:
        """``(stay number from 1, city, arrival day, nights)``: the accommodation of days
        ``arrival .. arrival + nights - 1``."""
        return [(j + 1, c, self.moves[j], self.moves[j + 1] - self.moves[j]) for j, c in enumerate(self.cities)]

    def full_days(self) -> list[tuple[int, str]]:
        """``(day, city)`` of the days spent in one city (meals and attractions required)."""
        return [(d, self.current_city(d)) for d in range(1, self.days + 1) if d not in self.moves]


def _fits(cat: Catalog, route: Route) -> bool:
    """Every leg has transport that day (in a family the query allows); every city a stay meeting
    the query's room type, house rule and the stay's nights, and restaurants / attractions enough
    for its full days."""
    for _, day, a, b in route.legs():
        if not cat.transport(a, b, day):
            return False
    full: dict[str, int] = {}
    for _, c in route.full_days():
        full[c] = full.get(c, 0) + 1
    for _, c, _, nights in route.stays():
        if not any(not hotel_problems(o, cat.q, nights) for o in cat.hotels(c)):
            return False  # no stay meets the room type, house rule and minimum nights
        if len(cat.restaurants(c)) < 3 * full.get(c, 0) or len(cat.attractions(c)) < full.get(c, 0):
            return False
    return bool(families(cat, route))


def schedules(cat: Catalog, cities: Sequence[str]) -> list[Route]:
    """The routes through ``cities`` (in this order) the sandbox allows: moves on day 1, on
    distinct days in between and on the last day (computed once per query: :meth:`Catalog.derived`)."""
    cities = tuple(cities)
    return list(cat.derived(("routes.schedules", cities), lambda: tuple(_schedules(cat, cities))))


def _schedules(cat: Catalog, cities: tuple[str, ...]) -> list[Route]:
    q, k = cat.q, len(cities)
    out = []
    for inner in itertools.combinations(range(2, q.days), k - 1):
        r = Route(q.org, cities, (1, *inner, q.days), q.days)
        if _fits(cat, r):
            out.append(r)
    return out


def city_orders(cat: Catalog) -> list[tuple[str, ...]]:
    """The ordered city choices of the query (``visiting_city_number`` distinct cities of its
    destination) with at least one route the sandbox allows."""
    c, q = cat.candidates, cat.q
    return list(cat.derived("routes.city_orders", lambda: tuple(
        cities for cities in itertools.permutations(c.route_cities, q.visiting_city_number)
        if schedules(cat, cities))))


def families(cat: Catalog, route: Route) -> list[str]:
    """The transport families (:data:`~envs.travel.local_checks.FAMILIES`) the query's
    transportation rule allows and every leg of ``route`` can use."""
    return list(cat.derived(("routes.families", route), lambda: tuple(_families(cat, route))))


def _families(cat: Catalog, route: Route) -> list[str]:
    out = []
    for name in FAMILIES:
        ok = all(any(not transport_problems(o, cat.q, name) for o in cat.transport(a, b, d))
                 for _, d, a, b in route.legs())
        if ok:
            out.append(name)
    return out


Cell = tuple[int, str]  # (day, field)


def assemble(route: Route, cells: Mapping[Cell, str]) -> Plan:
    """The official JSON plan of ``route`` with the chosen ``cells`` (``(day, field) -> text``);
    every other field is ``-``."""
    plan = []
    for d in range(1, route.days + 1):
        v = {f: cells.get((d, f), "-") or "-" for f in ("transportation", "breakfast", "attraction", "lunch",
                                                        "dinner", "accommodation")}
        plan.append(make_day(d, route.current_city(d), v["transportation"], v["breakfast"], v["attraction"],
                             v["lunch"], v["dinner"], v["accommodation"]))
    return plan
