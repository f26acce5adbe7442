"""The sandbox database: generated in code (seeded) in the real TravelPlanner schema, exported to
and loaded from the public repository's ``database/`` layout (:class:`SandboxDB`, the export and the
loader: ``sandbox/files.py``, re-exported here).

``python -m envs.travel.sandbox --export DIR [--seed 0] [--no-plans]`` (``sandbox/__main__.py``,
by :func:`envs.travel.interchange.export_all`) writes ``DIR/database/...`` (the six files of
:data:`envs.travel.schema.DATABASE_FILES`), ``DIR/queries/{train,validation,test}.csv`` (hub dataset
columns) and ``DIR/plans/solver_{split}.jsonl`` (official submission format, the solver's plans).

:func:`load_database` reads such a directory -- ours or the real one -- the way the official tools
do (``pd.read_csv(path).dropna()`` then the tool's columns), with a clear error naming a missing
file or column. The benchmark's public tables have no flights table: ``load_database(dir,
flights="auto")`` then generates one (:mod:`envs.travel.flights`, seeded; marked in ``source`` and
``meta["flights"]``) and uses the folder's ``flights/clean_Flights_2022.csv`` instead when present.

Generated flights are never written under the official file name: :func:`export_database` writes
them to ``flights/generated_Flights_seed<seed>.csv`` (:func:`generated_flights_file`; the synthetic
sandbox's flights and those generated for the real tables alike), beside a
``generated_Flights_seed<seed>.json`` that says how they were made, and only a database loaded from
the official file exports ``flights/clean_Flights_2022.csv``. :func:`load_database` reads such a
file back as generated flights (``flights="generated"``, or ``"auto"`` when the folder has no
official file), marked so in ``source`` and ``meta`` (``flights_file``); ``flights="file"`` reads
the official file only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from envs.travel import vocab
from envs.travel.geography import ISLAND_STATES, STATE_CENTRES, STATES
from envs.travel.sandbox.files import (
    FLIGHTS_MODES,
    GENERATED_FLIGHTS,
    TABLES,
    SandboxDB,
    _database_root,
    export_database,
    exported_generated_flights,
    flights_are_generated,
    generated_flights_file,
    generated_mark,
    load_database,
    seed_of_flights,
)
from envs.travel.schema import COLUMNS, DATABASE_FILES, OTHER_CUISINES, QUERY_CUISINES, ROOM_TYPES

__all__ = ["DATABASE_FILES", "FLIGHTS_MODES", "GENERATED_FLIGHTS", "TABLES", "SandboxConfig", "SandboxDB",
           "_database_root", "default_database", "export_database", "exported_generated_flights",
           "flights_are_generated", "format_distance", "format_duration", "generate_database",
           "generated_flights_file", "generated_mark", "load_database", "seed_of_flights"]

MARCH_2022 = [f"2022-03-{d:02d}" for d in range(1, 32)]


# ---------------------------------------------------------------------------------- generation
@dataclass(frozen=True)
class SandboxConfig:
    """Sizes and spreads of the generated database."""

    restaurants_per_city: dict = field(default_factory=lambda: {"small": (10, 16), "medium": (18, 28),
                                                                "large": (30, 42)})
    hotels_per_city: dict = field(default_factory=lambda: {"small": (7, 10), "medium": (10, 15), "large": (15, 22)})
    attractions_per_city: dict = field(default_factory=lambda: {"small": (4, 7), "medium": (6, 10), "large": (9, 14)})
    airport_prob: dict = field(default_factory=lambda: {"small": 0.45, "medium": 0.8, "large": 1.0})
    # P(route between two airport cities) and mean flights per day on it, by size pair.
    route_prob: dict = field(default_factory=lambda: {"ll": 0.9, "lm": 0.7, "ls": 0.4, "mm": 0.45, "ms": 0.25,
                                                      "ss": 0.1})
    flights_per_day: dict = field(default_factory=lambda: {"ll": 1.4, "lm": 0.9, "ls": 0.55, "mm": 0.6, "ms": 0.45,
                                                           "ss": 0.35})
    missing_road_prob: float = 0.02


_CUISINE_BASE_COST = {
    "French": 46, "Mediterranean": 38, "Italian": 31, "Indian": 25, "Chinese": 23, "Mexican": 21,
    "American": 27, "Cafe": 14, "Bakery": 12, "Desserts": 15, "Pizza": 18, "Fast Food": 11,
    "BBQ": 30, "Seafood": 41, "Tea": 10,
}
_SIZE_CODE = {"small": "s", "medium": "m", "large": "l"}


def _pair(a: str, b: str) -> str:
    return "".join(sorted(_SIZE_CODE[a] + _SIZE_CODE[b], key="lms".index))


def format_duration(hours: float) -> str:
    """Google-style duration text: '1 day 2 hours', '3 hours 5 mins', '1 hour 1 min', '42 mins'."""
    mins = int(round(hours * 60))
    d, rem = divmod(mins, 1440)
    h, m = divmod(rem, 60)
    plural = lambda n, w: f"{n} {w}" + ("" if n == 1 else "s")  # noqa: E731
    if d:
        return f"{plural(d, 'day')} {plural(h, 'hour')}"
    if h:
        return f"{plural(h, 'hour')} {plural(m, 'min')}"
    return plural(max(m, 1), "min")


def format_distance(km: float) -> str:
    if km < 100:
        return f"{km:.1f} km"
    return f"{int(round(km)):,} km"


def _unique_names(rng: np.random.Generator, n: int, make, forbidden: list[str],
                  existing: list[str] | None = None) -> list[str]:
    """n new names from make(rng): none contains another (or one of ``existing``) or is contained
    in one, none contains a forbidden fragment (city names). Appends them to ``existing``."""
    names: list[str] = existing if existing is not None else []
    n += len(names)
    start = len(names)
    tries = 0
    while len(names) < n:
        tries += 1
        if tries > 200 * n + 1000:
            raise RuntimeError("name vocabulary too small for the requested table size")
        cand = make(rng)
        if any(cand in x or x in cand for x in names) or any(f in cand for f in forbidden):
            continue
        names.append(cand)
    return names[start:]


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def generate_database(seed: int = 0, config: SandboxConfig | None = None) -> SandboxDB:
    """A new sandbox database; the same seed and config give the same tables."""
    cfg = config or SandboxConfig()
    rng = np.random.default_rng(seed)
    city_names = [c for cities in STATES.values() for c in cities]
    cities = {c: s for s, cs in STATES.items() for c in cs}

    # cities: position, size, price level, airport
    xy, size, level, airport = {}, {}, {}, {}
    for state, cs in STATES.items():
        cx, cy = (0.75 * v for v in STATE_CENTRES[state])
        sizes = rng.choice(["small", "medium", "large"], size=len(cs), p=[0.4, 0.4, 0.2])
        sizes[int(rng.integers(len(cs)))] = "large"  # every state has a hub
        for c, sz in zip(cs, sizes):
            spread = 90.0 if state in ISLAND_STATES else 190.0
            xy[c] = (cx + rng.normal(0, spread), cy + rng.normal(0, spread))
            size[c] = str(sz)
            level[c] = float(np.exp(rng.normal(0, 0.22)))
            airport[c] = state in ISLAND_STATES or bool(rng.random() < cfg.airport_prob[str(sz)])
    island = {c: cities[c] in ISLAND_STATES for c in city_names}

    def km_between(a: str, b: str) -> float:
        (xa, ya), (xb, yb) = xy[a], xy[b]
        return max(8.0, math.hypot(xa - xb, ya - yb))

    # distance matrix (both directions; no road between an island and the mainland)
    drows = []
    road_factor: dict[frozenset, float] = {}
    speed: dict[frozenset, float] = {}
    for a in city_names:
        for b in city_names:
            if a == b:
                continue
            key = frozenset((a, b))
            if key not in road_factor:
                road_factor[key] = float(rng.uniform(1.15, 1.45))
                speed[key] = float(rng.uniform(72, 96))
            missing = island[a] != island[b] or (cities[a] != cities[b] and rng.random() < cfg.missing_road_prob)
            if missing:
                drows.append((a, b, np.nan, np.nan))
                continue
            km = km_between(a, b) * road_factor[key] * float(rng.uniform(0.99, 1.01))
            hours = km / speed[key] * float(rng.uniform(0.98, 1.02))
            drows.append((a, b, format_duration(hours), format_distance(km)))
    distances = pd.DataFrame(drows, columns=COLUMNS["distances"])

    # flights: routes between airport cities, 0..k flights a day through March 2022
    ports = [c for c in city_names if airport[c]]
    legs = []
    for i, a in enumerate(ports):
        for b in ports[i + 1:]:
            pc = _pair(size[a], size[b])
            if rng.random() < cfg.route_prob[pc]:
                legs += [(a, b, pc), (b, a, pc)]
    lam = np.array([cfg.flights_per_day[pc] for _, _, pc in legs])
    counts = rng.poisson(lam[:, None], size=(len(legs), len(MARCH_2022)))
    leg_idx, day_idx = np.nonzero(counts)
    reps = counts[leg_idx, day_idx]
    leg_idx, day_idx = np.repeat(leg_idx, reps), np.repeat(day_idx, reps)
    n = len(leg_idx)
    km = np.array([km_between(legs[i][0], legs[i][1]) for i in leg_idx])
    price = np.round((45 + 0.12 * km) * np.exp(rng.normal(0, 0.32, n)) * rng.uniform(0.9, 1.15, n)).astype(np.int64)
    dur = np.round(km / 12.5 + 35 + rng.normal(0, 8, n)).clip(30).astype(np.int64)
    dep = rng.integers(5 * 60, 22 * 60 + 30, n)
    arr = (dep + dur) % 1440
    numbers: list[int] = []
    seen: set[int] = set()
    while len(numbers) < n:
        for v in rng.integers(100_000, 9_999_999, n - len(numbers) + 64).tolist():
            if v not in seen and len(numbers) < n:
                seen.add(v)
                numbers.append(v)
    order = np.lexsort((dep, day_idx, leg_idx))
    hm = lambda m: f"{int(m) // 60:02d}:{int(m) % 60:02d}"  # noqa: E731
    el = lambda m: f"{int(m) // 60} hours {int(m) % 60} minutes"  # noqa: E731
    flights = pd.DataFrame({
        "Flight Number": [f"F{numbers[k]:07d}" for k in range(n)],
        "Price": price[order],
        "DepTime": [hm(dep[i]) for i in order],
        "ArrTime": [hm(arr[i]) for i in order],
        "ActualElapsedTime": [el(dur[i]) for i in order],
        "FlightDate": [MARCH_2022[day_idx[i]] for i in order],
        "OriginCityName": [legs[leg_idx[i]][0] for i in order],
        "DestCityName": [legs[leg_idx[i]][1] for i in order],
        "Distance": np.round(km[order] * 0.621, 0),  # miles, as the real table
    })

    # restaurants, accommodations, attractions per city
    all_cuisines = list(QUERY_CUISINES) + list(OTHER_CUISINES)
    rrows, hrows, arows = [], [], []
    forbidden = city_names
    for c in city_names:
        lo, hi = cfg.restaurants_per_city[size[c]]
        k = int(rng.integers(lo, hi + 1))
        names = _unique_names(rng, k,
                              lambda r: f"{_pick(r, vocab.RESTAURANT_FIRST)} {_pick(r, vocab.RESTAURANT_SECOND)}",
                              forbidden)
        weights = rng.dirichlet(np.full(len(all_cuisines), 0.55))
        for name in names:
            m = 1 + int(rng.binomial(3, 0.4))
            cu = list(rng.choice(all_cuisines, size=m, replace=False, p=weights))
            base = float(np.mean([_CUISINE_BASE_COST[x] for x in cu]))
            cost = int(np.clip(round(base * level[c] * np.exp(rng.normal(0, 0.35))), 8, 110))
            rating = 0.0 if rng.random() < 0.08 else round(float(rng.uniform(2.6, 4.9)), 1)
            rrows.append((name, cost, ", ".join(cu), rating, c))

        lo, hi = cfg.hotels_per_city[size[c]]
        k = int(rng.integers(lo, hi + 1))
        types = rng.choice(ROOM_TYPES, size=k, p=[0.45, 0.43, 0.12])
        types[0], types[1] = "Entire home/apt", "Private room"
        used: list[str] = []
        for rt in types:
            rt = str(rt)
            name = _unique_names(
                rng, 1,
                lambda r: (f"{_pick(r, vocab.LODGING_FIRST)} {_pick(r, vocab.LODGING_KIND[rt])} "
                           f"{_pick(r, vocab.LODGING_TAIL)}"),
                forbidden, used,
            )[0]
            mean = {"Entire home/apt": 430.0, "Private room": 210.0, "Shared room": 95.0}[rt]
            p = float(np.clip(round(mean * level[c] * np.exp(rng.normal(0, 0.5))), 35, 1200))
            occ = 1 if rt == "Shared room" else (int(rng.integers(1, 3)) if rt == "Private room"
                                                  else int(rng.choice([2, 3, 4, 5, 6, 8],
                                                                      p=[.25, .2, .25, .12, .12, .06])))
            mn = float(rng.choice([1, 2, 3, 4, 5, 7, 10, 14, 30], p=[.3, .2, .14, .08, .06, .08, .04, .05, .05]))
            rules = [r for r in ("smoking", "parties", "children under 10", "visitors", "pets") if rng.random() < 0.3]
            if not rules:
                rules = [str(rng.choice(["smoking", "parties", "children under 10", "visitors", "pets"]))]
            rng.shuffle(rules)
            review = float(rng.integers(1, 6))
            hrows.append((name, p, rt, " & ".join(f"No {r}" for r in rules), mn, occ, review, c))

        lo, hi = cfg.attractions_per_city[size[c]]
        k = int(rng.integers(lo, hi + 1))
        names = _unique_names(rng, k,
                              lambda r: f"{_pick(r, vocab.ATTRACTION_FIRST)} {_pick(r, vocab.ATTRACTION_KIND)}",
                              forbidden)
        x, y = xy[c]
        for name in names:
            lat = round(25.0 + y / 111.0 + float(rng.normal(0, 0.03)), 5)
            lon = round(-124.0 + x / 85.0 + float(rng.normal(0, 0.03)), 5)
            addr = (f"{int(rng.integers(1, 2000))} {_pick(rng, vocab.STREETS)}, {c}, {cities[c]} "
                    f"{int(rng.integers(10000, 99999))}")
            phone = f"+1 555-{int(rng.integers(100, 999))}-{int(rng.integers(1000, 9999))}"
            site = ("https://www." + "".join(ch for ch in name.lower() if ch.isalnum())
                    + f"-{c.lower().replace(' ', '')}.example")
            arows.append((name, lat, lon, addr, phone, site, c))

    restaurants = pd.DataFrame(rrows, columns=COLUMNS["restaurants"])
    accommodations = pd.DataFrame(hrows, columns=COLUMNS["accommodations"])
    attractions = pd.DataFrame(arows, columns=COLUMNS["attractions"])
    meta = {"seed": seed, "airport": airport, "size": size}
    return SandboxDB(cities, flights, accommodations, restaurants, attractions, distances, "synthetic", meta)


@lru_cache(maxsize=4)
def default_database(seed: int = 0) -> SandboxDB:
    """The generated database for ``seed``, built once per process (treat it as read-only)."""
    return generate_database(seed)
