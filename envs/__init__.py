"""Environments. Importing this package registers ``OpenAGI-Lite-v0`` and
``TravelPlanner-Sandbox-v0`` with Gymnasium.

A run's ``env:`` section (:class:`envs.config.EnvConfig`) names the env (``name: openagi`` or
``travel``); :func:`make`, :func:`make_train_and_held_out`, :func:`split_ids` and
:func:`describe` build what it names. An ``OpenAGIEnvConfig`` or a mapping of its fields builds
the OpenAGI env.

Build an env from its config (what a run config's ``env:`` section holds) with :func:`make` or
``gym.make("OpenAGI-Lite-v0", config=...)`` (the same env; without ``config`` ``gym.make`` passes
its keyword arguments to ``OpenAGIEnv``),
the train + held-out pair a training run needs with :func:`make_train_and_held_out`, and say
what they would load with :func:`describe` (``envs/openagi/factory.py``).
"""

from gymnasium.envs.registration import register, registry

if "OpenAGI-Lite-v0" not in registry:
    register(id="OpenAGI-Lite-v0", entry_point="envs.openagi.factory:gym_entry_point")
if "TravelPlanner-Sandbox-v0" not in registry:
    register(id="TravelPlanner-Sandbox-v0", entry_point="envs.travel.env:TravelPlannerEnv")


def _travel(config):
    """The travel settings when ``config`` names the travel env, else None."""
    from envs.config import EnvConfig

    if isinstance(config, EnvConfig):
        config.validate()
        return config.travel if config.name == "travel" else None
    if isinstance(config, dict) and config.get("name") == "travel":
        return config.get("travel") or {}
    return None


def _openagi(config):
    """The OpenAGI part of ``config`` (an ``env:`` section's extra keys dropped)."""
    from envs.config import EnvConfig

    if isinstance(config, dict) and "name" in config:
        return {k: v for k, v in config.items() if k not in ("name", "travel")}
    if isinstance(config, EnvConfig):
        from dataclasses import fields

        from envs.openagi.config import OpenAGIEnvConfig

        return OpenAGIEnvConfig(**{f.name: getattr(config, f.name) for f in fields(OpenAGIEnvConfig)})
    return config


def make(config=None, split: str = "train", **kwargs):
    """One env from ``config``, validated: the travel env when it names it
    (:func:`envs.travel.factory.make_env`), else the OpenAGI env with the config's extra
    ``tools`` registered (:func:`envs.openagi.factory.make_env`)."""
    travel = _travel(config)
    if travel is not None:
        from envs.travel.factory import make_env as make_travel

        return make_travel(travel, split)
    from envs.openagi.factory import make_env

    return make_env(_openagi(config), split, **kwargs)


def make_train_and_held_out(config=None, **kwargs):
    """``(train env, held-out env)`` sharing their data; the held-out env holds every task, the
    validation / test ids are :func:`split_ids`. ``device`` / ``build_guard`` are OpenAGI's (where
    hf experts run, the guard of the full suite's one-time build); the travel env needs neither."""
    travel = _travel(config)
    if travel is not None:
        from envs.travel.factory import make_envs as make_travel_envs

        return make_travel_envs(travel)
    from envs.openagi.factory import make_envs

    return make_envs(_openagi(config), **kwargs)


def split_ids(config=None) -> dict[str, list[int]]:
    """The persisted split of ``config``'s env: task / query ids per train, validation, test."""
    travel = _travel(config)
    if travel is not None:
        from envs.travel.factory import split_ids as travel_split

        return travel_split(travel)
    from envs.openagi.factory import as_config
    from envs.openagi.split import load_split

    return load_split(as_config(_openagi(config)).suite)


def describe(config=None) -> list[str]:
    """What :func:`make` would build and load, without loading anything (validates ``config``)."""
    travel = _travel(config)
    if travel is not None:
        from envs.travel.factory import describe_env as describe_travel

        return describe_travel(travel)
    from envs.openagi.factory import describe_env

    return describe_env(_openagi(config))
