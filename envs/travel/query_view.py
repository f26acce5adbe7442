"""The benchmark track's option lists: one query's candidates from its own ``reference_information``.

A planner of the benchmark track (envs/travel/tracks.py) reads a :class:`~envs.travel.query.QueryView`
(text, level, days, notes). Its grammar's options come from that query's notes alone, read the way
the benchmark hands them to a sole-planning agent (``Notebook.list_all``, envs/travel/reference_info.py):

* the route cities: the cities of its ``Attractions / Restaurants / Accommodations in C`` notes;
* the origin: the city its transport notes (``Flight from A to B on D``, ``Self-driving / Taxi from A
  to B``) name that has no such note;
* the dates: day 1 is its earliest flight note's date, then one a day for ``days`` days;
* the number of cities to visit: the benchmark's rule by trip length (3 days: 1, 5: 2, 7: 3);
* every restaurant, attraction, accommodation and transport option: the rows of its notes
  (:func:`envs.travel.reference_info.reference_database`), with no other query's rows.

:func:`view_route` is that reading (a :class:`TravelQuery` holding only it: no budget, people or
local constraint), :func:`view_candidates` the candidates
(:func:`envs.travel.candidates.query_candidates` over the query's own database).
"""

from __future__ import annotations

import datetime as dt
import re

from envs.travel.candidates import QueryCandidates, query_candidates
from envs.travel.index import SandboxIndex
from envs.travel.query import QueryView, TravelQuery
from envs.travel.reference_info import reference_database, reference_notes
from envs.travel.tracks import TrackError

__all__ = ["CITIES_BY_DAYS", "option_texts", "rare_letters", "view_candidates", "view_index", "view_route"]

CITIES_BY_DAYS = {3: 1, 5: 2, 7: 3}
"""The benchmark's number of destination cities by trip length (its query generation's rule)."""
_STAY = re.compile(r"^(?:Attractions|Restaurants|Accommodations) in (.+)$")
_FLIGHT = re.compile(r"^Flight from (.+) to (.+) on (\d{4}-\d{2}-\d{2})$")
_GROUND = re.compile(r"^(?:Self-driving|Taxi) from (.+) to (.+)$", re.I)
VIEW_STATE = "(the cities of the query's reference information)"
"""The state a 5 / 7-day view's route cities are put in: the notes' cities, whatever their state."""


def view_route(view: QueryView) -> TravelQuery:
    """What the query's notes say of its route (module docstring), as a :class:`TravelQuery` with no
    budget, people or local constraint; a :class:`TrackError` when the notes do not say it."""
    where = f"query {view.id} reference_information"
    if view.notes is None:
        raise TrackError(f"{where}: missing; 'env.travel.track: benchmark' builds a query's options from its "
                         "own reference information (hub queries with that column)")
    stays, moves, dates = [], [], []
    for note in reference_notes(view.notes, where):
        desc = str(note["Description"]).strip()
        if m := _STAY.match(desc):
            stays.append(m[1].strip())
        elif m := _FLIGHT.match(desc):
            moves += [m[1].strip(), m[2].strip()]
            dates.append(m[3])
        elif m := _GROUND.match(desc):
            moves += [m[1].strip(), m[2].strip()]
    stays = list(dict.fromkeys(stays))
    origins = [c for c in dict.fromkeys(moves) if c not in stays]
    if not stays or not origins or not dates or view.days not in CITIES_BY_DAYS:
        lacks = "stay city" if not stays else "origin" if not origins else "dated flight"
        raise TrackError(f"{where}: names no {lacks} (days {view.days}); the benchmark track reads the route, "
                         "origin and dates from the notes")
    start = dt.date.fromisoformat(min(dates))
    days = tuple((start + dt.timedelta(days=i)).isoformat() for i in range(view.days))
    dest = stays[0] if view.days == 3 else VIEW_STATE
    return TravelQuery(view.id, origins[0], dest, view.days, CITIES_BY_DAYS[view.days], days, people_number=1,
                       query=view.query, level=view.level)


def view_index(view: QueryView) -> SandboxIndex:
    """The query's own database: only the rows of its notes."""
    return SandboxIndex(reference_database(view_route(view), view.notes))


def view_candidates(view: QueryView, index: SandboxIndex | None = None) -> QueryCandidates:
    """Every option a plan for the query may name, from its own notes (``index``: :func:`view_index`, if built)."""
    return query_candidates(index or view_index(view), view_route(view))


def option_texts(c: QueryCandidates) -> list[str]:
    """Every city, entity and transport string of one query's candidates (what its plans may name)."""
    texts = [*c.route_cities, c.org]
    texts += [e for table in (c.restaurants, c.attractions, c.accommodations) for opts in table.values() for e in opts]
    return texts + [t for per_day in c.transport.values() for opts in per_day.values() for t in opts]


def rare_letters(index: SandboxIndex) -> list[str]:
    """Every character of the index's entity and city names that is not printable ASCII (a name's
    line break included), one a text, sorted: an embedded tokenizer's alphabet beyond ASCII, no word."""
    names = [r.name for t in (index.restaurants, index.attractions, index.hotels) for c in index.city_state
             for r in t.in_city(c)]
    return sorted({ch for n in (*names, *index.city_state) for ch in n if not (ch.isascii() and ch.isprintable())})
