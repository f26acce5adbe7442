"""The travel env built from its config (:class:`envs.travel.config.TravelEnvConfig`).

:func:`make_envs` gives the two envs a training run needs, sharing one sandbox index: the
**train** env (the split's train queries) and the **held-out** env (every query; the caller takes
validation / test ids from :func:`split_ids`). The synthetic sandbox's split is the persisted one
(``envs/travel/splits/seed<seed>.json``). The real benchmark's queries (``database_dir``; or
``database_dir: reference_information``, sole-planning from the hub alone) keep the hub's names
(envs/travel/hub.py): ``queries_split: hub`` -- the run's parts are the hub's train / validation /
test; ``queries_split: <hub split>`` -- that split re-split by ``seed`` (stratified by level and
days) into ``<hub split>:re-split:train`` / ``validation`` / ``test`` (:func:`run_split_names`).
``days`` / ``levels`` keep the queries of those lengths and levels in every part.

Every env gets the config's ``track`` and ``cap_keep`` (:mod:`envs.travel.tracks`), the hub queries'
own ``reference_information`` (the benchmark track builds each query's options from it) and the
run's train ids as the only queries whose solver's plans an option cap may keep.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common.config_fields import as_settings
from envs.travel.cli import loading
from envs.travel.config import GENERATED, TravelConfigError, TravelEnvConfig
from envs.travel.env import TravelPlannerEnv
from envs.travel.hub import HUB_SPLITS, parse_split_name, resplit_name
from envs.travel.index import SandboxIndex
from envs.travel.queries import default_queries
from envs.travel.real_sandbox import real_index, real_queries
from envs.travel.reference_info import SOLE_PLANNING, union_database
from envs.travel.reward import reward_formula
from envs.travel.sandbox import DATABASE_FILES, _database_root
from envs.travel.split import SPLITS, hub_split, load_split, make_split
from envs.travel.tracks import TRACK_TEXT, TRAIN_PLANS


def as_config(config: TravelEnvConfig | Mapping[str, Any] | None) -> TravelEnvConfig:
    """A :class:`TravelEnvConfig` from itself, a mapping of its fields, or ``None`` (the defaults)."""
    return as_settings(TravelEnvConfig, config, TravelConfigError, "travel env config")


HUB_MODE = "hub"
"""``queries_split`` value: the run's train / validation / test are the hub's own three splits."""
HUB_ID_OFFSET = {"train": 0, "validation": 100_000, "test": 200_000}
"""Query ids of the hub's splits when one env holds all three (``queries_split: hub``)."""


def _real(config: TravelEnvConfig) -> bool:
    """Hub-format queries (``queries_source``): split names as envs/travel/hub.py defines them."""
    return config.database_dir is not None and config.queries_source != GENERATED


def _flights_text(config: TravelEnvConfig) -> str:
    if str(config.database_dir) == SOLE_PLANNING:
        return "the flights of the queries' reference information"
    has_file = (_database_root(Path(config.database_dir)) / DATABASE_FILES["flights"]).is_file()
    if config.flights == "file" or (config.flights == "auto" and has_file):
        return f"flights from {DATABASE_FILES['flights']}"
    return f"flights generated with seed {config.seed} (envs/travel/flights.py)"


def _check_queries_split(config: TravelEnvConfig) -> None:
    if _real(config) and config.queries_split not in (HUB_MODE, *HUB_SPLITS):
        raise TravelConfigError(f"bad value for 'env.travel.queries_split': {config.queries_split!r}; expected "
                                f"{HUB_MODE} (the hub's train / validation / test) or the hub split to re-split "
                                f"({', '.join(HUB_SPLITS)})")


def run_split_names(config: TravelEnvConfig | Mapping[str, Any] | None = None) -> dict[str, str]:
    """The run's train / validation / test parts -> the split names they are (envs/travel/hub.py):
    the synthetic sandbox's persisted split and ``queries_split: hub`` -> the same names; a hub
    split S re-split -> ``S:re-split:train`` / ``validation`` / ``test``."""
    config = as_config(config)
    if not _real(config) or config.queries_split == HUB_MODE:
        return {p: p for p in SPLITS}
    return {p: resplit_name(config.queries_split, p) for p in SPLITS}


def _index(config: TravelEnvConfig, queries, rows) -> SandboxIndex:
    if str(config.database_dir) == SOLE_PLANNING:
        return SandboxIndex(union_database((q, r.get("reference_information")) for q, r in zip(queries, rows)))
    with loading(f"env.travel.database_dir {config.database_dir}"):  # one line, exit 2 (not a traceback)
        return real_index(config.database_dir, config.flights, config.seed)


def _notes_of(queries, rows) -> dict[int, Any]:
    return {q.id: r.get("reference_information") for q, r in zip(queries, rows)}


def _all_queries(config: TravelEnvConfig):
    index, queries, _ = _queries_and_notes(config)
    return index, queries


def _queries_and_notes(config: TravelEnvConfig):
    """``(index, queries, reference_information by query id)``: empty notes for generated queries."""
    if config.database_dir is None:
        return (*default_queries(config.seed), {})
    if config.queries_source == GENERATED:  # queries generated over the real tables (envs/travel/real_sandbox.py)
        with loading(f"env.travel.database_dir {config.database_dir}"):
            index, queries, _, _ = real_queries(config.database_dir, config.flights, config.seed)
        return index, queries, {}
    _check_queries_split(config)
    index = None if str(config.database_dir) == SOLE_PLANNING else _index(config, [], [])  # a bad folder fails first
    queries, rows = _hub_queries(config)
    return index or _index(config, queries, rows), queries, _notes_of(queries, rows)


def _hub_queries(config: TravelEnvConfig):
    """``(queries, rows)`` of the hub splits the config reads (no database, no index)."""
    if config.queries_split == HUB_MODE:
        queries, rows = [], []
        for name in HUB_SPLITS:
            q, r, _ = hub_split(config.queries_source, name, config.seed, HUB_ID_OFFSET[name])
            queries += q
            rows += r
        return queries, rows
    queries, rows, _ = hub_split(config.queries_source, config.queries_split, config.seed)
    return queries, rows


def split_ids(config: TravelEnvConfig | Mapping[str, Any] | None = None, queries=None) -> dict[str, list[int]]:
    """Query ids per split name, in the order train, validation, test (the names:
    :func:`run_split_names`), filtered by ``days`` and ``levels``."""
    config = as_config(config)
    if queries is None and _real(config):
        _check_queries_split(config)
        queries, _ = _hub_queries(config)  # the queries alone: no index is built to name their ids
    elif queries is None:
        _, queries = _all_queries(config)
    names = run_split_names(config)
    if config.database_dir is None:
        parts = load_split(config.seed)
    elif config.queries_source == GENERATED:
        parts = real_queries(config.database_dir, config.flights, config.seed)[2]
    elif config.queries_split == HUB_MODE:
        parts = {p: [q.id for q in queries if HUB_ID_OFFSET[p] <= q.id < HUB_ID_OFFSET[p] + 100_000] for p in SPLITS}
    else:
        parts = make_split(list(queries), config.seed)
    by_id = {q.id: q for q in queries}
    keep = {q.id for q in queries if q.days in config.days and q.level in config.levels}
    parts = {names[k]: [i for i in v if i in keep and i in by_id] for k, v in parts.items()}
    if not parts[names["train"]]:
        raise TravelConfigError(f"no {names['train']} query has days in {config.days} and level in {config.levels}")
    return parts


def _env(config: TravelEnvConfig, split: str, index, queries, ids, notes, train_ids) -> TravelPlannerEnv:
    return TravelPlannerEnv(split, seed=config.seed, reward_weights=config.reward,
                            official_quirks=config.official_quirks, max_attractions=config.max_attractions,
                            max_options=config.max_options, max_cities=config.max_cities, index=index,
                            queries=queries, query_ids=ids, track=config.track, reference_notes=notes,
                            plan_ids=train_ids, cap_keep=config.cap_keep)


def make_envs(config: TravelEnvConfig | Mapping[str, Any] | None = None) -> tuple[TravelPlannerEnv, TravelPlannerEnv]:
    """``(train env, held-out env)`` sharing one sandbox index (see the module docstring)."""
    config = as_config(config)
    config.validate()
    index, queries, notes = _queries_and_notes(config)
    parts = split_ids(config, queries)
    train, *_ = parts.values()
    held_out_ids = [i for ids in parts.values() for i in ids]
    return (_env(config, "train", index, queries, train, notes, train),
            _env(config, "all", index, queries, held_out_ids, notes, train))


def make_env(config: TravelEnvConfig | Mapping[str, Any] | None = None, split: str = "train") -> TravelPlannerEnv:
    """One env of the split named ``split`` (or ``all``: every kept query of the config). Hub
    queries: ``train`` / ``validation`` / ``test`` are the hub's splits and
    ``<hub split>:re-split:<part>`` a part of a re-split, whichever the config's own parts are."""
    config = as_config(config)
    config.validate()
    if _real(config):
        _check_queries_split(config)
        if split != "all" and split not in run_split_names(config).values():
            parse_split_name(split)  # a bad name: one line naming the forms
            queries, rows, ids = hub_split(config.queries_source, split, config.seed)
            by_id = {q.id: q for q in queries}
            keep = [i for i in ids if by_id[i].days in config.days and by_id[i].level in config.levels]
            train_ids = keep if parse_split_name(split) == ("train", None) else []
            return _env(config, split, _index(config, queries, rows), queries, keep, _notes_of(queries, rows),
                        train_ids)
    index, queries, notes = _queries_and_notes(config)
    parts = split_ids(config, queries)
    ids = [i for v in parts.values() for i in v] if split == "all" else parts.get(split)
    if ids is None:
        raise TravelConfigError(f"unknown split {split!r}; expected {', '.join(parts)} or all")
    return _env(config, split, index, queries, ids, notes, next(iter(parts.values())))


def describe_env(config: TravelEnvConfig | Mapping[str, Any] | None = None) -> list[str]:
    """What :func:`make_envs` would build, as lines of text (validates; builds nothing)."""
    config = as_config(config)
    config.validate()
    if config.database_dir is not None and config.queries_source == GENERATED:
        where = (f"the real TravelPlanner tables in {config.database_dir} with {_flights_text(config)}, 360 "
                 f"queries generated over their cities (split envs/travel/splits/real-seed{config.seed}.json when "
                 "the tables match it)")
    elif config.database_dir is not None:
        _check_queries_split(config)
        names = run_split_names(config)
        db = ("sole-planning: each query's reference_information rows (no database download)"
              if str(config.database_dir) == SOLE_PLANNING
              else f"the real TravelPlanner database in {config.database_dir} ({_flights_text(config)})")
        parts = ("the hub's train / validation / test" if config.queries_split == HUB_MODE
                 else f"{config.queries_split} re-split by seed {config.seed} into {', '.join(names.values())}")
        where = f"{db}, queries of {config.queries_source}: {parts}"
    else:
        where = f"the synthetic sandbox of seed {config.seed} (split envs/travel/splits/seed{config.seed}.json)"
    return [f"env         travel: {where}",
            f"            queries of {config.days} days, levels {config.levels}; plan grammar with at most "
            f"{config.max_attractions} attractions per stay day"
            + (f" and {config.max_options} options per city, kind, leg and day"
               + (" (the train queries' solver's plans' among them)" if config.cap_keep == TRAIN_PLANS else "")
               if config.max_options else "")
            + (f", {config.max_cities} route cities at most" if config.max_cities else ""),
            f"            track {config.track}: {TRACK_TEXT[config.track]}",
            f"            reward = {reward_formula(config.reward)}"
            + ("; the official evaluator's quirks reproduced" if config.official_quirks else "")]
