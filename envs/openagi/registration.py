"""The OpenAGI env in the env registry (``env.name: openagi``, the default) and in Gymnasium's
(``OpenAGI-Lite-v0``). Its section is :class:`envs.openagi.config.OpenAGIEnvConfig` (its keys at
the top of ``env:``); the callables import the factory (``envs/openagi/factory.py``) when called."""

from __future__ import annotations

from gymnasium.envs.registration import register as gym_register
from gymnasium.envs.registration import registry as gym_registry

from envs.openagi.config import OpenAGIEnvConfig
from envs.openagi.factory import describe_env, make_env, make_envs
from envs.openagi.split import load_split
from envs.registry import EnvSpec, register

GYM_ID = "OpenAGI-Lite-v0"


def make(section: OpenAGIEnvConfig, split: str = "train", **kwargs):
    return make_env(section, split, **kwargs)


def make_train_and_held_out(section: OpenAGIEnvConfig, **kwargs):
    return make_envs(section, **kwargs)


def split_ids(section: OpenAGIEnvConfig) -> dict[str, list[int]]:
    return load_split(section.suite)


def describe(section: OpenAGIEnvConfig) -> list[str]:
    return describe_env(section)


SPEC = register(EnvSpec(name="openagi", section=OpenAGIEnvConfig, make=make,
                        make_train_and_held_out=make_train_and_held_out, split_ids=split_ids, describe=describe,
                        gym_id=GYM_ID))
if GYM_ID not in gym_registry:
    gym_register(id=GYM_ID, entry_point="envs.openagi.factory:gym_entry_point")
