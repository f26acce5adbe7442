"""The plan grammar of a travel query: one implementation of :class:`constrained_decoding.protocol.Grammar`.

An itinerary is decoded semi-autoregressively, as OpenAGI's nonlinear plans are: a *head* row
fixes the route, then one *branch* row per free slot of the plan, decoded in parallel::

    head row      from Loch Arden to Marrowgate; Marrowgate; from Marrowgate to Loch Arden </s>
    branch row    day 2 (Marrowgate) lunch: Maple Pizzeria, Marrowgate </s>
    branch row    day 1 (from Loch Arden to Marrowgate) transportation: Flight Number: F0123, from ... </s>

The head is the ``current_city`` of every day: an ordered choice of ``visiting_city_number``
distinct cities of the query's route candidates and the days the moves happen (day 1 leaves the
origin, the last day returns to it, moves on distinct days). A branch row's text starts with a
forced prefix naming its day, that day's ``current_city`` and its field, then one value:

================  =======================================  ====================================
field             stay day (``C``)                          travel day (``from A to B``)
================  =======================================  ====================================
transportation    ``-`` (fixed, no row)                     the day's flights / self-driving /
                                                            taxi strings for the leg A -> B
breakfast/lunch/  a restaurant of C                         ``-`` or a restaurant of A or B
dinner
attraction        1 .. ``max_attractions`` attractions of   ``-`` or one attraction of A or B
                  C, in candidate order (``X, C;Y, C;``)
accommodation     an accommodation of C                     one of B; ``-`` (fixed) on the last day
================  =======================================  ====================================

A slot with one option is fixed by the head (no row). Given the head the slots are independent,
so π_c(plan) = π_c(head) · Π π_c(slot | its prefix) and Σ_plans π_c = 1 exactly; only heads whose
every slot has an option are allowed (no dead end). By construction every plan is delivered (the
official JSON), names only entities of the sandbox in a city of the day (within sandbox, within
current city) and fills every field the official rules require (complete information). Cross-slot
rules -- diverse restaurants and attractions, non-conflicting transportation, minimum nights, the
budget and the local constraints -- are left to the planner (RL learns them).

Why branch prefixes name the day and its city but not the whole head: a branch language that
re-reads the head text is a different language per head, and a 7-day query has ~1000 heads x ~40
slots; keyed by (day, current_city, field) the languages number in the hundreds and share their
entity sub-automata, so a grammar builds in about a second. The branch rows therefore condition
on the prompt and their slot prefix (which carries what the slot's options depend on), not on the
other rows.

Rows are enumerated as texts and tokenised in context by the decoder's generic builder
(:func:`constrained_decoding.rows.build_row_languages`); :meth:`envs.travel.env.TravelPlannerEnv.grammar`
caches one grammar per (tokenizer, query).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from constrained_decoding.protocol import Row
from constrained_decoding.rows import (
    GrammarError,
    RowLanguageGrammar,
    RowLanguages,
    RowText,
    build_row_languages,
)
from envs.travel.candidates import QueryCandidates
from envs.travel.plans import Plan, PlanParseError, format_plan, make_day, parse_plan
from envs.travel.text import as_text, attractions_text

__all__ = ["GrammarError", "PlanOutsideGrammar", "TravelPlanGrammar", "build_travel_grammar",
           "enumerate_routes", "head_text", "slot_options", "slot_text"]

SLOT_FIELDS = ("transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
"""The fields of a day record after ``current_city``, in the official order (``make_day``'s)."""
DAY_KEYS = frozenset(("days", "current_city", *SLOT_FIELDS))
HEAD_SEP = "; "


class PlanOutsideGrammar(PlanParseError):
    """A plan the grammar cannot produce (probability 0); the message says which day and field."""

    def __init__(self, message: str):
        super().__init__(message, "outside_grammar")


def head_text(route: Sequence[str]) -> str:
    """The head row's text: every day's ``current_city``."""
    return HEAD_SEP.join(route)


def slot_text(day: int, current_city: str, field_name: str, value: str) -> str:
    """A branch row's text: the forced prefix (day, its city, the field), then the value."""
    return f"day {day} ({current_city}) {field_name}: {value}"


def _cities(current_city: str) -> list[str]:
    if current_city.startswith("from ") and " to " in current_city:
        a, b = current_city[5:].split(" to ", 1)
        return [a, b]
    return [current_city]


def slot_options(c: QueryCandidates, day: int, current_city: str, field_name: str,
                 max_attractions: int = 2) -> list[str]:
    """The values ``field_name`` may take on day ``day`` (1-based) whose city is ``current_city``."""
    cities = _cities(current_city)
    travel = len(cities) == 2
    if field_name == "transportation":
        return list(c.transport.get((cities[0], cities[1]), {}).get(day - 1, [])) if travel else ["-"]
    if field_name in ("breakfast", "lunch", "dinner"):  # one option per plan string (the tables repeat names)
        names = list(dict.fromkeys(r for city in cities for r in c.restaurants.get(city, [])))
        return ["-", *names] if travel else names
    if field_name == "attraction":
        names = list(dict.fromkeys(a for city in cities for a in c.attractions.get(city, [])))
        if travel:
            return ["-", *(attractions_text([a]) for a in names)]
        return [attractions_text(list(combo)) for k in range(1, max_attractions + 1)
                for combo in itertools.combinations(names, k)]
    if field_name == "accommodation":
        return ["-"] if day == c.days else list(dict.fromkeys(c.accommodations.get(cities[-1], [])))
    raise ValueError(f"unknown plan field {field_name!r}; expected one of {', '.join(SLOT_FIELDS)}")


def enumerate_routes(c: QueryCandidates) -> Iterator[tuple[str, ...]]:
    """Every day's ``current_city`` for each route shape: ``visiting_city_number`` distinct route
    cities in order, moves on day 1, on distinct days in between and on the last day."""
    k, days = c.visiting_city_number, c.days
    if k < 1 or days < k + 1:
        return
    for cities in itertools.permutations(c.route_cities, k):
        stops = (c.org, *cities, c.org)
        for inner in itertools.combinations(range(2, days), k - 1):
            moves = (1, *inner, days)
            route, j = [], 0
            for d in range(1, days + 1):
                if j < len(moves) and moves[j] == d:
                    route.append(f"from {stops[j]} to {stops[j + 1]}")
                    j += 1
                else:
                    route.append(stops[j])
            yield tuple(route)


SlotKey = tuple[int, str, str]  # (day, current_city, field)


@dataclass(eq=False)
class TravelPlanGrammar(RowLanguageGrammar):
    """The itineraries of one query as decoder rows: a :class:`constrained_decoding.protocol.Grammar`.

    ``routes[h]`` is head ``h``'s ``current_city`` per day; ``slots[h]`` the ``(day, field)`` of
    its branch rows in order and ``branch_start[h]`` their start states; ``fixed[h]`` the values of
    the slots with a single option."""

    query_id: int
    days: int
    max_attractions: int
    candidates: QueryCandidates = field(repr=False)
    rows: RowLanguages = field(repr=False)
    routes: tuple[tuple[str, ...], ...] = ()
    slots: tuple[tuple[tuple[int, str], ...], ...] = field(default=(), repr=False)
    branch_start: tuple[tuple[int, ...], ...] = field(default=(), repr=False)
    fixed: tuple[dict[tuple[int, str], str], ...] = field(default=(), repr=False)
    options: dict[SlotKey, list[str]] = field(default_factory=dict, repr=False)
    language: dict[SlotKey, int] = field(default_factory=dict, repr=False)
    _head_of: dict[tuple[str, ...], int] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ the Grammar protocol
    branching = True

    def branch_starts(self, root_tokens: Sequence[int]) -> tuple[int, ...]:
        return self.branch_start[self._meaning(self.root, root_tokens)]

    def assemble(self, root_tokens: Sequence[int], branch_tokens: Sequence[Sequence[int]] = ()) -> Plan:
        """The official JSON plan (a list of day records) of decoded rows."""
        h = self._meaning(self.root, root_tokens)
        if len(branch_tokens) != len(self.slots[h]):
            raise ValueError(f"expected {len(self.slots[h])} branch rows, got {len(branch_tokens)}")
        values = dict(self.fixed[h])
        for (slot, start, toks) in zip(self.slots[h], self.branch_start[h], branch_tokens):
            values[slot] = self._meaning(start, toks)
        return self._plan(h, values)

    def rows_for(self, plan: Plan | str) -> list[Row]:
        """The rows of a plan (text or day records); :class:`PlanOutsideGrammar` if the grammar cannot
        produce it (:class:`envs.travel.plans.PlanParseError` if it is not a plan at all)."""
        days = parse_plan(plan)
        if len(days) != self.days:
            raise PlanOutsideGrammar(f"the plan has {len(days)} day(s); query {self.query_id} asks for {self.days}")
        for i, u in enumerate(days):
            if set(u) != DAY_KEYS:
                raise PlanOutsideGrammar(f"day {i + 1} has the fields {sorted(u)}, expected {sorted(DAY_KEYS)}")
            if u["days"] != i + 1:
                raise PlanOutsideGrammar(f"day record {i + 1} says days={u['days']!r}")
        route = tuple(as_text(u["current_city"]) for u in days)
        h = self._head_of.get(route)
        if h is None:
            raise PlanOutsideGrammar(f"the route {head_text(route)!r} is not one of the grammar's routes "
                                     f"(visit {self.candidates.visiting_city_number} of "
                                     f"{', '.join(self.candidates.route_cities)}; day 1 leaves "
                                     f"{self.candidates.org}, the last day returns)")
        for (d, f), v in self.fixed[h].items():
            if as_text(days[d - 1][f]) != v:
                raise PlanOutsideGrammar(f"day {d} {f} must be {v!r}, not {days[d - 1][f]!r}")
        out: list[Row] = [(self.root, self.rows.tokens(0, h))]
        for (d, f), start in zip(self.slots[h], self.branch_start[h]):
            v = as_text(days[d - 1][f])
            try:
                out.append((start, self.rows.tokens(self.rows.language_of(start), v)))
            except KeyError:
                raise PlanOutsideGrammar(f"day {d} ({route[d - 1]}) {f} {v!r} is not an option "
                                         f"(it must name a candidate of the day's cities)") from None
        return out

    def format(self, plan: Plan) -> str:
        return format_plan(plan)

    def enumerate(self) -> Iterator[Plan]:
        for h in range(len(self.routes)):
            choices = [self.options[(d, self.routes[h][d - 1], f)] for d, f in self.slots[h]]
            for combo in itertools.product(*choices):
                yield self._plan(h, {**self.fixed[h], **dict(zip(self.slots[h], combo))})

    # ---------------------------------------------------------------------------- travel's
    def _plan(self, h: int, values: dict[tuple[int, str], str]) -> Plan:
        return [make_day(d, cc, *(values[(d, f)] for f in SLOT_FIELDS))
                for d, cc in enumerate(self.routes[h], 1)]

    def _meaning(self, start: int, tokens: Sequence[int]):
        try:
            return self.rows.meaning(start, tokens)
        except (KeyError, ValueError):
            raise ValueError(f"token ids {list(tokens)} are not a complete row of {self}") from None

    @property
    def num_plans(self) -> int:
        total = 0
        for h in range(len(self.routes)):
            n = 1
            for d, f in self.slots[h]:
                n *= len(self.options[(d, self.routes[h][d - 1], f)])
            total += n
        return total

    def __repr__(self) -> str:
        return (f"TravelPlanGrammar(query {self.query_id}, {self.days} days, {len(self.routes)} routes, "
                f"{len(self.language)} slot languages, {self.dfa.num_states} states)")


def build_travel_grammar(tokenizer, candidates: QueryCandidates, max_attractions: int = 2) -> TravelPlanGrammar:
    """Enumerate the query's heads and slot rows, tokenise them in context, build their DFA (uncached).

    ``candidates`` is :meth:`envs.travel.env.TravelPlannerEnv.candidates` of the query (or any
    restriction of it: tests shrink it to enumerate every plan)."""
    c = candidates
    if max_attractions < 1:
        raise ValueError(f"max_attractions must be >= 1, got {max_attractions}")
    options: dict[SlotKey, list[str]] = {}

    def opts(key: SlotKey) -> list[str]:
        if key not in options:
            options[key] = slot_options(c, *key, max_attractions=max_attractions)
        return options[key]

    routes, slots, fixed = [], [], []
    for route in enumerate_routes(c):
        free, one = [], {}
        for d, cc in enumerate(route, 1):
            for f in SLOT_FIELDS:
                o = opts((d, cc, f))
                if not o:
                    break
                if len(o) == 1:
                    one[(d, f)] = o[0]
                else:
                    free.append((d, f))
            else:
                continue
            break
        else:  # every slot of every day has an option
            routes.append(route)
            slots.append(tuple(free))
            fixed.append(one)
    where = f"travel query {c.query_id}"
    if not routes:
        raise GrammarError(f"no complete itinerary exists for {where}: no route of "
                           f"{c.visiting_city_number} of {c.route_cities} has transport, restaurants, "
                           "attractions and accommodations on every day")
    used = sorted({(d, r[d - 1], f) for r, s in zip(routes, slots) for d, f in s})
    language = {key: k for k, key in enumerate(used, 1)}
    languages: list[list[RowText]] = [[RowText(h, head_text(r)) for h, r in enumerate(routes)]]
    languages += [[RowText(v, slot_text(d, cc, f, v)) for v in opts((d, cc, f))] for d, cc, f in used]
    rows = build_row_languages(tokenizer, languages, where=where)
    branch_start = tuple(tuple(rows.starts[language[(d, r[d - 1], f)]] for d, f in s) for r, s in zip(routes, slots))
    return TravelPlanGrammar(
        query_id=c.query_id, days=c.days, max_attractions=max_attractions, candidates=c, rows=rows,
        routes=tuple(routes), slots=tuple(slots), branch_start=branch_start, fixed=tuple(fixed),
        options={k: options[k] for k in used}, language=language,
        _head_of={r: h for h, r in enumerate(routes)})
