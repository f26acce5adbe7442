"""The five hard constraints of TravelPlanner (the official ``evaluation/hard_constraint.py``):
budget, room rule, room type, cuisine, transportation, and the plan's total cost the budget is
judged on. The evaluator judges them only on a plan with complete information inside the sandbox;
a constraint the query does not set is :data:`~envs.travel.verdicts.NOT_SET`.

Each rule is a plain function ``(mode, query, days, cost=None) -> Verdict`` whose docstring names
the official check it mirrors (``cost``: the plan's :func:`total_cost` when the caller has it, as
the evaluator does, once per plan; only the budget reads it, and computes it when it is None), and
:data:`HARD_RULES` is their table, in :data:`~envs.travel.verdicts.HARD` order: the evaluator
applies every entry. A new hard rule is one more function and one more entry (and its name in
``verdicts.HARD``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType

from envs.travel.eval_mode import EvalMode
from envs.travel.index import Hotel
from envs.travel.plans import Plan
from envs.travel.query import TravelQuery
from envs.travel.schema import HOUSE_RULE_TEXT, MEALS, ROOM_TYPE_OK, SELF_DRIVING_PER_CAR, TAXI_PER_CAR
from envs.travel.text import as_text, before_paren, filled, flight_number, from_to, name_city
from envs.travel.verdicts import NOT_SET, PASS, Verdict, fail, money_text

HardRule = Callable[[EvalMode, TravelQuery, Plan, float | None], Verdict]
"""A hard rule: ``(mode, query, days, the plan's total cost or None) -> Verdict``."""


def budget(mode: EvalMode, q: TravelQuery, days: Plan, cost: float | None = None) -> Verdict:
    """The plan's total cost is within the query's budget (official: ``get_total_cost(...) <=
    question['budget']``, the ``valid_cost`` key of ``hard_constraint.py``'s ``evaluation``)."""
    cost = total_cost(mode, q, days) if cost is None else cost
    if cost <= q.budget:
        return PASS
    return fail(f"the plan costs {money_text(cost)} for {q.people_number} people, over the budget of "
                f"{money_text(q.budget)}")


def total_cost(mode: EvalMode, q: TravelQuery, days: Plan) -> float:
    """The plan's cost for the query's people (official: ``get_total_cost``): flights per person,
    self-driving / taxi per car (5 / 4 people), meals per person, rooms per ``max occupancy``;
    entities not found add nothing."""
    ix, p = mode.index, q.people_number
    total = 0.0
    for u in days:
        t = as_text(u.get("transportation"))
        if filled(t):
            o, d = from_to(t)
            if o is None or d is None:
                o, d = from_to(as_text(u.get("current_city")))
            if o is not None and d is not None:
                low = t.lower()
                if "flight number" in low:
                    f = ix.flight_by_number.get(flight_number(t) or "")
                    if f is not None:
                        total += f.price * p
                elif "self-driving" in low or "taxi" in low:
                    drive = "self-driving" if "self-driving" in low else "taxi"
                    c = ix.road_cost(before_paren(o), before_paren(d), drive)
                    if c is not None:
                        per_car = SELF_DRIVING_PER_CAR if drive == "self-driving" else TAXI_PER_CAR
                        total += c * math.ceil(p / per_car)
        for meal in MEALS:
            v = as_text(u.get(meal))
            if filled(v):
                e = mode.lookup(ix.restaurants, v)[0]
                if e is not None:
                    total += e.cost * p
        v = as_text(u.get("accommodation"))
        if filled(v):
            e = mode.lookup(ix.hotels, v)[0]
            if e is not None:
                total += e.price * math.ceil(p / e.max_occupancy)
    return total


def room_rule(mode: EvalMode, q: TravelQuery, days: Plan, cost: float | None = None) -> Verdict:
    """No accommodation's house rules forbid what the query's 'house rule' wants (official:
    ``is_valid_room_rule``)."""
    rule = q.local_constraint.get("house rule")
    if rule is None:
        return NOT_SET
    banned = HOUSE_RULE_TEXT.get(rule)
    hit = _first_hotel(mode, days, lambda h: banned in h.house_rules) if banned else None
    if hit is None:
        return PASS
    i, v, h = hit
    return fail(f"The house rule should be {rule}: day {i + 1} accommodation {v!r} says '{h.house_rules}'.")


def room_type(mode: EvalMode, q: TravelQuery, days: Plan, cost: float | None = None) -> Verdict:
    """Every accommodation is of the query's 'room type' (official: ``is_valid_room_type``)."""
    want = q.local_constraint.get("room type")
    if want is None:
        return NOT_SET
    ok = ROOM_TYPE_OK.get(want)
    hit = _first_hotel(mode, days, lambda h: not ok(h.room_type)) if ok is not None else None
    if hit is None:
        return PASS
    i, v, h = hit
    return fail(f"The room type should be {want}: day {i + 1} accommodation {v!r} is a {h.room_type}.")


def _first_hotel(mode: EvalMode, days: Plan, wrong: Callable[[Hotel], bool]) -> tuple[int, str, Hotel] | None:
    """(day index, accommodation text, hotel) of the first day whose hotel is ``wrong``."""
    for i, u in enumerate(days):
        v = as_text(u.get("accommodation"))
        if filled(v):
            h = mode.lookup(mode.index.hotels, v)[0]
            if h is not None and wrong(h):
                return i, v, h
    return None


def cuisine(mode: EvalMode, q: TravelQuery, days: Plan, cost: float | None = None) -> Verdict:
    """Every cuisine the query wants is served by a meal outside the origin city (official:
    ``is_valid_cuisine``; quirk (4) of ``evaluator.py``)."""
    wanted = q.local_constraint.get("cuisine")
    if not wanted:
        return NOT_SET
    found: set[str] = set()
    for u in days:
        for meal in MEALS:
            v = as_text(u.get(meal))
            if not filled(v):
                continue
            if name_city(v)[1] == q.org:
                if mode.quirks:
                    break  # the official code's `continue` skips the rest of the day's meals
                continue
            e = mode.lookup(mode.index.restaurants, v)[0]
            if e is not None:
                found.update(c for c in wanted if c in e.cuisines)
    complete = len(found) == len(wanted) if mode.quirks else set(wanted) <= found
    if complete:
        return PASS
    missing = [c for c in wanted if c not in found]
    return fail(f"The cuisine {missing[0] if missing else wanted} is not satisfied: no meal outside "
                f"{q.org} serves it.")


def transportation(mode: EvalMode, q: TravelQuery, days: Plan, cost: float | None = None) -> Verdict:
    """No day uses the mode the query's 'transportation' forbids (official:
    ``is_valid_transportation`` of ``hard_constraint.py``; quirk (5) of ``evaluator.py``)."""
    rule = q.local_constraint.get("transportation")
    if rule is None:
        return NOT_SET
    for i, u in enumerate(days):
        t = as_text(u.get("transportation"))
        if not filled(t):
            continue
        flight = ("Flight" in t) if mode.quirks else ("flight" in t.lower())
        driving = ("Self-driving" in t) if mode.quirks else ("self-driving" in t.lower())
        if rule == "no flight" and flight:
            return fail(f"The transportation should not be flight: day {i + 1} uses {t!r}.")
        if rule == "no self-driving" and driving:
            return fail(f"The transportation should not be self-driving: day {i + 1} uses {t!r}.")
    return PASS


HARD_RULES: Mapping[str, HardRule] = MappingProxyType({
    "budget": budget,
    "room_rule": room_rule,
    "room_type": room_type,
    "cuisine": cuisine,
    "transportation": transportation,
})
"""The hard rules by constraint name, in :data:`~envs.travel.verdicts.HARD` order."""
