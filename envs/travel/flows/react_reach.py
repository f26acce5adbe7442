"""Which ReAct searches keep a complete itinerary within reach of the step budget.

ReAct's plan is decoded under the plan grammar of the entities it gathered
(:func:`envs.travel.grammar.build_travel_grammar`): a route of ``visiting_city_number`` distinct
route cities, moves on day 1, on distinct days in between and on the last day, and on every day an
option for every field. That needs, for a route ``c_1 .. c_k`` and its move days ``m_0 = 1 < m_1 <
.. < m_k = days``:

* a hotel of every ``c_i`` (each arrival day before the last names one);
* restaurants and attractions of ``c_i`` when it has a stay day (``m_i - m_{i-1} >= 2``): a travel
  day may say ``-`` for meals and attractions;
* transport on every leg ``stop_j -> stop_{j+1}`` on day ``m_j``: a flight that date, or a
  drive (self-driving or taxi), which serves every day.

Each search supplies at most one of these items (a hotel, restaurant or attraction search one
city's, a flight search one leg on one date, a distance search one leg on every date); a route
never repeats an item. So the searches a route still needs is the count of its items not gathered
yet (infinite when the tables cannot supply one), the fewest over every route and schedule is
``needed``, and a search keeps ``needed <= steps left after it`` iff ``needed`` is below the steps
left now, or the search supplies an item of a route that needs exactly ``needed``.
:meth:`Reach.status` returns ``needed`` and, when the budget binds, those searches: the ReAct
agent offers only them, and ``Finish`` only once ``needed`` is 0, so a pass that starts with a
budget that fits always ends with a complete itinerary in its gathered entities (delivery).
What a search would return is read from the same tools the search runs (their records, without
the text tables). Counts per schedule are vectorised over the permutations of route cities (a
state's 7-day query: 23 cities, 10,626 orders x 10 schedules).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["MODES", "Reach", "ReachStatus"]

MODES = ("self-driving", "taxi")
_FAR = 10**6  # an item the tables cannot supply: no route through it is reachable


@dataclass(frozen=True)
class ReachStatus:
    """``needed``: the fewest searches still needed for a complete itinerary (``None``: none exists
    in the tables); ``useful``: when those fill the steps left exactly, the searches that keep one
    within reach (else ``None``: any search does)."""

    needed: int | None
    useful: frozenset[str] | None


class Reach:
    """The searches a complete itinerary of one query needs (see the module docstring). ``tools``:
    the env's :class:`envs.travel.tools.TravelTools`; ``q``: the query; ``cities``: its route cities."""

    def __init__(self, tools, q, cities):
        self.q, self.cities = q, list(cities)
        self.stops = [q.org, *self.cities]
        n, k, days = len(self.cities), q.visiting_city_number, q.days
        self.perms = np.array(list(itertools.permutations(range(n), k)), dtype=np.int64).reshape(-1, max(k, 1))
        self.schedules = ([(1, *inner, days) for inner in itertools.combinations(range(2, days), k - 1)]
                          if 1 <= k and days >= k + 1 and n >= k else [])
        self.can = {table: np.array([bool(tools.city_records(table, c)) for c in self.cities], dtype=bool)
                    for table in ("accommodations", "restaurants", "attractions")}
        s = len(self.stops)
        self.can_flight = np.zeros((s, s, days), dtype=bool)
        self.can_road = {mode: np.zeros((s, s), dtype=bool) for mode in MODES}
        for a, b in itertools.permutations(range(s), 2):
            x, y = self.stops[a], self.stops[b]
            for i, date in enumerate(q.date[:days]):
                self.can_flight[a, b, i] = bool(tools.flight_records(x, y, date))
            for mode in MODES:
                self.can_road[mode][a, b] = tools.distance(x, y, mode)["cost"] is not None

    def status(self, hotels, restaurants, attractions, flights, ground, left: int) -> ReachStatus:
        """``needed`` given what was gathered -- ``hotels`` / ``restaurants`` / ``attractions``: city
        -> results; ``flights``: (origin, destination, date index) -> results; ``ground``: (origin,
        destination) -> drives -- and, when ``needed == left``, the searches that keep it within reach."""
        if not self.schedules:
            return ReachStatus(None, None)
        have = {"accommodations": hotels, "restaurants": restaurants, "attractions": attractions}
        city = {t: np.where([bool(have[t].get(c)) for c in self.cities], 0, np.where(self.can[t], 1, _FAR))
                for t in self.can}
        s, days = len(self.stops), self.q.days
        got = np.zeros((s, s, days), dtype=bool)
        index = {c: j for j, c in enumerate(self.stops)}
        for (a, b, i), found in flights.items():
            if found and a in index and b in index:
                got[index[a], index[b], i] = True
        for (a, b), found in ground.items():
            if found and a in index and b in index:
                got[index[a], index[b], :] = True
        can_leg = self.can_flight | (self.can_road[MODES[0]] | self.can_road[MODES[1]])[:, :, None]
        leg = np.where(got, 0, np.where(can_leg, 1, _FAR))
        costs = [self._costs(sched, city, leg) for sched in self.schedules]
        needed = int(min(c.min() for c in costs))
        if needed >= _FAR:
            return ReachStatus(None, None)
        if needed != left:  # any search keeps it within reach (or nothing can: the agent says so)
            return ReachStatus(needed, None)
        useful: set[str] = set()
        for sched, cost in zip(self.schedules, costs):
            best = self.perms[cost == needed]
            if len(best):
                useful |= self._missing(sched, best, city, leg)
        return ReachStatus(needed, frozenset(useful))

    def _stops(self, perms: np.ndarray) -> list[np.ndarray]:
        """Each leg's (from, to) stop indices (0: the origin) for every row of ``perms``."""
        k = perms.shape[1]
        origin = np.zeros(len(perms), dtype=np.int64)
        seq = [origin, *(perms[:, i] + 1 for i in range(k)), origin]
        return [np.stack([seq[j], seq[j + 1]], axis=1) for j in range(k + 1)]

    def _costs(self, sched, city, leg) -> np.ndarray:
        p, k = self.perms, self.perms.shape[1]
        cost = city["accommodations"][p].sum(axis=1)
        for i in range(k):
            if sched[i + 1] - sched[i] >= 2:  # c_i has a stay day: its meals and attractions
                cost = cost + city["restaurants"][p[:, i]] + city["attractions"][p[:, i]]
        for j, pair in enumerate(self._stops(p)):
            cost = cost + leg[pair[:, 0], pair[:, 1], sched[j] - 1]
        return cost

    def _missing(self, sched, best: np.ndarray, city, leg) -> set[str]:
        """The searches supplying a missing item of the routes ``best`` on schedule ``sched``."""
        out: set[str] = set()
        names = {"accommodations": "AccommodationSearch", "restaurants": "RestaurantSearch",
                 "attractions": "AttractionSearch"}
        for i in range(best.shape[1]):
            tables = ["accommodations"] + (["restaurants", "attractions"] if sched[i + 1] - sched[i] >= 2 else [])
            for c in np.unique(best[:, i]).tolist():
                out.update(f"{names[t]}[{self.cities[c]}]" for t in tables if city[t][c] == 1)
        for j, pair in enumerate(self._stops(best)):
            day = sched[j] - 1
            for a, b in np.unique(pair, axis=0).tolist():
                if leg[a, b, day] != 1:
                    continue
                x, y = self.stops[a], self.stops[b]
                if self.can_flight[a, b, day]:
                    out.add(f"FlightSearch[{x}, {y}, {self.q.date[day]}]")
                out.update(f"GoogleDistanceMatrix[{x}, {y}, {mode}]" for mode in MODES if self.can_road[mode][a, b])
        return out
