"""The travel sandbox in the env registry (``env.name: travel``) and in Gymnasium's
(``TravelPlanner-Sandbox-v0``). Its ``env:`` section is :class:`TravelSection`: the env's settings
(:class:`envs.travel.config.TravelEnvConfig`) sit under ``env.travel``, as every travel config
has always written them; the callables import the factory (``envs/travel/factory.py``) when called."""

from __future__ import annotations

from dataclasses import dataclass, field

from gymnasium.envs.registration import register as gym_register
from gymnasium.envs.registration import registry as gym_registry

from envs.registry import EnvSpec, register
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


SPEC = register(EnvSpec(name="travel", section=TravelSection, make=make,
                        make_train_and_held_out=make_train_and_held_out, split_ids=split_ids, describe=describe,
                        gym_id=GYM_ID))
if GYM_ID not in gym_registry:
    gym_register(id=GYM_ID, entry_point="envs.travel.env:TravelPlannerEnv")
