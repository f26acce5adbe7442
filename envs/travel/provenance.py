"""Which data a travel result was computed on -- the database, the flights, the queries and their
split -- and which evaluator mode scored it.

:func:`data_source` gives it as a dict (the ``data`` key of a results JSON) and :func:`data_line` as
one line of markdown (under a results table's title)::

    data: generated sandbox (seed 0), flights generated with it; queries generated with it,
          split envs/travel/splits/seed0.json; evaluated: test; evaluator: default rules (...)
    data: real tables travelplanner-db (fingerprint 3f9c...), flights generated (seed 0);
          queries osunlp/TravelPlanner, validation re-split by seed 0; evaluated: validation:re-split:test;
          evaluator: official mode (...)

The keys, every one always present (``None`` where it does not apply):

* ``database`` -- ``generated sandbox`` (built from ``seed``), ``real tables`` (``env.travel.database_dir``)
  or ``reference_information`` (sole-planning: each query's own rows);
* ``seed`` -- the config's ``env.travel.seed`` (the sandbox, generated flights and queries, re-splits);
* ``path`` -- the real tables' folder, relative to the checkout when inside it, else the folder's
  name (no machine's absolute path goes into a result); ``fingerprint`` -- their digest
  (:func:`envs.travel.real_sandbox.fingerprint`: the table files, the flights, as a real split file records it);
* ``flights`` -- ``generated (seed N)``, ``generated with the sandbox`` or the official file;
* ``queries`` -- where the queries come from (generated, the hub dataset id, or a local copy's
  folder or file, shown as ``path`` is);
* ``split`` -- how they are split (the persisted file, or the hub split re-split by seed);
* ``evaluated`` -- the split names the table's queries were taken from;
* ``evaluator`` -- the evaluator's mode (``env.travel.official_quirks``): ``official`` (the
  benchmark's verdicts: the mode TravelPlanner figures are reported in) or ``default`` (the
  project's rules as intended, not the benchmark's verdicts); :data:`~envs.travel.eval_mode.MODE_TEXT`
  is how the line says it.

A file path (a split file, a cached query file) is written the same way: relative to the checkout,
else its folder's name and its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.travel.config import GENERATED, TravelEnvConfig
from envs.travel.eval_mode import MODE_TEXT, mode_name
from envs.travel.factory import HUB_MODE
from envs.travel.index import SandboxIndex
from envs.travel.real_sandbox import fingerprint, real_index, real_queries
from envs.travel.reference_info import SOLE_PLANNING
from envs.travel.sandbox import DATABASE_FILES


def _flights(index: SandboxIndex) -> str:
    meta = index.db.meta
    if meta.get("flights") == "file":
        return f"official file {DATABASE_FILES['flights']}"
    if meta.get("flights_file"):  # an export's generated flights, read back
        return f"generated (seed {meta.get('flights_seed')}, read from {meta['flights_file']})"
    return f"generated (seed {meta.get('flights_seed')})"


def data_source(config: TravelEnvConfig, index: SandboxIndex | None = None,
                evaluated: Sequence[str] = ()) -> dict[str, Any]:
    """The data a result over ``config``'s env was computed on (module docstring); ``index``: the env's
    sandbox index (its tables' folder and flights; else the process's cached one is read),
    ``evaluated``: the split names the result's queries come from."""
    seed = config.seed
    out: dict[str, Any] = {"database": None, "seed": seed, "path": None, "fingerprint": None, "flights": None,
                           "queries": None, "split": None, "evaluated": list(dict.fromkeys(evaluated)),
                           "evaluator": mode_name(config.official_quirks)}
    if config.database_dir is None:
        return out | {"database": "generated sandbox", "flights": "generated with the sandbox",
                      "queries": "generated with the sandbox", "split": f"envs/travel/splits/seed{seed}.json"}
    if str(config.database_dir) == SOLE_PLANNING:
        out |= {"database": SOLE_PLANNING, "flights": "the queries' reference information"}
    else:
        if index is None or "root" not in index.db.meta:
            index = real_index(config.database_dir, config.flights, seed)
        out |= {"database": "real tables", "path": shown_path(index.db.meta["root"]),
                "fingerprint": fingerprint(index), "flights": _flights(index)}
    if config.queries_source == GENERATED:
        where = real_queries(config.database_dir, config.flights, seed)[3]  # cached per process
        return out | {"queries": f"generated over the tables (seed {seed})", "split": _relative(where)}
    split = ("the hub's train / validation / test" if config.queries_split == HUB_MODE
             else f"{config.queries_split} re-split by seed {seed}")
    source = str(config.queries_source)  # a hub dataset id, or a local copy's folder or file (shown, not located)
    local = Path(source).is_absolute() or Path(source).exists()
    return out | {"queries": shown_path(source) if local else source, "split": split}


PROJECT_ROOT = Path(__file__).resolve().parents[2]


def shown_path(path: str | Path) -> str:
    """A folder or file as results print it: relative to the checkout when inside it (``.`` for the
    checkout itself); else a folder as its name, a file as its folder's name and its own
    (``travel-real/queries-<fp>-seed0.json`` for a cached file). A relative path is read from the
    working folder."""
    full = Path(path).resolve()
    if full.is_relative_to(PROJECT_ROOT):
        return str(full.relative_to(PROJECT_ROOT)) if full != PROJECT_ROOT else "."
    return str(Path(full.parent.name, full.name)) if full.is_file() else full.name


def _relative(where: str) -> str:
    """Where the queries come from, with its path shown by :func:`shown_path` and a trailing
    parenthesised note kept (``<cached file> (split by seed 0)``)."""
    path, sep, note = where.partition(" (")
    return shown_path(path) + sep + note if Path(path).is_absolute() else where


def data_line(data: Mapping[str, Any]) -> str:
    """:func:`data_source` as one line of markdown."""
    if data["database"] == "generated sandbox":
        db = f"generated sandbox (seed {data['seed']}), flights generated with it"
        queries = f"queries generated with it, split {data['split']}"
    else:
        db = (f"real tables {data['path']} (fingerprint {data['fingerprint']}), flights {data['flights']}"
              if data["database"] == "real tables" else f"{SOLE_PLANNING} rows of each query, no database")
        queries = f"queries {data['queries']}, " + (f"split {data['split']}" if data["queries"].startswith("generated")
                                                     else data["split"])
    evaluated = f"; evaluated: {', '.join(data['evaluated'])}" if data["evaluated"] else ""
    mode = data.get("evaluator")  # absent in results written before the key existed
    evaluator = f"; evaluator: {MODE_TEXT.get(mode, mode)}" if mode else ""
    track = f"; track: {data['track']}" if data.get("track") else ""  # env.travel.track (envs/travel/tracks.py)
    return f"data: {db}; {queries}{evaluated}{evaluator}{track}"
