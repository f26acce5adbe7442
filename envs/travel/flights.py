"""Generated flights for a database folder that has no flights table (the benchmark's public tables:
the official ``flights/clean_Flights_2022.csv`` is distributed separately).

:func:`generate_flights` is seeded and deterministic; its rows are in the official columns
(:data:`envs.travel.schema.COLUMNS` ``["flights"]``) and every one of them is made up. The model
(``FLIGHTS_MODEL``, recorded in ``SandboxDB.meta``):

* **airports** -- the cities of the city set that the tables locate: a city's location is the
  median latitude / longitude of its rows in ``attractions/attractions.csv`` (a city more than
  2,500 km from every other city of its state: the median of those instead). A city with no
  attraction row has no location, hence no airport (it is still reachable by road where the
  distance matrix has a row for it).
* **distance** -- the great-circle distance between the two locations, capped by the road distance
  of ``googleDistanceMatrix/distance.csv`` where it has the pair (a flight is never longer than the
  drive); ``Distance`` in miles, as the real table.
* **routes** -- each airport has a seeded hub weight ``w ~ lognormal(0, 0.9)``; an unordered pair
  of airports has a route with probability ``min(0.9, 0.025 * w_a * w_b)``, and every airport is
  linked to its two nearest hubs (the 12% largest weights) so none is isolated. A route is flown
  both ways. No route is longer than 9,000 km (about Honolulu - New York; a longer pair is a
  namesake the tables geocode abroad).
* **schedule** -- on each day of March 2022 and each direction, ``Poisson(0.3 + 0.3 * min(w_a, w_b,
  3))`` flights, departing uniformly between 05:00 and 22:30; duration ``km / 12.5 + 35`` minutes
  (about 750 km/h plus taxiing) plus ``N(0, 8)`` noise, at least 30.
* **price** (dollars per person) -- ``(45 + 0.12 * km) * lognormal(0, 0.32) * U(0.9, 1.15)``,
  rounded: the synthetic sandbox's fare model.
* flight numbers ``F`` + 7 distinct digits.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

FLIGHTS_MODEL = "rltf-generated-flights-v1"
MARCH_2022 = tuple(f"2022-03-{d:02d}" for d in range(1, 32))
HUB_SHARE = 0.12
STRAY_KM = 2500.0
MAX_ROUTE_KM = 9000.0  # about Honolulu - New York: no domestic route is longer


def city_locations(cities: dict[str, str], attractions: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """City -> (lat, lon): the median of its attraction rows (cities of the city set only). A city
    farther than ``STRAY_KM`` from every other located city of its state (the tables geocode a few
    namesakes abroad: Melbourne, Salisbury) is moved to the median of those others."""
    a = attractions[attractions["City"].isin(list(cities))]
    lat = pd.to_numeric(a["Latitude"], errors="coerce")
    lon = pd.to_numeric(a["Longitude"], errors="coerce")
    med = pd.DataFrame({"City": a["City"], "lat": lat, "lon": lon}).dropna().groupby("City", sort=False).median()
    loc = {c: (float(med.at[c, "lat"]), float(med.at[c, "lon"])) for c in cities if c in med.index}
    out = dict(loc)
    for c, p in loc.items():
        others = [loc[o] for o in loc if o != c and cities[o] == cities[c]]
        if others and min(_great_circle_km(p, q) for q in others) > STRAY_KM:
            out[c] = (float(np.median([q[0] for q in others])), float(np.median([q[1] for q in others])))
    return out


def _great_circle_km(p: tuple[float, float], q: tuple[float, float]) -> float:
    la1, lo1, la2, lo2 = map(math.radians, (*p, *q))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * 6371.0 * math.asin(min(1.0, math.sqrt(h)))


def _road_km(distances: pd.DataFrame) -> dict[frozenset, float]:
    out: dict[frozenset, float] = {}
    for o, d, dist in zip(distances["origin"].tolist(), distances["destination"].tolist(),
                          distances["distance"].tolist()):
        try:
            km = float(str(dist).replace("km", "").replace(",", "").strip())
        except ValueError:
            continue
        if km == km:  # not NaN
            key = frozenset((str(o), str(d)))
            out[key] = min(km, out.get(key, km))
    return out


def generate_flights(cities: dict[str, str], attractions: pd.DataFrame, distances: pd.DataFrame,
                     seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """``(flights table, meta)`` over ``cities`` (see the module docstring for the model)."""
    rng = np.random.default_rng([seed, 20220301])
    loc = city_locations(cities, attractions)
    ports = [c for c in cities if c in loc]
    if len(ports) < 2:
        return pd.DataFrame({c: [] for c in _COLUMNS}), {"airports": len(ports), "routes": 0}
    road = _road_km(distances)
    weight = np.exp(rng.normal(0.0, 0.9, len(ports)))
    n_hubs = max(2, int(round(HUB_SHARE * len(ports))))
    hubs = set(np.argsort(-weight, kind="stable")[:n_hubs].tolist())
    n = len(ports)
    km = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            d = _great_circle_km(loc[ports[i]], loc[ports[j]])
            r = road.get(frozenset((ports[i], ports[j])))
            km[i, j] = km[j, i] = max(30.0, min(d, r) if r is not None else d)
    draw = rng.random((n, n))
    routes: set[tuple[int, int]] = set()
    for i in range(n):
        for j in range(i + 1, n):
            if draw[i, j] < min(0.9, 0.025 * weight[i] * weight[j]) and km[i, j] <= MAX_ROUTE_KM:
                routes.add((i, j))
        near = sorted((h for h in hubs if h != i and km[i, h] <= MAX_ROUTE_KM), key=lambda h: (km[i, h], h))[:2]
        routes.update((min(i, h), max(i, h)) for h in near)
    legs = [(i, j) for i, j in sorted(routes)] + [(j, i) for i, j in sorted(routes)]
    lam = np.array([0.3 + 0.3 * min(weight[i], weight[j], 3.0) for i, j in legs])
    counts = rng.poisson(lam[:, None], size=(len(legs), len(MARCH_2022)))
    leg_idx, day_idx = np.nonzero(counts)
    reps = counts[leg_idx, day_idx]
    leg_idx, day_idx = np.repeat(leg_idx, reps), np.repeat(day_idx, reps)
    m = len(leg_idx)
    dist = np.array([km[legs[k][0], legs[k][1]] for k in leg_idx])
    price = np.round((45 + 0.12 * dist) * np.exp(rng.normal(0, 0.32, m)) * rng.uniform(0.9, 1.15, m))
    dur = np.round(dist / 12.5 + 35 + rng.normal(0, 8, m)).clip(30).astype(np.int64)
    dep = rng.integers(5 * 60, 22 * 60 + 30, m)
    arr = (dep + dur) % 1440
    numbers = rng.choice(9_900_000, size=m, replace=False) + 100_000
    order = np.lexsort((dep, day_idx, leg_idx))
    hm = [f"{h:02d}:{mm:02d}" for h in range(24) for mm in range(60)]
    flights = pd.DataFrame({
        "Flight Number": [f"F{v:07d}" for v in numbers.tolist()],
        "Price": price[order].astype(np.int64),
        "DepTime": [hm[v] for v in dep[order].tolist()],
        "ArrTime": [hm[v] for v in arr[order].tolist()],
        "ActualElapsedTime": [f"{v // 60} hours {v % 60} minutes" for v in dur[order].tolist()],
        "FlightDate": [MARCH_2022[v] for v in day_idx[order].tolist()],
        "OriginCityName": [ports[legs[k][0]] for k in leg_idx[order].tolist()],
        "DestCityName": [ports[legs[k][1]] for k in leg_idx[order].tolist()],
        "Distance": np.round(dist[order] * 0.621, 0),
    })
    meta = {"model": FLIGHTS_MODEL, "seed": seed, "airports": len(ports), "hubs": len(hubs),
            "routes": len(routes), "rows": m, "dates": f"{MARCH_2022[0]}..{MARCH_2022[-1]}"}
    return flights, meta


_COLUMNS = ("Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate", "OriginCityName",
            "DestCityName", "Distance")
