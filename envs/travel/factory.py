"""The travel env built from its config (:class:`envs.travel.config.TravelEnvConfig`).

:func:`make_envs` gives the two envs a training run needs, sharing one sandbox index: the
**train** env (the split's train queries) and the **held-out** env (every query; the caller takes
validation / test ids from :func:`split_ids`). The synthetic sandbox's split is the persisted one
(``envs/travel/splits/seed<seed>.json``); the real benchmark's queries (``database_dir``) are split
the same way, stratified by level and days, seeded by ``seed``. ``days`` / ``levels`` keep the
queries of those lengths and levels in every part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.config_fields import as_settings
from envs.travel.config import TravelConfigError, TravelEnvConfig
from envs.travel.env import TravelPlannerEnv
from envs.travel.index import SandboxIndex
from envs.travel.queries import default_queries, load_hub_queries
from envs.travel.reward import reward_formula
from envs.travel.sandbox import load_database
from envs.travel.split import load_split, make_split


def as_config(config: TravelEnvConfig | Mapping[str, Any] | None) -> TravelEnvConfig:
    """A :class:`TravelEnvConfig` from itself, a mapping of its fields, or ``None`` (the defaults)."""
    return as_settings(TravelEnvConfig, config, TravelConfigError, "travel env config")


def _all_queries(config: TravelEnvConfig):
    if config.database_dir is not None:
        return SandboxIndex(load_database(config.database_dir)), load_hub_queries(config.queries_source,
                                                                                  config.queries_split)
    return default_queries(config.seed)


def split_ids(config: TravelEnvConfig | Mapping[str, Any] | None = None, queries=None) -> dict[str, list[int]]:
    """Query ids per part (train / validation / test), filtered by ``days`` and ``levels``."""
    config = as_config(config)
    if queries is None:
        _, queries = _all_queries(config)
    if config.database_dir is None:
        parts = load_split(config.seed)
    else:
        parts = make_split(list(queries), config.seed)
    by_id = {q.id: q for q in queries}
    keep = {q.id for q in queries if q.days in config.days and q.level in config.levels}
    parts = {k: [i for i in v if i in keep and i in by_id] for k, v in parts.items()}
    if not parts["train"]:
        raise TravelConfigError(f"no train query has days in {config.days} and level in {config.levels}")
    return parts


def make_envs(config: TravelEnvConfig | Mapping[str, Any] | None = None) -> tuple[TravelPlannerEnv, TravelPlannerEnv]:
    """``(train env, held-out env)`` sharing one sandbox index (see the module docstring)."""
    config = as_config(config)
    config.validate()
    index, queries = _all_queries(config)
    parts = split_ids(config, queries)
    common = dict(seed=config.seed, reward_weights=config.reward, official_quirks=config.official_quirks,
                  max_attractions=config.max_attractions, index=index, queries=queries)
    held_out_ids = [i for part in ("train", "validation", "test") for i in parts[part]]
    return (TravelPlannerEnv("train", query_ids=parts["train"], **common),
            TravelPlannerEnv("all", query_ids=held_out_ids, **common))


def make_env(config: TravelEnvConfig | Mapping[str, Any] | None = None, split: str = "train") -> TravelPlannerEnv:
    """One env of ``split`` (train, validation, test, or all: every kept query)."""
    config = as_config(config)
    config.validate()
    index, queries = _all_queries(config)
    parts = split_ids(config, queries)
    ids = [i for p in ("train", "validation", "test") for i in parts[p]] if split == "all" else parts.get(split)
    if ids is None:
        raise TravelConfigError(f"unknown split {split!r}; expected train, validation, test or all")
    return TravelPlannerEnv(split, seed=config.seed, reward_weights=config.reward,
                            official_quirks=config.official_quirks, max_attractions=config.max_attractions,
                            index=index, queries=queries, query_ids=ids)


def describe_env(config: TravelEnvConfig | Mapping[str, Any] | None = None) -> list[str]:
    """What :func:`make_envs` would build, as lines of text (validates; builds nothing)."""
    config = as_config(config)
    config.validate()
    if config.database_dir is not None:
        where = (f"the real TravelPlanner database in {config.database_dir}, queries of {config.queries_source} "
                 f"({config.queries_split}), split by seed {config.seed}")
    else:
        where = f"the synthetic sandbox of seed {config.seed} (split envs/travel/splits/seed{config.seed}.json)"
    return [f"env         travel: {where}",
            f"            queries of {config.days} days, levels {config.levels}; plan grammar with at most "
            f"{config.max_attractions} attractions per stay day",
            f"            reward = {reward_formula(config.reward)}"
            + ("; the official evaluator's quirks reproduced" if config.official_quirks else "")]
