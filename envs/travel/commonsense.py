"""The eight commonsense constraints of TravelPlanner (the official
``evaluation/commonsense_constraint.py``), judged on every delivered plan: within sandbox,
complete information, within current city, reasonable city route, diverse restaurants, diverse
attractions, non-conflicting transportation, minimum nights stay. Each returns a
:class:`~envs.travel.verdicts.Verdict` whose reason names the day and the entity.

Each rule is a plain function ``(mode, query, days) -> Verdict`` (``mode``: the sandbox index and
how the evaluator's mode reads a plan, :class:`~envs.travel.eval_mode.EvalMode`) whose docstring
names the official check it mirrors, and :data:`COMMONSENSE_RULES` is their table, in
:data:`~envs.travel.verdicts.COMMONSENSE` order: the evaluator applies every entry. A new rule is
one more function and one more entry (and its name in ``verdicts.COMMONSENSE``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from types import MappingProxyType

from envs.travel.eval_mode import EvalMode
from envs.travel.plans import Plan
from envs.travel.query import TravelQuery
from envs.travel.schema import EMPTY_DAY_TEXT, MEALS
from envs.travel.text import as_text, before_paren, filled, flight_number, from_to, name_city, transport_mode
from envs.travel.verdicts import PASS, Verdict, fail, num_text

CommonsenseRule = Callable[[EvalMode, TravelQuery, Plan], Verdict]
"""A commonsense rule: ``(mode, query, days) -> Verdict``."""


def city_route(q: TravelQuery, days: Plan, bad_day: str, wrong_origin: str) -> tuple[list[str], Verdict | None]:
    """The cities the days' ``current_city`` names in order ('from A to B': A then B), or the
    failure at the first day that breaks it: ``bad_day`` when 'from' is not 'from A to B',
    ``wrong_origin`` when the first day leaves from another city than the query's origin (reason
    templates with the fields ``day``, ``text``, ``org``, ``origin``)."""
    cities: list[str] = []
    for i, u in enumerate(days):
        cv = as_text(u.get("current_city"))
        if "from" not in cv:
            cities.append(before_paren(cv))
            continue
        a, b = from_to(cv)
        if a is None or b is None:
            return cities, fail(bad_day.format(day=i + 1, text=cv, org=q.org, origin=None))
        a, b = before_paren(a), before_paren(b)
        if i == 0 and a != q.org:
            return cities, fail(wrong_origin.format(day=1, text=cv, org=q.org, origin=a))
        cities += [a, b]
    return cities, None


def reasonable_city_route(mode: EvalMode, q: TravelQuery, days: Plan) -> Verdict:
    """The route is a closed circle from the origin, each city visited in one stay, every city a
    real one and (trips over 3 days) in the destination state (official:
    ``is_reasonalbe_visiting_city``, sic)."""
    seq, bad = city_route(q, days, "day {day} current_city {text!r} has 'from' but is not 'from A to B'",
                          "The first day's city should be {org}, not {origin}.")
    if bad is not None:
        return bad
    if seq[0] != seq[-1]:
        return fail(f"The trip should be a closed circle: it starts in {seq[0]} and ends in {seq[-1]}.")
    ok, why = _valid_city_sequence(seq)
    if not ok:
        return fail(f"The city sequence is invalid ({why}): {' -> '.join(seq)}")
    for k, city in enumerate(seq):
        state = mode.index.city_state.get(city)
        if state is None:
            return fail(f"{city} is not a valid city.")
        if 0 < k < len(seq) - 1 and q.days > 3 and state != q.dest:
            return fail(f"{city} is not in {q.dest}.")
    return PASS


def diverse_restaurants(mode: EvalMode, q: TravelQuery, days: Plan) -> Verdict:
    """No restaurant is used for two meals (official: ``is_valid_restaurants``)."""
    seen: set = set()
    for i, u in enumerate(days):
        for meal in MEALS:
            v = u.get(meal)
            if not filled(v):
                continue
            key = v if mode.quirks or not isinstance(v, str) else v.strip()
            if key in seen:
                return fail(f"The restaurant in day {i + 1} {meal} ({v}) is repeated.")
            seen.add(key)
    return PASS


def diverse_attractions(mode: EvalMode, q: TravelQuery, days: Plan) -> Verdict:
    """No attraction is visited twice (official: ``is_valid_attractions``; quirk (3) of
    ``evaluator.py``)."""
    seen: set[str] = set()
    for i, u in enumerate(days):
        v = u.get("attraction")
        if not filled(v):
            continue
        for a in mode.attraction_items(as_text(v)):
            if a in seen:
                return fail(f"The attraction '{a}' in day {i + 1} is repeated.")
            seen.add(a)
    return PASS


def minimum_nights_stay(mode: EvalMode, q: TravelQuery, days: Plan) -> Verdict:
    """Each accommodation is booked for at least its minimum nights in a row (official:
    ``is_valid_accommodaton``, sic)."""
    values = []
    for i, u in enumerate(days):
        if "accommodation" not in u:
            return fail(f"No Accommodation Info (day {i + 1}).")
        values.append(u["accommodation"])
    runs = [(v, len(list(group))) for v, group in itertools.groupby(values)]  # consecutive nights
    for v, n in runs:
        if not v or v in ("-", ""):
            continue
        e, count = mode.lookup(mode.index.hotels, as_text(v))
        if e is not None and count == 1 and n < e.min_nights:
            return fail(f"The accommodation {v} is booked for {n} night(s) but requires a minimum of "
                        f"{num_text(e.min_nights)}.")
    return PASS


def non_conflicting_transportation(mode: EvalMode, q: TravelQuery, days: Plan) -> Verdict:
    """Day 1 has transportation and the trip does not mix self-driving with flights or taxis
    (official: ``is_valid_transportation`` of ``commonsense_constraint.py``)."""
    t0 = as_text(days[0].get("transportation"))
    if not filled(t0):
        return fail("The transportation in day 1 should not be empty.")
    modes = [transport_mode(t0)]
    for u in days:
        t = as_text(u.get("transportation"))
        if filled(t):
            modes.append(transport_mode(t))
    if "Self-driving" in modes and "Flight" in modes:
        return fail("The transportation is conflicting: self-driving and flights in one trip.")
    if "Self-driving" in modes and "Taxi" in modes:
        return fail("The transportation is conflicting: self-driving and taxis in one trip.")
    return PASS


def within_current_city(mode: EvalMode, q: TravelQuery, days: Plan) -> Verdict:
    """Every entity of a day is in that day's cities (official:
    ``is_valid_information_in_current_city``; quirk (2) of ``evaluator.py``)."""
    for i, u in enumerate(days):
        cities, why = mode.day_cities(as_text(u.get("current_city")), i)
        if cities is None:
            return fail(why or f"day {i + 1}: no city")
        t = as_text(u.get("transportation"))
        if filled(t):
            city = mode.first_missing(cities, t)
            if city is not None:
                return fail(f"The transportation in day {i + 1} is invalid city choice: "
                            f"{city} is not in {t!r}.")
        for meal in MEALS:
            v = as_text(u.get(meal))
            if filled(v) and not mode.in_cities(v, cities):
                return fail(f"The {meal} in day {i + 1} is invalid city choice: {v!r} is not in "
                            f"{_cities_text(cities)}.")
        v = as_text(u.get("attraction"))
        if filled(v):
            for a in mode.attraction_items(v):
                if not mode.in_cities(a, cities):
                    return fail(f"The attraction in day {i + 1} is invalid city choice: {a!r} is not in "
                                f"{_cities_text(cities)}.")
        v = as_text(u.get("accommodation"))
        if filled(v):
            last = cities[-1]
            ok = (last in v) if mode.quirks else (name_city(v)[1] == last)
            if not ok:
                return fail(f"The accommodation in day {i + 1} is invalid city choice: {v!r} is not in {last}.")
    return PASS


def within_sandbox(mode: EvalMode, q: TravelQuery, days: Plan) -> Verdict:
    """Every flight, drive, restaurant, attraction and accommodation exists in the sandbox (official:
    ``is_valid_information_in_sandbox``; quirks (1) and (6) of ``evaluator.py``)."""
    ix = mode.index
    for i, u in enumerate(days):
        if "transportation" not in u:  # the official check indexes it directly and raises
            return fail(f"Day {i + 1} has no transportation field, so it can not be checked against the sandbox.")
        t = as_text(u.get("transportation"))
        if filled(t):
            o, d = from_to(t)
            if o is None or d is None:
                o, d = from_to(as_text(u.get("current_city")))
            low = t.lower()
            if "flight number" in low:
                no = flight_number(t)
                if o is None or d is None or no is None:
                    return fail(f"The transportation {t!r} in day {i + 1} can not be parsed.")
                o, d = before_paren(o), before_paren(d)
                dates = ix.flight_keys.get((no, o, d))
                if dates is None:
                    return fail(f"The flight number in day {i + 1} is invalid in the sandbox: "
                                f"no flight {no} from {o} to {d}.")
                if not mode.quirks and i < len(q.date) and q.date[i] not in dates:
                    return fail(f"The flight {no} in day {i + 1} flies on {', '.join(sorted(dates))}, "
                                f"not on {q.date[i]}.")
            elif "self-driving" in low or "taxi" in low:
                drive = "self-driving" if "self-driving" in low else "taxi"
                o, d = (before_paren(o), before_paren(d)) if o is not None and d is not None else ("-", "-")
                if ix.road_cost(o, d, drive) is None:
                    return fail(f"The {drive} in day {i + 1} is invalid in the sandbox: no drive from {o} to {d}.")
        for meal in MEALS:
            v = as_text(u.get(meal))
            if filled(v) and mode.lookup(ix.restaurants, v)[0] is None:
                return fail(f"The {meal} in day {i + 1} is invalid in the sandbox: no restaurant {v!r}.")
        v = as_text(u.get("attraction"))
        if filled(v):
            for a in mode.attraction_items(v):
                if mode.lookup(ix.attractions, a)[0] is None:
                    return fail(f"The attraction {a} in day {i + 1} is invalid in the sandbox.")
        v = as_text(u.get("accommodation"))
        if filled(v) and mode.lookup(ix.hotels, v)[0] is None:
            return fail(f"The accommodation in day {i + 1} is invalid in the sandbox: no accommodation {v!r}.")
    return PASS


def complete_information(mode: EvalMode, q: TravelQuery, days: Plan) -> Verdict:
    """The plan fills the query's days, visits its number of cities and leaves at most half of the
    fields empty (official: ``is_not_absent``, with ``is_valid_days`` and
    ``is_valid_visiting_city_number``)."""
    filled_days = sum(1 for u in days if u != {} and as_text(u.get("current_city")) != EMPTY_DAY_TEXT)
    if filled_days != q.days:
        return fail(f"Invalid Days: the plan fills {filled_days} day(s), the query asks for {q.days}.")
    cities, bad = city_route(q, days, "Invalid City Number: day {day} current_city {text!r} is not 'from A to B'.",
                             "Invalid City Number: the first day's city should be {org}.")
    if bad is not None:
        return bad
    visited = set(cities)
    visited.discard(q.org)
    if len(visited) != q.visiting_city_number:
        return fail(f"Invalid City Number: the plan visits {len(visited)} cities ({', '.join(sorted(visited))}), "
                    f"the query asks for {q.visiting_city_number}.")
    needed = 6 * q.days
    given = 0
    for i, u in enumerate(days):
        for key in ("transportation", "breakfast", "lunch", "dinner", "attraction", "accommodation"):
            if key not in u:
                return fail(f"No {key.capitalize()} Info in day {i + 1}.")
        cv = as_text(u.get("current_city"))
        t = as_text(u["transportation"])
        if ("from " in cv or "to " in cv) and t in ("", "-"):
            return fail(f"No transportation in day {i + 1} is not allowed.")
        if ("from " not in cv and " to " not in cv) and as_text(u["attraction"]) in ("", "-"):
            return fail(f"No attraction in day {i + 1} is not allowed.")
        if i != q.days - 1 and as_text(u["accommodation"]) in ("", "-"):
            return fail(f"No accommodation in day {i + 1} is not allowed.")
        if any(as_text(u[m]) in ("", "-") for m in MEALS) and "from " not in cv:
            return fail(f"No meal in day {i + 1} is not allowed.")
        given += sum(1 for v in u.values() if filled(v))
    if given / needed < 0.5:
        return fail(f"The absent information is more than 50% ({given} of {needed} fields given).")
    return PASS


COMMONSENSE_RULES: Mapping[str, CommonsenseRule] = MappingProxyType({
    "within_sandbox": within_sandbox,
    "complete_information": complete_information,
    "within_current_city": within_current_city,
    "reasonable_city_route": reasonable_city_route,
    "diverse_restaurants": diverse_restaurants,
    "diverse_attractions": diverse_attractions,
    "non_conflicting_transportation": non_conflicting_transportation,
    "minimum_nights_stay": minimum_nights_stay,
})
"""The commonsense rules by constraint name, in :data:`~envs.travel.verdicts.COMMONSENSE` order."""


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
