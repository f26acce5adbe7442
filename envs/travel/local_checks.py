"""The query's local constraints on single options: transportation rule and transport family,
room type, house rule, a stay's minimum nights, and the wanted cuisines a set of restaurants covers.

Each check returns why an option breaks the constraint (empty / ``None``: it does not), by the
evaluator's rules (:mod:`envs.travel.hard_rules`).
"""

from __future__ import annotations

from collections.abc import Iterable

from envs.travel.catalog import Catalog, Option
from envs.travel.query import TravelQuery
from envs.travel.schema import HOUSE_RULE_TEXT, ROOM_TYPE_OK

__all__ = ["FAMILIES", "covered_cuisines", "hotel_problems", "house_rule_problem", "room_type_problem",
           "transport_problems"]

FAMILIES: dict[str, frozenset[str]] = {"flights and taxis": frozenset({"Flight", "Taxi"}),
                                       "self-driving": frozenset({"Self-driving"})}
"""Transport-mode families a whole trip may use without a conflict (no self-driving with flights or taxis)."""


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


def room_type_problem(o: Option, q: TravelQuery) -> str | None:
    """Why the hotel ``o`` is not of the room type the query asks for."""
    want = q.local_constraint.get("room type")
    if want and not ROOM_TYPE_OK[want](o.room_type):
        return f"room type must be {want}, it is {o.room_type}"
    return None


def house_rule_problem(o: Option, q: TravelQuery) -> str | None:
    """Why the hotel ``o`` forbids what the query's house rule needs."""
    rule = q.local_constraint.get("house rule")
    if rule and HOUSE_RULE_TEXT[rule] in o.house_rules:
        return f"{rule} must be allowed, it says {o.house_rules}"
    return None


def hotel_problems(o: Option, q: TravelQuery, nights: int | None = None) -> list[str]:
    """Why ``o`` breaks the query's room type or house rule, or the stay's minimum nights."""
    out = [p for p in (room_type_problem(o, q), house_rule_problem(o, q)) if p]
    if nights is not None and o.min_nights > nights:
        out.append(f"minimum {int(o.min_nights)} nights, the stay has {nights}")
    return out


def covered_cuisines(cat: Catalog, texts: Iterable[str]) -> set[str]:
    """The query's wanted cuisines served by the restaurants ``texts`` outside the origin."""
    wanted = set(cat.q.local_constraint.get("cuisine") or ())
    got: set[str] = set()
    for t in texts:
        o = cat.lookup(t)
        if o is not None and o.kind == "restaurant" and o.city != cat.q.org:
            got |= wanted & set(o.cuisines)
    return got
