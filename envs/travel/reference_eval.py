"""A straightforward row-by-row re-implementation of the official evaluator on the DataFrames:
every entity lookup filters a whole table (``str.contains`` on the name column and equality on
the city), as ``evaluation/*.py`` of OSU-NLP-Group/TravelPlanner does.

It exists for two reasons: it is the speed baseline of ``benchmarks/travel_eval.py``, and the tests
check that :class:`~envs.travel.evaluator.TravelEvaluator` with ``official_quirks=True`` gives the
same verdicts and costs on many plans. Where the official code would raise, the check fails here
(as it does in the fast evaluator).
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from envs.travel.sandbox import SandboxDB
from envs.travel.text import before_paren, from_to, name_city, transport_mode


class ReferenceEvaluator:
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

    # ------------------------------------------------------------------------- commonsense
    def route(self, q, plan):
        cl = []
        for i in range(min(q["days"], len(plan))):
            cv = plan[i]["current_city"]
            if "from" in cv:
                a, b = from_to(cv)
                a, b = before_paren(a), before_paren(b)
                if i == 0 and a != q["org"]:
                    return False
                cl += [a, b]
            else:
                cl.append(before_paren(cv))
        if cl[0] != cl[-1]:
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
        seen = []
        for i in range(min(q["days"], len(plan))):
            for meal in ("breakfast", "lunch", "dinner"):
                v = plan[i].get(meal)
                if v and v != "-":
                    if v in seen:
                        return False
                    seen.append(v)
        return True

    def attractions_diverse(self, q, plan):
        seen = []
        for i in range(min(q["days"], len(plan))):
            v = plan[i].get("attraction")
            if v and v != "-":
                for a in v.split(";")[:-1]:
                    if a in seen:
                        return False
                    seen.append(a)
        return True

    def min_nights(self, q, plan):
        vals = []
        for i in range(min(q["days"], len(plan))):
            if "accommodation" not in plan[i]:
                return False
            vals.append(plan[i]["accommodation"])
        runs = []
        for v in vals:
            if runs and runs[-1][0] == v:
                runs[-1][1] += 1
            else:
                runs.append([v, 1])
        for v, n in runs:
            if v and v not in ("-", ""):
                res = self._hotel(v)
                if len(res) == 1 and n < res.iloc[0]["minimum nights"]:
                    return False
        return True

    def transport_conflict(self, q, plan):
        t0 = plan[0]["transportation"]
        if not t0 or t0 == "-":
            return False
        modes = [transport_mode(t0)]
        for i in range(min(q["days"], len(plan))):
            t = plan[i].get("transportation")
            if t and t != "-":
                modes.append(transport_mode(t))
        return not (("Self-driving" in modes and "Flight" in modes) or ("Taxi" in modes and "Self-driving" in modes))

    def current_city(self, q, plan):
        for i in range(min(q["days"], len(plan))):
            u = plan[i]
            cv = u["current_city"]
            if "from" in cv:
                a, b = from_to(cv)
                cities = [before_paren(a), before_paren(b)]
            else:
                cities = before_paren(cv)
            t = u.get("transportation")
            if t and t != "-":
                for c in cities:
                    if c not in t:
                        return False
            for meal in ("breakfast", "lunch", "dinner"):
                v = u.get(meal)
                if v and v != "-" and not any(c in v for c in cities):
                    return False
            v = u.get("attraction")
            if v and v != "-":
                for a in v.split(";")[:-1]:
                    if not any(c in a for c in cities):
                        return False
            v = u.get("accommodation")
            if v and v != "-" and cities[-1] not in v:
                return False
        return True

    def sandbox(self, q, plan):
        f = self.flights
        for i in range(min(q["days"], len(plan))):
            u = plan[i]
            t = u["transportation"]
            if t and t != "-":
                o, d = from_to(t)
                if o is None or d is None:
                    o, d = from_to(u["current_city"])
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
            for meal in ("breakfast", "lunch", "dinner"):
                v = u.get(meal)
                if v and v != "-" and len(self._restaurant(v)) < 1:
                    return False
            v = u.get("attraction")
            if v and v != "-":
                for a in v.split(";")[:-1]:
                    if len(self._attraction(a)) < 1:
                        return False
            v = u.get("accommodation")
            if v and v != "-" and len(self._hotel(v)) < 1:
                return False
        return True

    def complete(self, q, plan):
        n = min(q["days"], len(plan))
        lens = sum(1 for i in range(n) if plan[i] != {} and plan[i]["current_city"] != "You don't need to fill in the information for this or later days.")
        if lens != q["days"]:
            return False
        cs = set()
        for i in range(n):
            cv = plan[i]["current_city"]
            if "from" in cv:
                a, b = from_to(cv)
                a, b = before_paren(a), before_paren(b)
                if i == 0 and a != q["org"]:
                    return False
                cs |= {a, b}
            else:
                cs.add(before_paren(cv))
        cs.discard(q["org"])
        if len(cs) != q["visiting_city_number"]:
            return False
        total = 0
        for i in range(n):
            u = plan[i]
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
            if (u["breakfast"] in ("", "-") or u["lunch"] in ("", "-") or u["dinner"] in ("", "-")) and "from " not in cv:
                return False
            total += sum(1 for k in u if u[k] and u[k] != "-")
        return total / (6 * q["days"]) >= 0.5

    # ------------------------------------------------------------------------------- hard
    def cost(self, q, plan):
        total = 0.0
        p = q["people_number"]
        f = self.flights
        for i in range(min(q["days"], len(plan))):
            u = plan[i]
            t = u["transportation"]
            if t and t != "-":
                o, d = from_to(t)
                if o is None or d is None:
                    o, d = from_to(u["current_city"])
                if o is not None and d is not None:
                    if "flight number" in t.lower():
                        res = f[f["Flight Number"] == t.split("Flight Number: ")[1].split(",")[0]]
                        if len(res) > 0:
                            total += res["Price"].values[0] * p
                    elif "self-driving" in t.lower() or "taxi" in t.lower():
                        if "self-driving" in t.lower():
                            total += self._road_cost(o, d, "self-driving") * math.ceil(p / 5)
                        else:
                            total += self._road_cost(o, d, "taxi") * math.ceil(p / 4)
            for meal in ("breakfast", "lunch", "dinner"):
                v = u[meal]
                if v and v != "-":
                    res = self._restaurant(v)
                    if len(res) > 0:
                        total += res["Average Cost"].values[0] * p
            v = u["accommodation"]
            if v and v != "-":
                res = self._hotel(v)
                if len(res) > 0:
                    total += res["price"].values[0] * math.ceil(p / res["maximum occupancy"].values[0])
        return float(total)

    def room_rule(self, q, plan):
        rule = q["local_constraint"]["house rule"]
        if rule is None:
            return None
        banned = {"smoking": "No smoking", "parities": "No parties", "children under 10": "No children under 10",
                  "visitors": "No visitors", "pets": "No pets"}.get(rule)
        for i in range(min(q["days"], len(plan))):
            v = plan[i]["accommodation"]
            if v and v != "-":
                res = self._hotel(v)
                if len(res) > 0 and banned and banned in str(res["house_rules"].values[0]):
                    return False
        return True

    def cuisine(self, q, plan):
        wanted = q["local_constraint"]["cuisine"]
        if not wanted:
            return None
        found = set()
        for i in range(min(q["days"], len(plan))):
            u = plan[i]
            for meal in ("breakfast", "lunch", "dinner"):
                v = u[meal]
                if v and v != "-":
                    name, city = name_city(v)
                    if city == q["org"]:
                        break
                    res = self._restaurant(v)
                    if len(res) > 0:
                        for c in wanted:
                            if c in res.iloc[0]["Cuisines"]:
                                found.add(c)
        return len(found) == len(wanted)

    def transport_rule(self, q, plan):
        rule = q["local_constraint"]["transportation"]
        if rule is None:
            return None
        for i in range(min(q["days"], len(plan))):
            t = plan[i]["transportation"]
            if t and t != "-":
                if rule == "no flight" and "Flight" in t:
                    return False
                if rule == "no self-driving" and "Self-driving" in t:
                    return False
        return True

    def room_type(self, q, plan):
        want = q["local_constraint"]["room type"]
        if want is None:
            return None
        for i in range(min(q["days"], len(plan))):
            v = plan[i]["accommodation"]
            if v and v != "-":
                res = self._hotel(v)
                if len(res) > 0:
                    t = res["room type"].values[0]
                    if (want == "not shared room" and t == "Shared room") or (want == "shared room" and t != "Shared room") \
                            or (want == "private room" and t != "Private room") or (want == "entire room" and t != "Entire home/apt"):
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
            "diverse_restaurants": safe(self.restaurants_diverse), "diverse_attractions": safe(self.attractions_diverse),
            "non_conflicting_transportation": safe(self.transport_conflict), "minimum_nights_stay": safe(self.min_nights),
        }
        hard, cost = None, None
        if cs["complete_information"] and cs["within_sandbox"]:
            cost = self.cost(query, plan)
            hard = {"budget": bool(cost <= query["budget"]), "room_rule": self.room_rule(query, plan),
                    "room_type": self.room_type(query, plan), "cuisine": self.cuisine(query, plan),
                    "transportation": self.transport_rule(query, plan)}
        return {"commonsense": cs, "hard": hard, "total_cost": cost}
