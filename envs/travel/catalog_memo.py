"""One :class:`~envs.travel.catalog.QueryTables` per (env, query) in a process, shared by the
query's catalogs: the K passes of an RL step (and the passes of an evaluation that meet the query
again) search the sandbox and derive the route options once instead of once per pass.

The key is the env (held weakly: its tables go with it) and the query (its id, checked against
the query's content: a changed query gets new tables). What the tables depend on beside the query
and the env is in each derived value's own key (:meth:`~envs.travel.catalog.Catalog.derived`).
Each env keeps its :data:`LIMIT` most recently used queries' tables.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

from envs.travel.catalog import Catalog, QueryTables
from envs.travel.query import TravelQuery

__all__ = ["LIMIT", "clear", "query_tables", "shared_catalog"]

LIMIT = 64  # queries whose tables an env keeps (an RL step reads a few; evaluation one at a time)

_TABLES: weakref.WeakKeyDictionary[Any, OrderedDict[int, tuple[TravelQuery, QueryTables]]] = \
    weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def query_tables(env, query: int | str | TravelQuery) -> QueryTables:
    """The tables of ``query`` on ``env``, made on first use (fresh, unshared ones for an env that
    cannot be weakly referenced)."""
    q = env.get_query(query)
    with _LOCK:
        try:
            per_env = _TABLES.setdefault(env, OrderedDict())
        except TypeError:
            return QueryTables()
        hit = per_env.get(q.id)
        if hit is not None and hit[0] == q:
            per_env.move_to_end(q.id)
            return hit[1]
        tables = QueryTables()
        per_env[q.id] = (q, tables)
        per_env.move_to_end(q.id)
        while len(per_env) > LIMIT:
            per_env.popitem(last=False)
        return tables


def shared_catalog(env, query: int | str | TravelQuery) -> Catalog:
    """A new view of ``query`` (:class:`~envs.travel.catalog.Catalog`) on its shared tables."""
    return Catalog(env, query, query_tables(env, query))


def clear() -> None:
    """Forget every query's tables (a benchmark's cold start)."""
    with _LOCK:
        _TABLES.clear()
