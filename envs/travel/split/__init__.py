"""Train / validation / test split of the sandbox queries by query, stratified by (level, days),
persisted in ``envs/travel/splits/seed{seed}.json`` (regenerate with ``python -m envs.travel.split``,
``split/__main__.py``), and the queries a split name selects from the hub dataset
(:func:`hub_split`: ``train`` / ``validation`` / ``test`` are the hub's splits,
``<hub split>:re-split:<part>`` a part of the seeded re-split of one; :mod:`envs.travel.hub`).

The file stores each query's id and text; :func:`load_split` checks them against the generated
queries, so a change of the database, the generator or the solver that would silently change the
queries of a part is caught (regenerate the file then).
"""

from __future__ import annotations

import json
from pathlib import Path

from envs.splitting import SPLITS, stratified_split
from envs.travel import hub
from envs.travel.queries import default_queries
from envs.travel.query import TravelQuery

FRACTIONS = {"validation": 0.2, "test": 0.2}
SPLIT_DIR = Path(__file__).resolve().parent.parent / "splits"  # envs/travel/splits/


def make_split(queries: list[TravelQuery], seed: int = 0,
               fractions: dict[str, float] | None = None) -> dict[str, list[int]]:
    """Query ids per part; every (level, days) stratum is split with the same fractions
    (:func:`envs.splitting.stratified_split`)."""
    return stratified_split([(q.level, q.days) for q in queries], seed, {**FRACTIONS, **(fractions or {})},
                            ids=[q.id for q in queries])


def split_path(seed: int = 0) -> Path:
    return SPLIT_DIR / f"seed{seed}.json"


def build_split_file(seed: int = 0) -> dict:
    _, queries = default_queries(seed)
    parts = make_split(queries, seed)
    by_id = {q.id: q for q in queries}
    return {"seed": seed, "fractions": FRACTIONS, "n_queries": len(queries),
            **{k: [{"id": i, "level": by_id[i].level, "days": by_id[i].days, "query": by_id[i].query} for i in v]
               for k, v in parts.items()}}


def load_split(seed: int = 0, path: str | Path | None = None, check: bool = True) -> dict[str, list[int]]:
    """``{"train": [ids], "validation": [...], "test": [...]}`` from the persisted file."""
    path = Path(path) if path else split_path(seed)
    if not path.exists():
        raise FileNotFoundError(f"no travel split file at {path}; run python -m envs.travel.split --seed {seed}")
    data = json.loads(path.read_text())
    out = {part: [e["id"] for e in data[part]] for part in SPLITS}
    if check:
        _, queries = default_queries(data.get("seed", seed))
        by_id = {q.id: q for q in queries}
        for part in SPLITS:
            for e in data[part]:
                q = by_id.get(e["id"])
                if q is None or q.query != e["query"]:
                    raise ValueError(
                        f"travel split file {path} is stale: query {e['id']} is {e['query'][:60]!r}... there but "
                        f"{(q.query[:60] if q else 'missing')!r} now; regenerate it with python -m envs.travel.split")
    return out


def hub_split(source, name: str, seed: int = 0, id_offset: int = 0) -> tuple[list[TravelQuery], list[dict], list[int]]:
    """``(queries, rows, ids)`` for a split name over a hub source: the hub split the name reads
    (every query and its raw row, ids from ``id_offset``) and the ids the name selects -- all of
    them for ``train`` / ``validation`` / ``test``, the part of :func:`make_split` (seeded by ``seed``)
    for ``<hub split>:re-split:<part>``."""
    source_split, part = hub.parse_split_name(name)
    queries, rows = hub.load_split(source, source_split, id_offset)
    ids = [q.id for q in queries] if part is None else make_split(queries, seed)[part]
    return queries, rows, ids
