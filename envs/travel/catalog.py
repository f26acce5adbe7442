"""One query's view of the sandbox through its search tools: every tool result as a priced
:class:`Option`.

An option holds the exact plan string it writes (``"Name, City"``, ``"Flight Number: F..., from
A to B, ..."``), what it costs the party under the official cost rules (flights and meals per
person, self-driving per car of 5, taxis per car of 4, rooms per night x ceil(people / maximum
occupancy)) and what a prompt shows about it (price, cuisines, room type, house rules, minimum
nights). The agent flows (``rltf.flows.agents``) look everything up here, never in the evaluator
or the solver. The texts are plain ASCII: the embedded planner's tokenizer knows printable ASCII only.
A search lists each plan string once (the real tables repeat names within a city: the first row
of a name is the one the evaluator judges).

A :class:`Catalog` is one pass's view of its query; the views of one query may share a
:class:`QueryTables` (:func:`envs.travel.catalog_memo.shared_catalog`): every search is run once
per query and every :meth:`Catalog.derived` value (route options, cost bounds) computed once, while
each view keeps its own copies and its own :meth:`Catalog.lookup` table, filled in the order the
view itself would have searched (a derived value read from the tables replays the searches its
computation made), so a view behaves exactly as a lone catalog does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from envs.travel.query import TravelQuery
from envs.travel.schema import SELF_DRIVING_PER_CAR, TAXI_PER_CAR
from envs.travel.text import entity, flight_text, ground_text

__all__ = ["SKIP", "Catalog", "Option", "QueryTables", "money"]


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


def _one_per_text(options: list[Option]) -> tuple[Option, ...]:
    """The options, the first of each plan string: rows of the real tables that repeat a name in a
    city write the same ``"Name, City"``, which the evaluator reads as the first of them, so they
    are one option (priced as that row)."""
    seen: set[str] = set()
    return tuple(o for o in options if not (o.text in seen or seen.add(o.text)))


def money(x: float) -> str:
    """``$12`` for whole amounts, ``$12.50`` otherwise."""
    return f"${int(x)}" if float(x).is_integer() else f"${x:.2f}"


@dataclass
class QueryTables:
    """What the catalogs of one query share: each search's options (``results``, by search) and
    each derived value with the searches its computation made, in order (``derived``, by key).
    Both hold immutable values (tuples, frozen options): a view hands out copies."""

    results: dict[tuple, tuple[Option, ...]] = field(default_factory=dict)
    derived: dict[Hashable, tuple[Any, tuple[tuple, ...]]] = field(default_factory=dict)


class Catalog:
    """One query's view of the sandbox through its search tools (results cached per call; with
    ``tables``, shared with the query's other views: see the module docstring)."""

    def __init__(self, env, query: int | str | TravelQuery, tables: QueryTables | None = None):
        self.env = env
        self.q: TravelQuery = env.get_query(query)
        self.tools = env.tools
        self.candidates = env.candidates(self.q)
        self.tables = tables if tables is not None else QueryTables()
        self._cache: dict[tuple, list[Option]] = {}
        self.by_text: dict[str, Option] = {}
        self._recording: list[dict[tuple, None]] = []  # the searches of the derived values being computed

    @property
    def people(self) -> int:
        return self.q.people_number

    def _cached(self, find: Callable[..., list[Option]], *args: Any) -> list[Option]:
        """``find(*args)``'s options, searched once per query; each option's text known to :meth:`lookup`."""
        key = (find.__name__, *args)
        for searches in self._recording:
            searches.setdefault(key)
        if key not in self._cache:
            shared = self.tables.results.get(key)
            if shared is None:
                shared = self.tables.results[key] = _one_per_text(find(*args))
            options = self._cache[key] = list(shared)
            for o in options:
                self.by_text.setdefault(o.text, o)
        return self._cache[key]

    def derived(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, a value of this query's search results alone (immutable: tuples, frozen
        dataclasses, numbers; or a memo whose answers depend on the query alone), computed once per
        :class:`QueryTables` under ``key`` (which names everything else it depends on). Read from
        the tables, the searches its computation made are replayed on this view (its :meth:`lookup`
        table ends as if it had computed it)."""
        hit = self.tables.derived.get(key)
        if hit is not None:
            value, searches = hit
            for name, *args in searches:
                self._cached(getattr(self, name), *args)
            return value
        searches: dict[tuple, None] = {}
        self._recording.append(searches)
        try:
            value = compute()
        finally:
            self._recording.pop()
        self.tables.derived[key] = (value, tuple(searches))
        return value

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
        out = []
        for r in self.tools.city_records("restaurants", city):
            cu = tuple(c.strip() for c in r.cuisines.split(",") if c.strip())
            out.append(Option("restaurant", entity(r.name, city), r.cost * self.people,
                              f"{money(r.cost)} per person, {', '.join(cu)}", city, cuisines=cu))
        return out

    def _hotels(self, city: str) -> list[Option]:
        out = []
        for h in self.tools.city_records("accommodations", city):
            per_night = h.price * math.ceil(self.people / max(1, h.max_occupancy))
            note = (f"{money(h.price)} per night for {h.max_occupancy}, {h.room_type}, {h.house_rules}, "
                    f"minimum {int(h.min_nights)} nights")
            out.append(Option("hotel", entity(h.name, city), per_night, note, city, room_type=h.room_type,
                              house_rules=h.house_rules, min_nights=h.min_nights))
        return out

    def _attractions(self, city: str) -> list[Option]:
        return [Option("attraction", entity(a.name, city), 0.0, "", city)
                for a in self.tools.city_records("attractions", city)]

    def _transport(self, a: str, b: str, day: int) -> list[Option]:
        out = []
        for f in self.tools.flight_records(a, b, self.q.date[day - 1]):
            out.append(Option("flight", flight_text(f.number, a, b, f.dep_time, f.arr_time), f.price * self.people,
                              f"{money(f.price)} per person", b, mode="Flight"))
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
