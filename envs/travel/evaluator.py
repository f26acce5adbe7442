"""The TravelPlanner evaluator, rule for rule the official one (``evaluation/commonsense_constraint.py``,
``hard_constraint.py`` and ``eval.py`` of OSU-NLP-Group/TravelPlanner), on indexed lookups.

Eight commonsense constraints -- within sandbox, complete information, within current city,
reasonable city route, diverse restaurants, diverse attractions, non-conflicting transportation,
minimum nights stay -- are judged on every delivered plan; the five hard ones -- budget, room rule,
room type, cuisine, transportation -- only when the plan has complete information and stays within
the sandbox, exactly as ``eval.py`` does (a hard constraint the query does not set is ``None``).
Every failed constraint carries its reason (the day and the entity).

Two modes:

* ``official_quirks=True`` reproduces the official code's verdicts byte for byte, including its
  slips: (1) entity names match by substring (the first row of the city whose name *contains* the
  plan's name); (2) in "within current city" a non-travel day's city is iterated character by
  character (any one letter of the city in the entity string passes); (3) the attraction list drops
  whatever follows the last ';' (``split(';')[:-1]``) and is not stripped; (4) the house rule
  'parties' is never violated (the code tests the misspelt 'parities'); (5) a meal in the origin
  city skips the rest of that day's meals in the cuisine check; (6) the hard transportation rule
  is case-sensitive ('Flight', 'Self-driving'). Use it to reproduce leaderboard numbers.
* ``official_quirks=False`` (default, the reward for RL) applies the rules as intended: exact
  entity names, the entity's own city must be one of the day's cities, attractions are the
  non-empty ';'-separated items, all five house rules are checked, only origin-city meals are
  skipped for cuisine, transport modes are matched case-insensitively, and a flight must fly on
  the day it is used (the official code does not look at the flight's date).

Where the official code would crash (e.g. 'from' without 'to', a flight without 'Flight Number: '),
the constraint fails with that reason instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.travel.index import SandboxIndex
from envs.travel.plans import Plan, PlanParseError, parse_plan
from envs.travel.query import TravelQuery
from envs.travel.schema import EMPTY_DAY_TEXT, HOUSE_RULE_TEXT, MEALS, SELF_DRIVING_PER_CAR, TAXI_PER_CAR
from envs.travel.text import as_text, before_paren, filled, flight_number, from_to, name_city, transport_mode

COMMONSENSE = ("within_sandbox", "complete_information", "within_current_city", "reasonable_city_route",
               "diverse_restaurants", "diverse_attractions", "non_conflicting_transportation",
               "minimum_nights_stay")
HARD = ("budget", "room_rule", "room_type", "cuisine", "transportation")
CONSTRAINTS = COMMONSENSE + HARD
OFFICIAL_KEYS = {
    "within_sandbox": "is_valid_information_in_sandbox", "complete_information": "is_not_absent",
    "within_current_city": "is_valid_information_in_current_city",
    "reasonable_city_route": "is_reasonable_visiting_city", "diverse_restaurants": "is_valid_restaurants",
    "diverse_attractions": "is_valid_attractions", "non_conflicting_transportation": "is_valid_transportation",
    "minimum_nights_stay": "is_valid_accommodation", "budget": "valid_cost", "room_rule": "valid_room_rule",
    "room_type": "valid_room_type", "cuisine": "valid_cuisine", "transportation": "valid_transportation",
}
PAPER_NAMES = {
    "within_sandbox": "Within Sandbox", "complete_information": "Complete Information",
    "within_current_city": "Within Current City", "reasonable_city_route": "Reasonable City Route",
    "diverse_restaurants": "Diverse Restaurants", "diverse_attractions": "Diverse Attractions",
    "non_conflicting_transportation": "Non-conf. Transportation", "minimum_nights_stay": "Minimum Nights Stay",
    "budget": "Budget", "room_rule": "Room Rule", "room_type": "Room Type", "cuisine": "Cuisine",
    "transportation": "Transportation",
}
ROOM_TYPE_OK = {
    "not shared room": lambda t: t != "Shared room",
    "shared room": lambda t: t == "Shared room",
    "private room": lambda t: t == "Private room",
    "entire room": lambda t: t == "Entire home/apt",
}


@dataclass(frozen=True)
class Verdict:
    passed: bool | None  # None: not applicable (the query does not set this hard constraint)
    reason: str | None = None


PASS = Verdict(True)
NOT_SET = Verdict(None)


def _fail(reason: str) -> Verdict:
    return Verdict(False, reason)


@dataclass
class PlanEvaluation:
    """Every constraint's verdict for one (query, plan)."""

    query_id: int
    delivered: bool
    error: str | None = None
    error_reason: str | None = None
    commonsense: dict[str, Verdict] = field(default_factory=dict)
    hard: dict[str, Verdict] | None = None  # None: not judged (undelivered, incomplete or outside the sandbox)
    total_cost: float | None = None
    hard_applicable: int = 1

    @property
    def commonsense_pass(self) -> bool:
        return self.delivered and all(v.passed for v in self.commonsense.values())

    @property
    def hard_pass(self) -> bool:
        return self.hard is not None and all(v.passed is not False for v in self.hard.values())

    @property
    def final_pass(self) -> bool:
        return self.commonsense_pass and self.hard_pass

    @property
    def commonsense_passed(self) -> int:
        return sum(v.passed is True for v in self.commonsense.values())

    @property
    def hard_passed(self) -> int:
        return 0 if self.hard is None else sum(v.passed is True for v in self.hard.values())

    def violations(self) -> dict[str, str]:
        """Failed constraint -> reason (hard ones not judged are listed as such)."""
        out = {k: v.reason or "failed" for k, v in self.commonsense.items() if v.passed is False}
        if self.hard is None:
            if self.delivered:
                out["hard"] = "not judged: the plan lacks information or leaves the sandbox"
        else:
            out.update({k: v.reason or "failed" for k, v in self.hard.items() if v.passed is False})
        if not self.delivered:
            out["delivery"] = self.error or "no plan"
        return out

    def verdicts(self) -> dict[str, bool | None]:
        """All 13 constraints: True / False, None for a hard one the query does not set or that
        was not judged."""
        out: dict[str, bool | None] = {k: self.commonsense.get(k, Verdict(False)).passed if self.delivered else False
                                       for k in COMMONSENSE}
        for k in HARD:
            out[k] = None if self.hard is None else self.hard[k].passed
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id, "delivered": self.delivered, "error": self.error,
            "final_pass": self.final_pass, "commonsense_pass": self.commonsense_pass,
            "hard_pass": self.hard_pass, "total_cost": self.total_cost,
            "commonsense": {k: {"passed": v.passed, "reason": v.reason} for k, v in self.commonsense.items()},
            "hard": None if self.hard is None else {k: {"passed": v.passed, "reason": v.reason} for k, v in self.hard.items()},
        }


class TravelEvaluator:
    """Judges plans against queries on one sandbox index."""

    def __init__(self, index: SandboxIndex, official_quirks: bool = False):
        self.index = index
        self.quirks = official_quirks

    # ----------------------------------------------------------------------------- entry points
    def evaluate(self, query: TravelQuery, plan: Plan | str | Any) -> PlanEvaluation:
        try:
            days = parse_plan(plan)
        except PlanParseError as exc:
            return PlanEvaluation(query.id, False, str(exc), exc.reason, hard_applicable=query.hard_constraint_count)
        return self.evaluate_parsed(query, days)

    def evaluate_parsed(self, query: TravelQuery, plan: Plan) -> PlanEvaluation:
        days = plan[: min(query.days, len(plan))]
        if not plan:
            return PlanEvaluation(query.id, False, "plan has no days", "empty", hard_applicable=query.hard_constraint_count)
        cs = {
            "within_sandbox": self.within_sandbox(query, days),
            "complete_information": self.complete_information(query, days),
            "within_current_city": self.within_current_city(query, days),
            "reasonable_city_route": self.reasonable_city_route(query, days),
            "diverse_restaurants": self.diverse_restaurants(query, days),
            "diverse_attractions": self.diverse_attractions(query, days),
            "non_conflicting_transportation": self.non_conflicting_transportation(query, days),
            "minimum_nights_stay": self.minimum_nights_stay(query, days),
        }
        ev = PlanEvaluation(query.id, True, commonsense=cs, hard_applicable=query.hard_constraint_count)
        if cs["complete_information"].passed and cs["within_sandbox"].passed:
            cost = self.total_cost(query, days)
            ev.total_cost = cost
            ev.hard = {
                "budget": PASS if cost <= query.budget else _fail(
                    f"the plan costs {_money(cost)} for {query.people_number} people, over the budget of {_money(query.budget)}"),
                "room_rule": self.room_rule(query, days),
                "room_type": self.room_type(query, days),
                "cuisine": self.cuisine(query, days),
                "transportation": self.transportation(query, days),
            }
        return ev

    def evaluate_many(self, pairs: Sequence[tuple[TravelQuery, Plan | str]]) -> list[PlanEvaluation]:
        return [self.evaluate(q, p) for q, p in pairs]

    # --------------------------------------------------------------------------------- helpers
    def _lookup(self, table, text: str):
        """(entity, number of matching rows) for a 'Name, City' string under the mode's rule."""
        name, city = name_city(text)
        if self.quirks:
            return table.find(name, city)
        e = table.get(name, city)
        return e, int(e is not None)

    def _attraction_items(self, value: str) -> list[str]:
        if self.quirks:
            return value.split(";")[:-1]
        return [p.strip() for p in value.split(";") if p.strip()]

    def _day_cities(self, cv: str, i: int) -> tuple[list[str] | str | None, str | None]:
        """The day's cities ([A, B] for 'from A to B'); quirk mode: a plain city stays a string."""
        if "from" in cv:
            a, b = from_to(cv)
            if a is None or b is None:
                return None, f"day {i + 1} current_city {cv!r} has 'from' but is not 'from A to B'"
            return [before_paren(a), before_paren(b)], None
        city = before_paren(cv)
        if not city:
            return None, f"day {i + 1} has no current_city"
        return (city if self.quirks else [city]), None

    # ---------------------------------------------------------------------- commonsense checks
    def reasonable_city_route(self, q: TravelQuery, days: Plan) -> Verdict:
        seq: list[str] = []
        for i, u in enumerate(days):
            cv = as_text(u.get("current_city"))
            if "from" in cv:
                a, b = from_to(cv)
                if a is None or b is None:
                    return _fail(f"day {i + 1} current_city {cv!r} has 'from' but is not 'from A to B'")
                a, b = before_paren(a), before_paren(b)
                if i == 0 and a != q.org:
                    return _fail(f"The first day's city should be {q.org}, not {a}.")
                seq += [a, b]
            else:
                seq.append(before_paren(cv))
        if seq[0] != seq[-1]:
            return _fail(f"The trip should be a closed circle: it starts in {seq[0]} and ends in {seq[-1]}.")
        ok, why = _valid_city_sequence(seq)
        if not ok:
            return _fail(f"The city sequence is invalid ({why}): {' -> '.join(seq)}")
        for k, city in enumerate(seq):
            state = self.index.city_state.get(city)
            if state is None:
                return _fail(f"{city} is not a valid city.")
            if 0 < k < len(seq) - 1 and q.days > 3 and state != q.dest:
                return _fail(f"{city} is not in {q.dest}.")
        return PASS

    def diverse_restaurants(self, q: TravelQuery, days: Plan) -> Verdict:
        seen: set = set()
        for i, u in enumerate(days):
            for meal in MEALS:
                v = u.get(meal)
                if not filled(v):
                    continue
                key = v if self.quirks or not isinstance(v, str) else v.strip()
                if key in seen:
                    return _fail(f"The restaurant in day {i + 1} {meal} ({v}) is repeated.")
                seen.add(key)
        return PASS

    def diverse_attractions(self, q: TravelQuery, days: Plan) -> Verdict:
        seen: set[str] = set()
        for i, u in enumerate(days):
            v = u.get("attraction")
            if not filled(v):
                continue
            for a in self._attraction_items(as_text(v)):
                if a in seen:
                    return _fail(f"The attraction '{a}' in day {i + 1} is repeated.")
                seen.add(a)
        return PASS

    def minimum_nights_stay(self, q: TravelQuery, days: Plan) -> Verdict:
        values = []
        for i, u in enumerate(days):
            if "accommodation" not in u:
                return _fail(f"No Accommodation Info (day {i + 1}).")
            values.append(u["accommodation"])
        runs: list[list] = []
        for v in values:
            if runs and runs[-1][0] == v:
                runs[-1][1] += 1
            else:
                runs.append([v, 1])
        for v, n in runs:
            if not v or v in ("-", ""):
                continue
            e, count = self._lookup(self.index.hotels, as_text(v))
            if e is not None and count == 1 and n < e.min_nights:
                return _fail(f"The accommodation {v} is booked for {n} night(s) but requires a minimum of "
                             f"{_num(e.min_nights)}.")
        return PASS

    def non_conflicting_transportation(self, q: TravelQuery, days: Plan) -> Verdict:
        t0 = as_text(days[0].get("transportation"))
        if not filled(t0):
            return _fail("The transportation in day 1 should not be empty.")
        modes = [transport_mode(t0)]
        for u in days:
            t = as_text(u.get("transportation"))
            if filled(t):
                modes.append(transport_mode(t))
        if "Self-driving" in modes and "Flight" in modes:
            return _fail("The transportation is conflicting: self-driving and flights in one trip.")
        if "Self-driving" in modes and "Taxi" in modes:
            return _fail("The transportation is conflicting: self-driving and taxis in one trip.")
        return PASS

    def within_current_city(self, q: TravelQuery, days: Plan) -> Verdict:
        for i, u in enumerate(days):
            cities, why = self._day_cities(as_text(u.get("current_city")), i)
            if cities is None:
                return _fail(why or f"day {i + 1}: no city")
            t = as_text(u.get("transportation"))
            if filled(t):
                for city in cities:
                    if city not in t:
                        return _fail(f"The transportation in day {i + 1} is invalid city choice: "
                                     f"{city} is not in {t!r}.")
            for meal in MEALS:
                v = as_text(u.get(meal))
                if filled(v) and not self._in_cities(v, cities):
                    return _fail(f"The {meal} in day {i + 1} is invalid city choice: {v!r} is not in "
                                 f"{_cities_text(cities)}.")
            v = as_text(u.get("attraction"))
            if filled(v):
                for a in self._attraction_items(v):
                    if not self._in_cities(a, cities):
                        return _fail(f"The attraction in day {i + 1} is invalid city choice: {a!r} is not in "
                                     f"{_cities_text(cities)}.")
            v = as_text(u.get("accommodation"))
            if filled(v):
                last = cities[-1]
                ok = (last in v) if self.quirks else (name_city(v)[1] == last)
                if not ok:
                    return _fail(f"The accommodation in day {i + 1} is invalid city choice: {v!r} is not in {last}.")
        return PASS

    def _in_cities(self, text: str, cities) -> bool:
        if self.quirks:
            return any(c in text for c in cities)
        return name_city(text)[1] in cities

    def within_sandbox(self, q: TravelQuery, days: Plan) -> Verdict:
        ix = self.index
        for i, u in enumerate(days):
            if "transportation" not in u:  # the official check indexes it directly and raises
                return _fail(f"Day {i + 1} has no transportation field, so it can not be checked against the sandbox.")
            t = as_text(u.get("transportation"))
            if filled(t):
                o, d = from_to(t)
                if o is None or d is None:
                    o, d = from_to(as_text(u.get("current_city")))
                low = t.lower()
                if "flight number" in low:
                    no = flight_number(t)
                    if o is None or d is None or no is None:
                        return _fail(f"The transportation {t!r} in day {i + 1} can not be parsed.")
                    o, d = before_paren(o), before_paren(d)
                    dates = ix.flight_keys.get((no, o, d))
                    if dates is None:
                        return _fail(f"The flight number in day {i + 1} is invalid in the sandbox: "
                                     f"no flight {no} from {o} to {d}.")
                    if not self.quirks and i < len(q.date) and q.date[i] not in dates:
                        return _fail(f"The flight {no} in day {i + 1} flies on {', '.join(sorted(dates))}, "
                                     f"not on {q.date[i]}.")
                elif "self-driving" in low or "taxi" in low:
                    mode = "self-driving" if "self-driving" in low else "taxi"
                    o, d = (before_paren(o), before_paren(d)) if o is not None and d is not None else ("-", "-")
                    if ix.road_cost(o, d, mode) is None:
                        return _fail(f"The {mode} in day {i + 1} is invalid in the sandbox: no drive from {o} to {d}.")
            for meal in MEALS:
                v = as_text(u.get(meal))
                if filled(v) and self._lookup(ix.restaurants, v)[0] is None:
                    return _fail(f"The {meal} in day {i + 1} is invalid in the sandbox: no restaurant {v!r}.")
            v = as_text(u.get("attraction"))
            if filled(v):
                for a in self._attraction_items(v):
                    if self._lookup(ix.attractions, a)[0] is None:
                        return _fail(f"The attraction {a} in day {i + 1} is invalid in the sandbox.")
            v = as_text(u.get("accommodation"))
            if filled(v) and self._lookup(ix.hotels, v)[0] is None:
                return _fail(f"The accommodation in day {i + 1} is invalid in the sandbox: no accommodation {v!r}.")
        return PASS

    def complete_information(self, q: TravelQuery, days: Plan) -> Verdict:
        filled_days = sum(1 for u in days if u != {} and as_text(u.get("current_city")) != EMPTY_DAY_TEXT)
        if filled_days != q.days:
            return _fail(f"Invalid Days: the plan fills {filled_days} day(s), the query asks for {q.days}.")
        visited: set[str] = set()
        for i, u in enumerate(days):
            cv = as_text(u.get("current_city"))
            if "from" in cv:
                a, b = from_to(cv)
                if a is None or b is None:
                    return _fail(f"Invalid City Number: day {i + 1} current_city {cv!r} is not 'from A to B'.")
                a, b = before_paren(a), before_paren(b)
                if i == 0 and a != q.org:
                    return _fail(f"Invalid City Number: the first day's city should be {q.org}.")
                visited |= {a, b}
            else:
                visited.add(before_paren(cv))
        visited.discard(q.org)
        if len(visited) != q.visiting_city_number:
            return _fail(f"Invalid City Number: the plan visits {len(visited)} cities ({', '.join(sorted(visited))}), "
                         f"the query asks for {q.visiting_city_number}.")
        needed = 6 * q.days
        given = 0
        for i, u in enumerate(days):
            for key in ("transportation", "breakfast", "lunch", "dinner", "attraction", "accommodation"):
                if key not in u:
                    return _fail(f"No {key.capitalize()} Info in day {i + 1}.")
            cv = as_text(u.get("current_city"))
            t = as_text(u["transportation"])
            if ("from " in cv or "to " in cv) and t in ("", "-"):
                return _fail(f"No transportation in day {i + 1} is not allowed.")
            if ("from " not in cv and " to " not in cv) and as_text(u["attraction"]) in ("", "-"):
                return _fail(f"No attraction in day {i + 1} is not allowed.")
            if i != q.days - 1 and as_text(u["accommodation"]) in ("", "-"):
                return _fail(f"No accommodation in day {i + 1} is not allowed.")
            if any(as_text(u[m]) in ("", "-") for m in MEALS) and "from " not in cv:
                return _fail(f"No meal in day {i + 1} is not allowed.")
            given += sum(1 for v in u.values() if filled(v))
        if given / needed < 0.5:
            return _fail(f"The absent information is more than 50% ({given} of {needed} fields given).")
        return PASS

    # ------------------------------------------------------------------------------ hard checks
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
        if self.quirks and rule == "parties":
            banned = None  # the official code compares against the misspelt 'parities'
        for i, u in enumerate(days):
            v = as_text(u.get("accommodation"))
            if filled(v) and banned:
                e = self._lookup(self.index.hotels, v)[0]
                if e is not None and banned in e.house_rules:
                    return _fail(f"The house rule should be {rule}: day {i + 1} accommodation {v!r} says "
                                 f"'{e.house_rules}'.")
        return PASS

    def room_type(self, q: TravelQuery, days: Plan) -> Verdict:
        want = q.local_constraint.get("room type")
        if want is None:
            return NOT_SET
        ok = ROOM_TYPE_OK.get(want)
        for i, u in enumerate(days):
            v = as_text(u.get("accommodation"))
            if filled(v) and ok is not None:
                e = self._lookup(self.index.hotels, v)[0]
                if e is not None and not ok(e.room_type):
                    return _fail(f"The room type should be {want}: day {i + 1} accommodation {v!r} is a "
                                 f"{e.room_type}.")
        return PASS

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
        return _fail(f"The cuisine {missing[0] if missing else wanted} is not satisfied: no meal outside "
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
                return _fail(f"The transportation should not be flight: day {i + 1} uses {t!r}.")
            if rule == "no self-driving" and driving:
                return _fail(f"The transportation should not be self-driving: day {i + 1} uses {t!r}.")
        return PASS


def _valid_city_sequence(seq: list[str]) -> tuple[bool, str | None]:
    """The official rule: at least 3 entries; every city but the first/last appears in one
    consecutive run of length >= 2 and never again."""
    if len(seq) < 3:
        return False, "fewer than 3 entries"
    seen: set[str] = set()
    i = 0
    while i < len(seq):
        city = seq[i]
        if city in seen and i != 0 and i != len(seq) - 1:
            return False, f"{city} is visited twice"
        j = i
        while j < len(seq) and seq[j] == city:
            j += 1
        if j - i == 1 and 0 < j - 1 < len(seq) - 1:
            return False, f"{city} is passed through without a stay"
        seen.add(city)
        i = j
    return True, None


def _cities_text(cities) -> str:
    return cities if isinstance(cities, str) else " or ".join(cities)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _money(x: float) -> str:
    return f"${_num(round(x, 2))}"


# ------------------------------------------------------------------------------------ metrics
def summarize(queries: Sequence[TravelQuery], evaluations: Sequence[PlanEvaluation]) -> dict[str, float]:
    """The official metrics over aligned queries and evaluations: delivery rate, commonsense
    micro / macro, hard micro / macro, final pass rate (fractions in [0, 1])."""
    if len(queries) != len(evaluations):
        raise ValueError(f"{len(queries)} queries but {len(evaluations)} evaluations")
    n = len(queries)
    if n == 0:
        return {k: 0.0 for k in ("delivery_rate", "commonsense_micro", "commonsense_macro", "hard_micro",
                                 "hard_macro", "final_pass")} | {"n": 0}
    hard_total = sum(q.hard_constraint_count for q in queries)
    return {
        "delivery_rate": sum(e.delivered for e in evaluations) / n,
        "commonsense_micro": sum(e.commonsense_passed for e in evaluations) / (len(COMMONSENSE) * n),
        # eval.py counts a commonsense pass only for plans whose hard constraints were judged
        "commonsense_macro": sum(e.commonsense_pass and e.hard is not None for e in evaluations) / n,
        "hard_micro": sum(e.hard_passed for e in evaluations) / hard_total,
        "hard_macro": sum(e.hard_pass for e in evaluations) / n,
        "final_pass": sum(e.final_pass for e in evaluations) / n,
        "n": n,
    }


def summarize_by_group(queries: Sequence[TravelQuery], evaluations: Sequence[PlanEvaluation]) -> dict[str, dict]:
    """:func:`summarize` per level and per days (keys like 'easy', 'days=3') and 'all'."""
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        groups.setdefault(q.level, []).append(i)
        groups.setdefault(f"days={q.days}", []).append(i)
    out = {"all": summarize(queries, evaluations)}
    for key in sorted(groups):
        idx = groups[key]
        out[key] = summarize([queries[i] for i in idx], [evaluations[i] for i in idx])
    return out


def constraint_pass_rates(queries: Sequence[TravelQuery], evaluations: Sequence[PlanEvaluation]) -> dict[str, float]:
    """Per-constraint pass rate: commonsense over all plans, a hard constraint over the queries
    that set it (budget: all); a hard constraint not judged counts as failed."""
    n = max(1, len(evaluations))
    out = {k: sum(bool(e.delivered and e.commonsense.get(k, Verdict(False)).passed) for e in evaluations) / n
           for k in COMMONSENSE}
    keys = {"budget": None, "room_rule": "house rule", "room_type": "room type", "cuisine": "cuisine",
            "transportation": "transportation"}
    for k, lc_key in keys.items():
        idx = [i for i, q in enumerate(queries) if lc_key is None or q.local_constraint.get(lc_key)]
        ok = sum(evaluations[i].hard is not None and evaluations[i].hard[k].passed is True for i in idx)
        out[k] = ok / len(idx) if idx else float("nan")
    return out
