"""A straightforward row-by-row re-implementation of the official evaluator on the DataFrames:
every entity lookup filters a whole table (``str.contains`` on the name column and equality on
the city), as ``evaluation/*.py`` of OSU-NLP-Group/TravelPlanner does.

It exists for two reasons: it is the speed baseline of ``benchmarks/travel_eval.py``, and the tests
check that :class:`~envs.travel.evaluator.TravelEvaluator` with ``official_quirks=True`` gives the
same verdicts and costs on many plans. Where the official code would raise, the check fails here
(as it does in the fast evaluator).
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import pandas as pd

from envs.travel.sandbox import SandboxDB
from envs.travel.text import before_paren, from_to, name_city, transport_mode


class RowByRowEvaluator:
    def __init__(self, db: SandboxDB):
        self.flights = db.flights
        self.hotels = db.accommodations
        self.restaurants = db.restaurants
        self.attractions = db.attractions
        self.distances = db.distances
        self.city_state = dict(db.cities)

    # lookups: one DataFrame filter each
    def _rows(self, df: pd.DataFrame, name_col: str, city_col: str, text: str) -> pd.DataFrame:
        name, city = name_city(text)
        return df[(df[name_col].astype(str).str.contains(re.escape(name))) & (df[city_col] == city)]

    def _restaurant(self, text): return self._rows(self.restaurants, "Name", "City", text)
    def _hotel(self, text): return self._rows(self.hotels, "NAME", "city", text)
    def _attraction(self, text): return self._rows(self.attractions, "Name", "City", text)

    def _road_cost(self, origin: str, dest: str, mode: str):
        origin, dest = before_paren(origin), before_paren(dest)
        d = self.distances
        res = d[(d["origin"] == origin) & (d["destination"] == dest)]
        if len(res) == 0:
            return None
        dur, dist = res["duration"].values[0], res["distance"].values[0]
        if pd.isna(dur) or pd.isna(dist) or "day" in str(dur):
            return None
        km = float(str(dist).replace("km", "").replace(",", ""))
        return int(km * 0.05) if "driving" in mode else int(km)

    # the official code's row reading: the query's days, a field that is given, the meals and the
    # attraction list of a day (``split(';')[:-1]``), whether a list repeats an item
    @staticmethod
    def _days(q, plan):
        return plan[: min(q["days"], len(plan))]

    @staticmethod
    def _given(v) -> bool:
        return bool(v) and v != "-"

    def _meals(self, u) -> list:
        return [u.get(m) for m in ("breakfast", "lunch", "dinner") if self._given(u.get(m))]

    def _attractions(self, u) -> list:
        v = u.get("attraction")
        return v.split(";")[:-1] if self._given(v) else []

    def _cities(self, q, plan):
        """The days' cities in order ('from A to B': A, B); None when day 1 does not leave from the origin."""
        cities = []
        for i, u in enumerate(self._days(q, plan)):
            cv = u["current_city"]
            if "from" in cv:
                a, b = from_to(cv)
                a, b = before_paren(a), before_paren(b)
                if i == 0 and a != q["org"]:
                    return None
                cities += [a, b]
            else:
                cities.append(before_paren(cv))
        return cities

    def _transport(self, u):
        """(text, origin, destination) of a day's transportation, the ends from current_city when
        the text has none; None when the day has none."""
        t = u["transportation"]
        if not self._given(t):
            return None
        o, d = from_to(t)
        if o is None or d is None:
            o, d = from_to(u["current_city"])
        return t, o, d

    @staticmethod
    def _distinct(items) -> bool:
        seen = []
        for x in items:
            if x in seen:
                return False
            seen.append(x)
        return True

    # ------------------------------------------------------------------------- commonsense
    def route(self, q, plan):
        cl = self._cities(q, plan)
        if cl is None or cl[0] != cl[-1]:
            return False
        if len(cl) < 3:
            return False
        visited = set()
        i = 0
        while i < len(cl):
            city = cl[i]
            if city in visited and (i != 0 and i != len(cl) - 1):
                return False
            count = 0
            while i < len(cl) and cl[i] == city:
                count += 1
                i += 1
            if count == 1 and 0 < i - 1 < len(cl) - 1:
                return False
            visited.add(city)
        for idx, city in enumerate(cl):
            if city not in self.city_state:
                return False
            if idx not in (0, len(cl) - 1) and q["days"] > 3 and self.city_state[city] != q["dest"]:
                return False
        return True

    def restaurants_diverse(self, q, plan):
        return self._distinct(v for u in self._days(q, plan) for v in self._meals(u))

    def attractions_diverse(self, q, plan):
        return self._distinct(a for u in self._days(q, plan) for a in self._attractions(u))

    def min_nights(self, q, plan):
        vals = []
        for u in self._days(q, plan):
            if "accommodation" not in u:
                return False
            vals.append(u["accommodation"])
        runs = [(v, len(list(group))) for v, group in itertools.groupby(vals)]  # consecutive nights
        for v, n in runs:
            if v and v not in ("-", ""):
                res = self._hotel(v)
                if len(res) == 1 and n < res.iloc[0]["minimum nights"]:
                    return False
        return True

    def transport_conflict(self, q, plan):
        t0 = plan[0]["transportation"]
        if not self._given(t0):
            return False
        ts = [u.get("transportation") for u in self._days(q, plan)]
        modes = [transport_mode(t0)] + [transport_mode(t) for t in ts if self._given(t)]
        return not (("Self-driving" in modes and "Flight" in modes) or ("Taxi" in modes and "Self-driving" in modes))

    def current_city(self, q, plan):
        for u in self._days(q, plan):
            cv = u["current_city"]
            if "from" in cv:
                a, b = from_to(cv)
                cities = [before_paren(a), before_paren(b)]
            else:
                cities = before_paren(cv)  # a string: the checks below go letter by letter (official)
            t = u.get("transportation")
            if self._given(t) and any(c not in t for c in cities):
                return False
            if any(not any(c in v for c in cities) for v in self._meals(u) + self._attractions(u)):
                return False
            v = u.get("accommodation")
            if self._given(v) and cities[-1] not in v:
                return False
        return True

    def sandbox(self, q, plan):
        f = self.flights
        for u in self._days(q, plan):
            if (leg := self._transport(u)) is not None:
                t, o, d = leg
                if "flight number" in t.lower():
                    o, d = before_paren(o), before_paren(d)
                    no = t.split("Flight Number: ")[1].split(",")[0]
                    if len(f[(f["Flight Number"] == no) & (f["OriginCityName"] == o) & (f["DestCityName"] == d)]) < 1:
                        return False
                elif "self-driving" in t.lower() or "taxi" in t.lower():
                    if o is None or d is None:
                        o, d = "-", "-"
                    mode = "self-driving" if "self-driving" in t.lower() else "taxi"
                    if self._road_cost(o, d, mode) is None:
                        return False
            if any(len(self._restaurant(v)) < 1 for v in self._meals(u)):
                return False
            if any(len(self._attraction(a)) < 1 for a in self._attractions(u)):
                return False
            v = u.get("accommodation")
            if self._given(v) and len(self._hotel(v)) < 1:
                return False
        return True

    def complete(self, q, plan):
        days = self._days(q, plan)
        lens = sum(1 for u in days
                   if u != {}
                   and u["current_city"] != "You don't need to fill in the information for this or later days.")
        if lens != q["days"]:
            return False
        cities = self._cities(q, plan)
        if cities is None:
            return False
        cs = set(cities)
        cs.discard(q["org"])
        if len(cs) != q["visiting_city_number"]:
            return False
        total = 0
        for i, u in enumerate(days):
            for key in ("transportation", "breakfast", "lunch", "dinner", "attraction", "accommodation"):
                if key not in u:
                    return False
            cv = u["current_city"]
            if ("from " in cv or "to " in cv) and u["transportation"] in ("", "-"):
                return False
            if ("from " not in cv and " to " not in cv) and u["attraction"] in ("", "-"):
                return False
            if i != q["days"] - 1 and u["accommodation"] in ("", "-"):
                return False
            if ((u["breakfast"] in ("", "-") or u["lunch"] in ("", "-") or u["dinner"] in ("", "-"))
                    and "from " not in cv):
                return False
            total += sum(1 for k in u if self._given(u[k]))
        return total / (6 * q["days"]) >= 0.5

    # ------------------------------------------------------------------------------- hard
    def cost(self, q, plan):
        total = 0.0
        p = q["people_number"]
        f = self.flights
        for u in self._days(q, plan):
            if (leg := self._transport(u)) is not None:
                t, o, d = leg
                if o is not None and d is not None:
                    if "flight number" in t.lower():
                        res = f[f["Flight Number"] == t.split("Flight Number: ")[1].split(",")[0]]
                        if len(res) > 0:
                            total += res["Price"].values[0] * p
                    elif "self-driving" in t.lower():
                        total += self._road_cost(o, d, "self-driving") * math.ceil(p / 5)
                    elif "taxi" in t.lower():
                        total += self._road_cost(o, d, "taxi") * math.ceil(p / 4)
            for v in self._meals(u):
                res = self._restaurant(v)
                if len(res) > 0:
                    total += res["Average Cost"].values[0] * p
            res = self._hotel(u["accommodation"]) if self._given(u["accommodation"]) else []
            if len(res) > 0:
                total += res["price"].values[0] * math.ceil(p / res["maximum occupancy"].values[0])
        return float(total)

    def _hotels(self, q, plan):
        """The first matching row of each day's accommodation that has one."""
        for u in self._days(q, plan):
            v = u["accommodation"]
            res = self._hotel(v) if self._given(v) else []
            if len(res) > 0:
                yield res.iloc[0]

    def room_rule(self, q, plan):
        rule = q["local_constraint"]["house rule"]
        if rule is None:
            return None
        banned = {"smoking": "No smoking", "parties": "No parties", "children under 10": "No children under 10",
                  "visitors": "No visitors", "pets": "No pets"}.get(rule)
        return not any(banned and banned in str(h["house_rules"]) for h in self._hotels(q, plan))

    def cuisine(self, q, plan):
        wanted = q["local_constraint"]["cuisine"]
        if not wanted:
            return None
        found = set()
        for u in self._days(q, plan):
            for meal in ("breakfast", "lunch", "dinner"):
                v = u[meal]
                if self._given(v):
                    name, city = name_city(v)
                    if city == q["org"]:
                        break
                    res = self._restaurant(v)
                    if len(res) > 0:
                        found.update(c for c in wanted if c in res.iloc[0]["Cuisines"])
        return len(found) == len(wanted)

    def transport_rule(self, q, plan):
        rule = q["local_constraint"]["transportation"]
        if rule is None:
            return None
        banned = {"no flight": "Flight", "no self-driving": "Self-driving"}.get(rule)
        ts = [u["transportation"] for u in self._days(q, plan)]
        return not any(banned and self._given(t) and banned in t for t in ts)

    def room_type(self, q, plan):
        want = q["local_constraint"]["room type"]
        if want is None:
            return None
        for h in self._hotels(q, plan):
            t = h["room type"]
            if (want == "not shared room" and t == "Shared room") or (want == "shared room" and t != "Shared room") \
                    or (want == "private room" and t != "Private room") \
                    or (want == "entire room" and t != "Entire home/apt"):
                return False
        return True

    # ---------------------------------------------------------------------------- entry
    def evaluate(self, query: dict[str, Any], plan: list[dict]) -> dict[str, Any]:
        """{'commonsense': {key: bool}, 'hard': {key: bool|None} or None, 'total_cost': float|None}."""
        def safe(fn):
            try:
                return bool(fn(query, plan))
            except Exception:
                return False

        cs = {
            "within_sandbox": safe(self.sandbox), "complete_information": safe(self.complete),
            "within_current_city": safe(self.current_city), "reasonable_city_route": safe(self.route),
            "diverse_restaurants": safe(self.restaurants_diverse),
            "diverse_attractions": safe(self.attractions_diverse),
            "non_conflicting_transportation": safe(self.transport_conflict),
            "minimum_nights_stay": safe(self.min_nights),
        }
        hard, cost = None, None
        if cs["complete_information"] and cs["within_sandbox"]:
            cost = self.cost(query, plan)
            hard = {"budget": bool(cost <= query["budget"]), "room_rule": self.room_rule(query, plan),
                    "room_type": self.room_type(query, plan), "cuisine": self.cuisine(query, plan),
                    "transportation": self.transport_rule(query, plan)}
        return {"commonsense": cs, "hard": hard, "total_cost": cost}
