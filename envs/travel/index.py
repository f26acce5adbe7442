"""Dict indexes over a :class:`~envs.travel.sandbox.SandboxDB`, shared by the evaluator, the
solver, the search tools and the per-query candidate lists.

Lookups come in two flavours:

* ``get(name, city)``: the entity the name means (the default evaluator's rule): the first row of
  ``city`` (in table order) whose name equals ``name`` up to surrounding / repeated whitespace and
  Unicode normal form (:func:`~envs.travel.text.name_key`), so the real tables' names that end in a
  space or hold a newline are found by what a plan writes;
* ``find(name, city)``: the official evaluator's rule -- the *first* row of ``city`` (in table
  order) whose name *contains* ``name``, and how many rows do (``str.contains`` on the column) --
  memoised, so repeated plans cost one dict hit per entity instead of a DataFrame scan.

``in_city(city)`` lists one entity per plan string: the real tables repeat names within a city
(about 50 restaurants, 13 attractions, one accommodation), and rows with the same name write the
same ``"Name, City"``, which the evaluator reads as the first of them. Everything that offers
entities to a planner (the solver, the grammar's candidates, the simple planners) goes through it,
so a duplicate is one option, priced as the evaluator prices it. ``by_city`` keeps every row (what
the official lookup scans).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

import numpy as np

from envs.travel.sandbox import SandboxDB, default_database
from envs.travel.text import name_key


@dataclass(frozen=True)
class Restaurant:
    name: str
    city: str
    cost: float
    cuisines: str
    rating: float


@dataclass(frozen=True)
class Hotel:
    name: str
    city: str
    price: float
    room_type: str
    house_rules: str
    min_nights: float
    max_occupancy: int
    review: float


@dataclass(frozen=True)
class Attraction:
    name: str
    city: str
    address: str


@dataclass(frozen=True)
class Flight:
    number: str
    price: float
    dep_time: str
    arr_time: str
    elapsed: str
    date: str
    origin: str
    dest: str
    distance: float


@dataclass(frozen=True)
class Road:
    """One row of the distance matrix; costs as the official ``run_for_evaluation`` derives them
    (None when the row has no duration/distance, a distance that is no finite number of km from 0,
    or the drive takes a day or more)."""

    origin: str
    dest: str
    duration: str | None
    distance: str | None
    km: float | None
    self_driving_cost: int | None
    taxi_cost: int | None

    def cost(self, mode: str) -> int | None:
        return self.self_driving_cost if mode == "self-driving" else self.taxi_cost


def _road(origin: str, dest: str, duration, distance) -> Road:
    bad = lambda v: v is None or (isinstance(v, float) and np.isnan(v))  # noqa: E731
    if bad(duration) or bad(distance):
        return Road(origin, dest, None, None, None, None, None)
    duration, distance = str(duration), str(distance)
    try:
        km = float(distance.replace("km", "").replace(",", "").strip())
    except ValueError:
        km = None
    if km is None or not 0 <= km < 1e15:  # NaN, infinite, negative: no distance to cost (int() would fail)
        return Road(origin, dest, duration, distance, None, None, None)
    if "day" in duration:
        return Road(origin, dest, duration, distance, km, None, None)
    return Road(origin, dest, duration, distance, km, int(km * 0.05), int(km))


T = TypeVar("T")


class NameTable(Generic[T]):
    """Entities of one table with a ``name`` and a ``city``, in table order (``by_city``: every
    row; ``in_city``: the first row of each name, see the module docstring)."""

    def __init__(self, items: list[T], cache_limit: int = 200_000):
        self.items = items
        self.by_city: dict[str, list[T]] = {}
        self.distinct: dict[str, list[T]] = {}
        self.named: dict[tuple[str, str], T] = {}  # (name_key(name), city) -> its first row
        for it in items:
            self.by_city.setdefault(it.city, []).append(it)  # type: ignore[attr-defined]
            key = (name_key(it.name), it.city)  # type: ignore[attr-defined]
            if key not in self.named:
                self.named[key] = it
                self.distinct.setdefault(it.city, []).append(it)  # type: ignore[attr-defined]
        self._found: dict[tuple[str, str], tuple[T | None, int]] = {}
        self._limit = cache_limit

    def get(self, name: str, city: str) -> T | None:
        """The first row of ``city`` named ``name`` (up to whitespace and Unicode normal form)."""
        hit = self.named.get((name, city))  # a name already in normal form (the usual case) is its own key
        return hit if hit is not None else self.named.get((name_key(name), city))

    def find(self, name: str, city: str) -> tuple[T | None, int]:
        key = (name, city)
        hit = self._found.get(key)
        if hit is not None:
            return hit
        first, count = None, 0
        for it in self.by_city.get(city, ()):
            if name in it.name:  # type: ignore[attr-defined]
                count += 1
                if first is None:
                    first = it
        if len(self._found) >= self._limit:
            self._found.clear()
        self._found[key] = (first, count)
        return first, count

    def in_city(self, city: str) -> list[T]:
        """The city's entities, one per name (its first row), in table order."""
        return self.distinct.get(city, [])

    def duplicates(self, city: str) -> int:
        """How many rows of ``city`` repeat an earlier row's name."""
        return len(self.by_city.get(city, ())) - len(self.distinct.get(city, ()))


class SandboxIndex:
    """All lookups the evaluator, solver and tools need, built once per database."""

    def __init__(self, db: SandboxDB):
        self.db = db
        self.city_state: dict[str, str] = dict(db.cities)
        self.states: dict[str, list[str]] = db.states()
        r = db.restaurants
        self.restaurants: NameTable[Restaurant] = NameTable([
            Restaurant(str(n), str(c), float(v), str(cu), float(ra))
            for n, v, cu, ra, c in zip(r["Name"].tolist(), r["Average Cost"].tolist(), r["Cuisines"].tolist(),
                                       r["Aggregate Rating"].tolist(), r["City"].tolist())
        ])
        h = db.accommodations
        self.hotels: NameTable[Hotel] = NameTable([
            Hotel(str(n), str(c), float(p), str(rt), str(hr), float(mn), int(oc), float(rv))
            for n, p, rt, hr, mn, oc, rv, c in zip(
                h["NAME"].tolist(), h["price"].tolist(), h["room type"].tolist(), h["house_rules"].tolist(),
                h["minimum nights"].tolist(), h["maximum occupancy"].tolist(), h["review rate number"].tolist(),
                h["city"].tolist())
        ])
        a = db.attractions
        self.attractions: NameTable[Attraction] = NameTable([
            Attraction(str(n), str(c), str(ad))
            for n, ad, c in zip(a["Name"].tolist(), a["Address"].tolist(), a["City"].tolist())
        ])
        f = db.flights
        self.flights: list[Flight] = [
            Flight(str(no), float(p), str(d), str(ar), str(el), str(dt), str(o), str(de), float(di))
            for no, p, d, ar, el, dt, o, de, di in zip(
                f["Flight Number"].tolist(), f["Price"].tolist(), f["DepTime"].tolist(), f["ArrTime"].tolist(),
                f["ActualElapsedTime"].tolist(), f["FlightDate"].tolist(), f["OriginCityName"].tolist(),
                f["DestCityName"].tolist(), f["Distance"].tolist())
        ]
        self.flight_by_number: dict[str, Flight] = {}
        # (number, origin, dest) -> the dates that flight number flies that leg
        self.flight_keys: dict[tuple[str, str, str], set[str]] = {}
        self.flights_on: dict[tuple[str, str, str], list[Flight]] = {}
        for fl in self.flights:
            self.flight_by_number.setdefault(fl.number, fl)
            self.flight_keys.setdefault((fl.number, fl.origin, fl.dest), set()).add(fl.date)
            self.flights_on.setdefault((fl.origin, fl.dest, fl.date), []).append(fl)
        for legs in self.flights_on.values():
            legs.sort(key=lambda x: (x.price, x.dep_time, x.number))
        d = db.distances
        self.roads: dict[tuple[str, str], Road] = {}
        for o, de, du, di in zip(d["origin"].tolist(), d["destination"].tolist(), d["duration"].tolist(),
                                 d["distance"].tolist()):
            self.roads.setdefault((str(o), str(de)), _road(str(o), str(de), du, di))

    def road(self, origin: str, dest: str) -> Road | None:
        return self.roads.get((origin, dest))

    def road_cost(self, origin: str, dest: str, mode: str) -> int | None:
        r = self.roads.get((origin, dest))
        return None if r is None else r.cost(mode)

    def cheapest_flight(self, origin: str, dest: str, date: str) -> Flight | None:
        legs = self.flights_on.get((origin, dest, date))
        return legs[0] if legs else None

    def flights_between(self, origin: str, dest: str, date: str) -> list[Flight]:
        return self.flights_on.get((origin, dest, date), [])


@lru_cache(maxsize=4)
def default_index(seed: int = 0) -> SandboxIndex:
    return SandboxIndex(default_database(seed))
