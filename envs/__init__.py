"""Environments. Importing this package registers ``OpenAGI-Lite-v0`` with Gymnasium.

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


def make(config=None, split: str = "train", **kwargs):
    """One env from ``config`` (an ``OpenAGIEnvConfig`` or a mapping of its fields), validated,
    with the config's extra ``tools`` registered; see :func:`envs.openagi.factory.make_env`."""
    from envs.openagi.factory import make_env

    return make_env(config, split, **kwargs)


def make_train_and_held_out(config=None, **kwargs):
    """``(train env, held-out env)`` sharing one registry; see :func:`envs.openagi.factory.make_envs`."""
    from envs.openagi.factory import make_envs

    return make_envs(config, **kwargs)


def describe(config=None) -> list[str]:
    """What :func:`make` would build and load, without loading anything (validates ``config``)."""
    from envs.openagi.factory import describe_env

    return describe_env(config)
