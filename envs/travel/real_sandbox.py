"""A sandbox over the benchmark's real tables (``env.travel.database_dir`` with ``queries_source:
generated``): the folder's accommodations, restaurants, attractions, distances and city set, flights
generated (:mod:`envs.travel.flights`) unless the folder holds the official flights file, and
queries generated over the real cities (:func:`envs.travel.queries.generate_queries`).

* **queries** -- 40 per (level, days) cell, 360 in all, as the synthetic sandbox's, with the
  destination drawn among the cities (3 days) or states (5 / 7 days) linked to the origin both ways
  (``QueryConfig.reachable_only``), the local constraints drawn from what the tables offer (house
  rules some accommodation states, room types some accommodation has, query cuisines some restaurant
  serves), budgets feasible by construction (the exact solver's optimum times a slack of 1.05-1.45)
  and kept only when the evaluator passes the solver's plan (the real tables' names with embedded
  newlines or duplicated in a city can make that plan fail: such a query is redrawn).
* **split** -- persisted in ``envs/travel/splits/real-seed{seed}.json`` (``python -m
  envs.travel.split --real DATABASE_DIR --seed 0`` writes it): the database's fingerprint, every
  query's record and the train / validation / test ids (stratified by level and days, as
  ``seed{seed}.json``). A database whose fingerprint matches (the public tables with generated
  flights of that seed) reads its queries from the file; any other (e.g. with the official flights
  file) generates them once, caches them under ``rltf_cache_dir("travel-real")`` and splits them by
  seed.
* **cost** -- the loaded tables, their index and the queries are kept per process
  (:func:`real_index`, :func:`real_queries`).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from common.atomic import write_atomic
from common.cache_dir import rltf_cache_dir
from envs.splitting import SPLITS
from envs.travel.evaluator import TravelEvaluator
from envs.travel.index import SandboxIndex
from envs.travel.queries import QueryConfig, generate_queries
from envs.travel.query import TravelQuery
from envs.travel.sandbox import DATABASE_FILES, TABLES, _database_root, load_database
from envs.travel.schema import HOUSE_RULES, QUERY_CUISINES, ROOM_TYPE_CONSTRAINTS, ROOM_TYPE_OK
from envs.travel.split import FRACTIONS, SPLIT_DIR, make_split

GENERATOR = "real-v1"  # bump when the query generation changes (the fingerprint then changes too)


def real_split_path(seed: int = 0) -> Path:
    return SPLIT_DIR / f"real-seed{seed}.json"


def _key(database_dir: str | Path) -> tuple[str, tuple]:
    """The folder and its files' (size, mtime): a changed file is loaded again."""
    root = _database_root(Path(database_dir)).resolve()
    files = [root / DATABASE_FILES[t] for t in (*TABLES, "cities")]
    files += sorted((root / "flights").glob("generated_Flights_seed*.csv")) if (root / "flights").is_dir() else []
    return str(root), tuple((p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None for p in files)


@lru_cache(maxsize=4)
def _index(root: str, flights: str, seed: int, stamp: tuple) -> SandboxIndex:
    return SandboxIndex(load_database(root, flights=flights, flights_seed=seed))


def real_index(database_dir: str | Path, flights: str = "auto", seed: int = 0) -> SandboxIndex:
    """The folder's tables (flights per ``flights``, generated with ``seed``) and their index, built
    once per process (treat it as read-only)."""
    root, stamp = _key(database_dir)
    return _index(root, flights, seed, stamp)


def fingerprint(index: SandboxIndex) -> str:
    """A digest of what the queries depend on: the folder's table files (bytes; a flights file -- the
    official one, or generated flights an export wrote -- its size and first MiB), the generated
    flights' model and seed, the generator version."""
    db = index.db
    root = Path(db.meta["root"])
    h = hashlib.sha256(GENERATOR.encode())
    for name in (*[t for t in TABLES if t != "flights"], "cities"):
        h.update(name.encode() + (root / DATABASE_FILES[name]).read_bytes())
    if db.meta.get("flights") == "generated" and "flights_model" in db.meta:
        h.update(json.dumps(db.meta["flights_model"], sort_keys=True).encode())
    else:
        path = root / db.meta.get("flights_file", DATABASE_FILES["flights"])
        with path.open("rb") as f:
            h.update(str(path.stat().st_size).encode() + f.read(1 << 20))
    return h.hexdigest()[:16]


def query_config(index: SandboxIndex, per_cell: int = 40) -> QueryConfig:
    """The generation settings over ``index``: linked destinations and what its tables offer."""
    rules = " ".join(sorted({h.house_rules for h in index.hotels.items}))
    types = {h.room_type for h in index.hotels.items}
    cuisines = {c.strip() for r in index.restaurants.items for c in r.cuisines.split(",")}
    return QueryConfig(per_cell=per_cell, reachable_only=True,
                       house_rules=tuple(r for r in HOUSE_RULES if f"No {r}" in rules),
                       room_types=tuple(t for t in ROOM_TYPE_CONSTRAINTS if any(ROOM_TYPE_OK[t](x) for x in types)),
                       cuisines=tuple(c for c in QUERY_CUISINES if c in cuisines))


def generate_real_queries(index: SandboxIndex, seed: int = 0, per_cell: int = 40) -> list[TravelQuery]:
    """Queries over ``index`` (see the module docstring): each one's solver plan passes the evaluator."""
    evaluator = TravelEvaluator(index)
    return generate_queries(index, seed, query_config(index, per_cell),
                            accept=lambda q, res: evaluator.evaluate(q, res.plan).final_pass)


def build_split_file(index: SandboxIndex, seed: int = 0) -> dict:
    """The persisted file's content: fingerprint, queries and the split."""
    queries = generate_real_queries(index, seed)
    parts = make_split(queries, seed)
    by_id = {q.id: q for q in queries}
    return {"seed": seed, "fingerprint": fingerprint(index), "database": Path(index.db.meta["root"]).name,
            "flights": index.db.meta.get("flights_model", "file"), "generator": GENERATOR, "fractions": FRACTIONS,
            "n_queries": len(queries), "queries": [{"id": q.id, **q.as_dict()} for q in queries],
            **{k: [{"id": i, "level": by_id[i].level, "days": by_id[i].days} for i in v] for k, v in parts.items()}}


def _from_file(data: dict) -> tuple[list[TravelQuery], dict[str, list[int]]]:
    queries = [TravelQuery.from_record(r, r["id"]) for r in data["queries"]]
    return queries, {part: [e["id"] for e in data[part]] for part in SPLITS}


@lru_cache(maxsize=8)
def _queries(root: str, flights: str, seed: int, stamp: tuple) -> tuple[tuple[TravelQuery, ...], str, dict]:
    index = _index(root, flights, seed, stamp)
    fp = fingerprint(index)
    path = real_split_path(seed)
    if path.is_file():
        data = json.loads(path.read_text())
        if data.get("fingerprint") == fp:
            queries, parts = _from_file(data)
            return tuple(queries), str(path), parts
    cached = rltf_cache_dir("travel-real") / f"queries-{fp}-seed{seed}.json"
    if cached.is_file():
        queries = [TravelQuery.from_record(r, r["id"]) for r in json.loads(cached.read_text())]
    else:
        queries = generate_real_queries(index, seed)
        write_atomic(cached, json.dumps([{"id": q.id, **q.as_dict()} for q in queries]))
    return tuple(queries), f"{cached} (split by seed {seed})", make_split(queries, seed)


def real_queries(database_dir: str | Path, flights: str = "auto", seed: int = 0
                 ) -> tuple[SandboxIndex, list[TravelQuery], dict[str, list[int]], str]:
    """``(index, queries, split, where the queries come from)`` over the folder (module docstring)."""
    root, stamp = _key(database_dir)
    queries, where, parts = _queries(root, flights, seed, stamp)
    return _index(root, flights, seed, stamp), list(queries), {k: list(v) for k, v in parts.items()}, where
