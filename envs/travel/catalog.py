"""One query's view of the sandbox through its search tools: every tool result as a priced
:class:`Option`.

An option holds the exact plan string it writes (``"Name, City"``, ``"Flight Number: F..., from
A to B, ..."``), what it costs the party under the official cost rules (flights and meals per
person, self-driving per car of 5, taxis per car of 4, rooms per night x ceil(people / maximum
occupancy)) and what a prompt shows about it (price, cuisines, room type, house rules, minimum
nights). The agent flows (``rltf.flows.agents``) look everything up here, never in the evaluator
or the solver. The texts are plain ASCII: the embedded planner's tokenizer knows printable ASCII only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envs.travel.query import TravelQuery
from envs.travel.schema import SELF_DRIVING_PER_CAR, TAXI_PER_CAR
from envs.travel.text import entity, flight_text, ground_text

__all__ = ["SKIP", "Catalog", "Option", "money"]


@dataclass(frozen=True)
class Option:
    """One tool result as a plan value. ``cost``: what choosing it costs the party (a stay: per night)."""

    kind: str  # restaurant | hotel | attraction | flight | self-driving | taxi | none
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


SKIP = Option("none", "-", 0.0, "skip this meal")
"""The ``-`` of an optional meal (a travel day's): it costs nothing and serves no cuisine."""


def money(x: float) -> str:
    """``$12`` for whole amounts, ``$12.50`` otherwise."""
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

    @property
    def people(self) -> int:
        return self.q.people_number

    def _cached(self, find: Callable[..., list[Option]], *args: Any) -> list[Option]:
        """``find(*args)``'s options, searched once; each option's text known to :meth:`lookup`."""
        key = (find.__name__, *args)
        if key not in self._cache:
            options = find(*args)
            self._cache[key] = options
            for o in options:
                self.by_text.setdefault(o.text, o)
        return self._cache[key]

    def restaurants(self, city: str) -> list[Option]:
        return self._cached(self._restaurants, city)

    def hotels(self, city: str) -> list[Option]:
        return self._cached(self._hotels, city)

    def attractions(self, city: str) -> list[Option]:
        return self._cached(self._attractions, city)

    def transport(self, a: str, b: str, day: int) -> list[Option]:
        """Flights on day ``day`` (1-based) and the drives (self-driving, taxi) from ``a`` to ``b``."""
        return self._cached(self._transport, a, b, day)

    def _restaurants(self, city: str) -> list[Option]:
        df = self.tools.restaurants(city)
        out = []
        for name, cost, cuisines in zip(df["Name"].tolist(), df["Average Cost"].tolist(), df["Cuisines"].tolist()):
            cu = tuple(c.strip() for c in str(cuisines).split(",") if c.strip())
            out.append(Option("restaurant", entity(str(name), city), float(cost) * self.people,
                              f"{money(float(cost))} per person, {', '.join(cu)}", city, cuisines=cu))
        return out

    def _hotels(self, city: str) -> list[Option]:
        df = self.tools.accommodations(city)
        out = []
        for name, price, rtype, rules, nights, occ in zip(
                df["NAME"].tolist(), df["price"].tolist(), df["room type"].tolist(), df["house_rules"].tolist(),
                df["minimum nights"].tolist(), df["maximum occupancy"].tolist()):
            per_night = float(price) * math.ceil(self.people / max(1, int(occ)))
            note = (f"{money(float(price))} per night for {int(occ)}, {rtype}, {rules}, "
                    f"minimum {int(float(nights))} nights")
            out.append(Option("hotel", entity(str(name), city), per_night, note, city, room_type=str(rtype),
                              house_rules=str(rules), min_nights=float(nights)))
        return out

    def _attractions(self, city: str) -> list[Option]:
        df = self.tools.attractions(city)
        return [Option("attraction", entity(str(n), city), 0.0, "", city) for n in df["Name"].tolist()]

    def _transport(self, a: str, b: str, day: int) -> list[Option]:
        df = self.tools.flights(a, b, self.q.date[day - 1])
        out = []
        for no, price, dep, arr in zip(df["Flight Number"].tolist(), df["Price"].tolist(), df["DepTime"].tolist(),
                                       df["ArrTime"].tolist()):
            out.append(Option("flight", flight_text(str(no), a, b, str(dep), str(arr)), float(price) * self.people,
                              f"{money(float(price))} per person", b, mode="Flight"))
        for mode, per_car, label in (("self-driving", SELF_DRIVING_PER_CAR, "Self-driving"),
                                     ("taxi", TAXI_PER_CAR, "Taxi")):
            r = self.tools.distance(a, b, mode)
            if r["cost"] is None:
                continue
            cars = math.ceil(self.people / per_car)
            out.append(Option(mode, ground_text(mode, a, b, r["duration"], r["distance"], r["cost"]),
                              float(r["cost"]) * cars, f"{money(float(r['cost']))} per car, {cars} car(s)", b,
                              mode=label))
        return out

    def results(self, kind: str, city: str, day: int, leg: tuple[str, str]) -> list[Option]:
        """The tool results for one plan item: a ``transport`` leg on ``day``, a ``stay`` / ``meal`` /
        ``attraction`` in ``city``."""
        if kind == "transport":
            return self.transport(leg[0], leg[1], day)
        if kind == "stay":
            return self.hotels(city)
        if kind == "meal":
            return self.restaurants(city)
        return self.attractions(city)

    def lookup(self, text: str) -> Option | None:
        return self.by_text.get(text)
