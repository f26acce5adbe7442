"""The five hard constraints of TravelPlanner (the official ``evaluation/hard_constraint.py``):
budget, room rule, room type, cuisine, transportation, and the plan's total cost the budget is
judged on. The evaluator judges them only on a plan with complete information inside the sandbox;
a constraint the query does not set is :data:`~envs.travel.verdicts.NOT_SET`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from envs.travel.eval_mode import EvalMode
from envs.travel.index import Hotel
from envs.travel.plans import Plan
from envs.travel.query import TravelQuery
from envs.travel.schema import HOUSE_RULE_TEXT, MEALS, ROOM_TYPE_OK, SELF_DRIVING_PER_CAR, TAXI_PER_CAR
from envs.travel.text import as_text, before_paren, filled, flight_number, from_to, name_city
from envs.travel.verdicts import NOT_SET, PASS, Verdict, fail, money_text

class HardRules(EvalMode):
    """The hard checks, each ``(query, days) -> Verdict``, and :meth:`total_cost`."""

    def budget(self, q: TravelQuery, days: Plan, cost: float | None = None) -> Verdict:
        """``cost``: the plan's :meth:`total_cost` when the caller has it."""
        cost = self.total_cost(q, days) if cost is None else cost
        if cost <= q.budget:
            return PASS
        return fail(f"the plan costs {money_text(cost)} for {q.people_number} people, over the budget of "
                    f"{money_text(q.budget)}")

    def total_cost(self, q: TravelQuery, days: Plan) -> float:
        ix, p = self.index, q.people_number
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
                        mode = "self-driving" if "self-driving" in low else "taxi"
                        c = ix.road_cost(before_paren(o), before_paren(d), mode)
                        if c is not None:
                            per_car = SELF_DRIVING_PER_CAR if mode == "self-driving" else TAXI_PER_CAR
                            total += c * math.ceil(p / per_car)
            for meal in MEALS:
                v = as_text(u.get(meal))
                if filled(v):
                    e = self._lookup(ix.restaurants, v)[0]
                    if e is not None:
                        total += e.cost * p
            v = as_text(u.get("accommodation"))
            if filled(v):
                e = self._lookup(ix.hotels, v)[0]
                if e is not None:
                    total += e.price * math.ceil(p / e.max_occupancy)
        return total

    def room_rule(self, q: TravelQuery, days: Plan) -> Verdict:
        rule = q.local_constraint.get("house rule")
        if rule is None:
            return NOT_SET
        banned = HOUSE_RULE_TEXT.get(rule)
        hit = self._first_hotel(days, lambda h: banned in h.house_rules) if banned else None
        if hit is None:
            return PASS
        i, v, h = hit
        return fail(f"The house rule should be {rule}: day {i + 1} accommodation {v!r} says '{h.house_rules}'.")

    def room_type(self, q: TravelQuery, days: Plan) -> Verdict:
        want = q.local_constraint.get("room type")
        if want is None:
            return NOT_SET
        ok = ROOM_TYPE_OK.get(want)
        hit = self._first_hotel(days, lambda h: not ok(h.room_type)) if ok is not None else None
        if hit is None:
            return PASS
        i, v, h = hit
        return fail(f"The room type should be {want}: day {i + 1} accommodation {v!r} is a {h.room_type}.")

    def _first_hotel(self, days: Plan, wrong: Callable[[Hotel], bool]) -> tuple[int, str, Hotel] | None:
        """(day index, accommodation text, hotel) of the first day whose hotel is ``wrong``."""
        for i, u in enumerate(days):
            v = as_text(u.get("accommodation"))
            if filled(v):
                h = self._lookup(self.index.hotels, v)[0]
                if h is not None and wrong(h):
                    return i, v, h
        return None

    def cuisine(self, q: TravelQuery, days: Plan) -> Verdict:
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
                    if self.quirks:
                        break  # the official code's `continue` skips the rest of the day's meals
                    continue
                e = self._lookup(self.index.restaurants, v)[0]
                if e is not None:
                    found.update(c for c in wanted if c in e.cuisines)
        complete = len(found) == len(wanted) if self.quirks else set(wanted) <= found
        if complete:
            return PASS
        missing = [c for c in wanted if c not in found]
        return fail(f"The cuisine {missing[0] if missing else wanted} is not satisfied: no meal outside "
                    f"{q.org} serves it.")

    def transportation(self, q: TravelQuery, days: Plan) -> Verdict:
        rule = q.local_constraint.get("transportation")
        if rule is None:
            return NOT_SET
        for i, u in enumerate(days):
            t = as_text(u.get("transportation"))
            if not filled(t):
                continue
            flight = ("Flight" in t) if self.quirks else ("flight" in t.lower())
            driving = ("Self-driving" in t) if self.quirks else ("self-driving" in t.lower())
            if rule == "no flight" and flight:
                return fail(f"The transportation should not be flight: day {i + 1} uses {t!r}.")
            if rule == "no self-driving" and driving:
                return fail(f"The transportation should not be self-driving: day {i + 1} uses {t!r}.")
        return PASS
