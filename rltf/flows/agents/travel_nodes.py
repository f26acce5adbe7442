"""Travel building blocks shared by the flows on the sandbox (MTP, OKR-Agent, ReAct, flat).

Everything an agent of a flow looks up goes through the sandbox's own search tools
(:attr:`envs.travel.env.TravelPlannerEnv.tools`), never through the evaluator or the solver:

* :class:`Catalog` -- one query's tool results as :class:`Option` s: the exact plan string an
  option writes (``"Name, City"``, ``"Flight Number: F..., from A to B, ..."``), what it costs
  the party under the official cost rules (flights and meals per person, self-driving per car of
  5, taxis per car of 4, rooms per night x ceil(people / maximum occupancy)) and what the
  prompts show about it (price, cuisines, room type, house rules, minimum nights);
* :class:`Route` -- a decomposition of the trip into cities and the days the traveller moves:
  its legs (transport), stays (accommodation) and full days (meals, attractions), and every
  day's ``current_city``; :func:`city_orders` / :func:`schedules` list the routes the sandbox
  allows for a query (each leg has transport that day, each city hotels, restaurants and
  attractions enough), :func:`families` the transport-mode families that fit a route;
* local-constraint checks of single options (:func:`hotel_problems`,
  :func:`transport_problems`), :func:`assemble` (cells -> the official JSON plan) and
  :func:`plan_cost` (the budget's arithmetic on tool prices).

The texts prompts show are plain ASCII: the embedded planner's tokenizer knows printable ASCII only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.travel.hard_rules import ROOM_TYPE_OK
from envs.travel.plans import Plan, make_day
from envs.travel.query import TravelQuery
from envs.travel.schema import (
    HOUSE_RULE_TEXT,
    MEALS,
    SELF_DRIVING_PER_CAR,
    TAXI_PER_CAR,
)
from envs.travel.text import attractions_text, entity, flight_text, ground_text

__all__ = ["FAMILIES", "Catalog", "Option", "Route", "assemble", "city_orders", "constraints_text", "families",
           "hotel_problems", "option_lines", "plan_cost", "route_text", "schedule_text", "schedules",
           "transport_problems"]

FAMILIES: dict[str, frozenset[str]] = {"flights and taxis": frozenset({"Flight", "Taxi"}),
                                       "self-driving": frozenset({"Self-driving"})}
"""Transport-mode families a whole trip may use without a conflict (no self-driving with flights or taxis)."""


# ----------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class Option:
    """One tool result as a plan value. ``cost``: what choosing it costs the party (a stay: per night)."""

    kind: str  # restaurant | hotel | attraction | flight | self-driving | taxi
    text: str  # the exact plan string
    cost: float = 0.0
    note: str = ""  # what a prompt shows after the text
    city: str = ""
    mode: str | None = None  # Flight | Self-driving | Taxi
    cuisines: tuple[str, ...] = ()
    room_type: str = ""
    house_rules: str = ""
    min_nights: float = 0.0

    def line(self) -> str:
        return f"- {self.text}" + (f" ({self.note})" if self.note else "")

    def as_dict(self) -> dict[str, Any]:
        d = {"text": self.text, "cost": self.cost}
        if self.mode:
            d["mode"] = self.mode
        if self.cuisines:
            d["cuisines"] = list(self.cuisines)
        return d


def option_lines(options: Sequence[Option]) -> str:
    return "\n".join(o.line() for o in options)


def _money(x: float) -> str:
    return f"${int(x)}" if float(x).is_integer() else f"${x:.2f}"


class Catalog:
    """One query's view of the sandbox through its search tools (results cached per call)."""

    def __init__(self, env, query: int | str | TravelQuery):
        self.env = env
        self.q: TravelQuery = env.get_query(query)
        self.tools = env.tools
        self.candidates = env.candidates(self.q)
        self._cache: dict[tuple, list[Option]] = {}
        self.by_text: dict[str, Option] = {}
        self.calls: list[str] = []  # the tool invocations made, in order (ReAct-style text)

    @property
    def people(self) -> int:
        return self.q.people_number

    def _remember(self, key: tuple, call: str, options: list[Option]) -> list[Option]:
        self._cache[key] = options
        self.calls.append(call)
        for o in options:
            self.by_text.setdefault(o.text, o)
        return options

    def restaurants(self, city: str) -> list[Option]:
        key = ("restaurants", city)
        if key in self._cache:
            return self._cache[key]
        df = self.tools.restaurants(city)
        out = []
        for name, cost, cuisines in zip(df["Name"].tolist(), df["Average Cost"].tolist(), df["Cuisines"].tolist()):
            cu = tuple(c.strip() for c in str(cuisines).split(",") if c.strip())
            out.append(Option("restaurant", entity(str(name), city), float(cost) * self.people,
                              f"{_money(float(cost))} per person, {', '.join(cu)}", city, cuisines=cu))
        return self._remember(key, f"RestaurantSearch[{city}]", out)

    def hotels(self, city: str) -> list[Option]:
        key = ("hotels", city)
        if key in self._cache:
            return self._cache[key]
        df = self.tools.accommodations(city)
        out = []
        for name, price, rtype, rules, nights, occ in zip(
                df["NAME"].tolist(), df["price"].tolist(), df["room type"].tolist(), df["house_rules"].tolist(),
                df["minimum nights"].tolist(), df["maximum occupancy"].tolist()):
            per_night = float(price) * math.ceil(self.people / max(1, int(occ)))
            note = (f"{_money(float(price))} per night for {int(occ)}, {rtype}, {rules}, "
                    f"minimum {int(float(nights))} nights")
            out.append(Option("hotel", entity(str(name), city), per_night, note, city, room_type=str(rtype),
                              house_rules=str(rules), min_nights=float(nights)))
        return self._remember(key, f"AccommodationSearch[{city}]", out)

    def attractions(self, city: str) -> list[Option]:
        key = ("attractions", city)
        if key in self._cache:
            return self._cache[key]
        df = self.tools.attractions(city)
        out = [Option("attraction", entity(str(n), city), 0.0, "", city) for n in df["Name"].tolist()]
        return self._remember(key, f"AttractionSearch[{city}]", out)

    def transport(self, a: str, b: str, day: int) -> list[Option]:
        """Flights on day ``day`` (1-based) and the drives (self-driving, taxi) from ``a`` to ``b``."""
        key = ("transport", a, b, day)
        if key in self._cache:
            return self._cache[key]
        date = self.q.date[day - 1]
        df = self.tools.flights(a, b, date)
        out = []
        for no, price, dep, arr in zip(df["Flight Number"].tolist(), df["Price"].tolist(), df["DepTime"].tolist(),
                                       df["ArrTime"].tolist()):
            out.append(Option("flight", flight_text(str(no), a, b, str(dep), str(arr)), float(price) * self.people,
                              f"{_money(float(price))} per person", b, mode="Flight"))
        for mode, per_car, label in (("self-driving", SELF_DRIVING_PER_CAR, "Self-driving"),
                                     ("taxi", TAXI_PER_CAR, "Taxi")):
            r = self.tools.distance(a, b, mode)
            if r["cost"] is None:
                continue
            cars = math.ceil(self.people / per_car)
            out.append(Option(mode, ground_text(mode, a, b, r["duration"], r["distance"], r["cost"]),
                              float(r["cost"]) * cars, f"{_money(float(r['cost']))} per car, {cars} car(s)", b,
                              mode=label))
        self.calls.append(f"FlightSearch[{a}, {b}, {date}]")
        return self._remember(key, f"GoogleDistanceMatrix[{a}, {b}, self-driving|taxi]", out)

    def lookup(self, text: str) -> Option | None:
        return self.by_text.get(text)


# ------------------------------------------------------------------------------------ routes
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

    def stay_of(self, day: int) -> int | None:
        """The stay (from 1) whose accommodation day ``day`` uses (None: the last day)."""
        for j, c, first, n in self.stays():
            if first <= day < first + n:
                return j
        return None


def route_text(cities: Sequence[str]) -> str:
    return ", then ".join(cities)


def schedule_text(route: Route) -> str:
    return "; ".join(f"{c} days {first}-{first + n}" for _, c, first, n in route.stays())


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
    distinct days in between and on the last day."""
    q, k = cat.q, len(cities)
    out = []
    for inner in itertools.combinations(range(2, q.days), k - 1):
        r = Route(q.org, tuple(cities), (1, *inner, q.days), q.days)
        if _fits(cat, r):
            out.append(r)
    return out


def city_orders(cat: Catalog) -> list[tuple[str, ...]]:
    """The ordered city choices of the query (``visiting_city_number`` distinct cities of its
    destination) with at least one route the sandbox allows."""
    c, q = cat.candidates, cat.q
    return [cities for cities in itertools.permutations(c.route_cities, q.visiting_city_number)
            if schedules(cat, cities)]


def families(cat: Catalog, route: Route) -> list[str]:
    """The transport families (:data:`FAMILIES`) the query's transportation rule allows and every
    leg of ``route`` can use."""
    out = []
    for name in FAMILIES:
        ok = all(any(not transport_problems(o, cat.q, name) for o in cat.transport(a, b, d))
                 for _, d, a, b in route.legs())
        if ok:
            out.append(name)
    return out


# ------------------------------------------------------------------------- local constraints
def transport_problems(o: Option, q: TravelQuery, family: str | None = None) -> list[str]:
    """Why ``o`` breaks the query's transportation rule or the trip's transport family."""
    out = []
    rule = q.local_constraint.get("transportation")
    if rule == "no flight" and o.mode == "Flight":
        out.append("the query rules out flights")
    if rule == "no self-driving" and o.mode == "Self-driving":
        out.append("the query rules out self-driving")
    if family is not None and o.mode not in FAMILIES[family]:
        out.append(f"the trip uses {family} only")
    return out


def hotel_problems(o: Option, q: TravelQuery, nights: int | None = None) -> list[str]:
    """Why ``o`` breaks the query's room type or house rule, or the stay's minimum nights."""
    out = []
    want = q.local_constraint.get("room type")
    if want and not ROOM_TYPE_OK[want](o.room_type):
        out.append(f"room type must be {want}, it is {o.room_type}")
    rule = q.local_constraint.get("house rule")
    if rule and HOUSE_RULE_TEXT[rule] in o.house_rules:
        out.append(f"{rule} must be allowed, it says {o.house_rules}")
    if nights is not None and o.min_nights > nights:
        out.append(f"minimum {int(o.min_nights)} nights, the stay has {nights}")
    return out


def constraints_text(q: TravelQuery) -> str:
    lc = q.local_constraint
    parts = [f"budget {_money(q.budget)} for {q.people_number} people"]
    if lc.get("house rule"):
        parts.append(f"house rule: {lc['house rule']} allowed")
    if lc.get("room type"):
        parts.append(f"room type: {lc['room type']}")
    if lc.get("cuisine"):
        parts.append(f"cuisines: {', '.join(lc['cuisine'])}")
    if lc.get("transportation"):
        parts.append(f"transportation: {lc['transportation']}")
    return "; ".join(parts)


# ------------------------------------------------------------------------------------ plans
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


def plan_cost(cat: Catalog, plan: Plan) -> float:
    """What ``plan`` costs the party by the tool prices (the official cost rules); unknown entries cost 0."""
    total = 0.0
    for day in plan:
        for f in ("transportation", *MEALS, "accommodation"):
            o = cat.lookup(str(day.get(f, "-")))
            if o is not None:
                total += o.cost
    return total


def covered_cuisines(cat: Catalog, texts: Iterable[str]) -> set[str]:
    """The query's wanted cuisines served by the restaurants ``texts`` outside the origin."""
    wanted = set(cat.q.local_constraint.get("cuisine") or ())
    got: set[str] = set()
    for t in texts:
        o = cat.lookup(t)
        if o is not None and o.kind == "restaurant" and o.city != cat.q.org:
            got |= wanted & set(o.cuisines)
    return got


def attraction_text(options: Sequence[Option]) -> str:
    return attractions_text([o.text for o in options])


@dataclass
class FlowRun:
    """What one flow did for one query: its plan (the official JSON, or None when it delivered
    none), the pass (trace, usage, per-node completions) and why it failed, if it did."""

    plan: Plan | None
    result: Any = None  # rltf.flows.engine.flow.PassResult
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
