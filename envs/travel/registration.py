"""The travel sandbox's :class:`~envs.registry.EnvSpec` (``env.name: travel``; in Gymnasium
``TravelPlanner-Sandbox-v0``). :data:`envs.registry.BUILTIN_ENVS` names :data:`SPEC` by its import
path, so this module is imported on the first lookup of ``travel``. Its ``env:`` section is
:class:`TravelSection`: the env's settings (:class:`envs.travel.config.TravelEnvConfig`) sit under
``env.travel``, as every travel config has always written them; the callables import the factory
(``envs/travel/factory.py``) when called."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.registry import EnvSpec
from envs.travel.config import TravelConfigError, TravelEnvConfig

GYM_ID = "TravelPlanner-Sandbox-v0"


@dataclass
class TravelSection:
    """A run config's ``env:`` section for the travel sandbox."""

    name: str = "travel"
    """Which registered env the section is for (envs/registry.py): travel selects the sandbox's keys under
    env.travel."""
    travel: TravelEnvConfig = field(default_factory=TravelEnvConfig)
    """The travel sandbox's settings: which sandbox and queries, the plan grammar, the reward."""

    def validate(self, section: str = "env") -> None:
        """Raise :class:`TravelConfigError` naming ``<section>.travel.<key>`` for settings that cannot run."""
        if self.name != "travel":
            raise TravelConfigError(f"bad value for '{section}.name': {self.name!r}; a TravelSection is the "
                                    "travel env's section")
        if not isinstance(self.travel, TravelEnvConfig):
            raise TravelConfigError(f"bad value for '{section}.travel': {self.travel!r}; expected a TravelEnvConfig")
        self.travel.validate(f"{section}.travel")


def make(section: TravelSection, split: str = "train", **_unused):
    from envs.travel.factory import make_env  # deferred: config loading imports this module, not the env (pandas)

    return make_env(section.travel, split)


def make_train_and_held_out(section: TravelSection, **_unused):
    """(``device`` / ``build_guard`` are OpenAGI's: the sandbox runs no model and builds no data.)"""
    from envs.travel.factory import make_envs  # deferred: see make

    return make_envs(section.travel)


def split_ids(section: TravelSection) -> dict[str, list[int]]:
    from envs.travel.factory import split_ids as travel_split_ids  # deferred: see make

    return travel_split_ids(section.travel)


def describe(section: TravelSection) -> list[str]:
    from envs.travel.factory import describe_env  # deferred: see make

    return describe_env(section.travel)


def provenance(section: TravelSection, env: Any = None, evaluated: Sequence[str] = (),
               roles: bool = False) -> tuple[dict[str, Any], str]:
    """The database, flights, queries and split a table was computed on (:mod:`envs.travel.provenance`)
    and the track (``env.travel.track``: benchmark, scaffolded or sandbox), and its markdown line; with
    ``roles`` the train / validation / test names are the run's
    (:func:`envs.travel.factory.run_split_names`: a hub re-split's ``validation:re-split:test``)."""
    from envs.travel.factory import run_split_names  # deferred: see make
    from envs.travel.provenance import data_line, data_source  # deferred: see make

    if roles:
        names = run_split_names(section.travel)
        evaluated = [names.get(s, s) for s in evaluated]
    data = data_source(section.travel, getattr(env, "index", None), evaluated)
    data["track"] = section.travel.track  # which track the result is (envs/travel/tracks.py)
    return data, data_line(data)


SPEC = EnvSpec(name="travel", section=TravelSection, make=make, make_train_and_held_out=make_train_and_held_out,
               split_ids=split_ids, describe=describe, gym_id=GYM_ID, provenance=provenance)
