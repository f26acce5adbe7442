"""The benchmark's search tools over the sandbox, for planners that look things up.

Each tool returns a DataFrame in the real table's columns (empty when nothing matches), and
:meth:`TravelTools.call` runs the ReAct-style action text the TravelPlanner agents emit --
``FlightSearch[Origin, Destination, 2022-03-16]``, ``AccommodationSearch[City]``,
``RestaurantSearch[City]``, ``AttractionSearch[City]``,
``GoogleDistanceMatrix[Origin, Destination, self-driving|taxi]``, ``CitySearch[State]`` -- and
returns text (a table, or a sentence saying there is nothing / what is wrong).
"""

from __future__ import annotations

import re

import pandas as pd

from envs.travel.index import Attraction, Flight, Hotel, Restaurant, SandboxIndex
from envs.travel.schema import COLUMNS
from envs.travel.text import before_paren

_ACTION = re.compile(r"^\s*(\w+)\s*\[(.*)\]\s*$", re.S)
TOOL_NAMES = ("FlightSearch", "AccommodationSearch", "RestaurantSearch", "AttractionSearch",
              "GoogleDistanceMatrix", "CitySearch")


class TravelTools:
    def __init__(self, index: SandboxIndex):
        self.index = index
        db = index.db
        self._by_city = {
            "accommodations": {c: g for c, g in db.accommodations.groupby("city", sort=False)},
            "restaurants": {c: g for c, g in db.restaurants.groupby("City", sort=False)},
            "attractions": {c: g for c, g in db.attractions.groupby("City", sort=False)},
        }
        columns = {"accommodations": "city", "restaurants": "City", "attractions": "City"}
        self._city_rows = {t: getattr(db, t).groupby(c, sort=False).indices for t, c in columns.items()}
        self._flight_rows: dict[tuple[str, str, str], list[int]] = {}
        f = db.flights
        for i, key in enumerate(zip(f["OriginCityName"].tolist(), f["DestCityName"].tolist(),
                                    f["FlightDate"].tolist())):
            self._flight_rows.setdefault(key, []).append(i)

    def _city_table(self, table: str, city: str) -> pd.DataFrame:
        g = self._by_city[table].get(before_paren(city).strip())
        return (g if g is not None else pd.DataFrame(columns=COLUMNS[table])).reset_index(drop=True)

    def flights(self, origin: str, dest: str, date: str) -> pd.DataFrame:
        key = (before_paren(origin).strip(), before_paren(dest).strip(), date.strip())
        rows = self._flight_rows.get(key)
        if not rows:
            return pd.DataFrame(columns=COLUMNS["flights"])
        return self.index.db.flights.iloc[rows].reset_index(drop=True)

    def flight_records(self, origin: str, dest: str, date: str) -> list[Flight]:
        """The rows :meth:`flights` returns, as the index's records (same rows, same order; no DataFrame)."""
        key = (before_paren(origin).strip(), before_paren(dest).strip(), date.strip())
        flights = self.index.flights
        return [flights[i] for i in self._flight_rows.get(key, ())]

    def city_records(self, table: str, city: str) -> list[Hotel] | list[Restaurant] | list[Attraction]:
        """The rows :meth:`accommodations` / :meth:`restaurants` / :meth:`attractions` (``table``)
        return for ``city``, as the index's records (same rows, same order; no DataFrame)."""
        items = {"accommodations": self.index.hotels, "restaurants": self.index.restaurants,
                 "attractions": self.index.attractions}[table].items
        return [items[i] for i in self._city_rows[table].get(before_paren(city).strip(), ())]

    def accommodations(self, city: str) -> pd.DataFrame:
        return self._city_table("accommodations", city)

    def restaurants(self, city: str) -> pd.DataFrame:
        return self._city_table("restaurants", city)

    def attractions(self, city: str) -> pd.DataFrame:
        return self._city_table("attractions", city)

    def distance(self, origin: str, dest: str, mode: str = "self-driving") -> dict:
        """{'origin', 'destination', 'mode', 'duration', 'distance', 'cost'} (None where unknown);
        cost per car as the official tool derives it (self-driving 0.05 / km, taxi 1 / km)."""
        if mode not in ("self-driving", "taxi"):
            raise ValueError(f"mode must be 'self-driving' or 'taxi', got {mode!r}")
        o, d = before_paren(origin).strip(), before_paren(dest).strip()
        r = self.index.road(o, d)
        return {"origin": o, "destination": d, "mode": mode,
                "duration": None if r is None else r.duration, "distance": None if r is None else r.distance,
                "cost": None if r is None else r.cost(mode)}

    def cities(self, state: str) -> list[str]:
        return list(self.index.states.get(state.strip(), []))

    # ----------------------------------------------------------------------------- text API
    def call(self, action: str) -> str:
        m = _ACTION.match(action)
        if not m:
            return f"Invalid action {action!r}: expected Tool[arguments], one of {', '.join(TOOL_NAMES)}."
        name, args = m.group(1), [a.strip() for a in m.group(2).split(",")] if m.group(2).strip() else []
        want = {"FlightSearch": 3, "AccommodationSearch": 1, "RestaurantSearch": 1, "AttractionSearch": 1,
                "GoogleDistanceMatrix": 3, "CitySearch": 1}
        if name not in want:
            return f"Unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}."
        if len(args) != want[name]:
            return f"{name} takes {want[name]} argument(s), got {len(args)}: {args}."
        if name == "FlightSearch":
            df = self.flights(*args)
            return (df.to_string(index=False) if len(df)
                    else f"There is no flight from {args[0]} to {args[1]} on {args[2]}.")
        if name == "GoogleDistanceMatrix":
            mode = args[2].lower()
            if mode not in ("self-driving", "taxi"):
                return "The mode must be self-driving or taxi."
            r = self.distance(args[0], args[1], mode)
            if r["cost"] is None:
                return f"{mode}, from {r['origin']} to {r['destination']}, no valid information."
            return (f"{mode}, from {r['origin']} to {r['destination']}, duration: {r['duration']}, "
                    f"distance: {r['distance']}, cost: {r['cost']}")
        if name == "CitySearch":
            cs = self.cities(args[0])
            return ", ".join(cs) if cs else f"There is no state named {args[0]} in the database."
        table = {"AccommodationSearch": "accommodations", "RestaurantSearch": "restaurants",
                 "AttractionSearch": "attractions"}[name]
        df = self._city_table(table, args[0])
        return df.to_string(index=False) if len(df) else f"There is no {table[:-1]} in {args[0]}."
