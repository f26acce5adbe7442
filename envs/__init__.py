"""Environments, built from a run's ``env:`` section through the env registry.

This package is the env *interface* (the protocol, the base class, the registry, the checker, the
``env:`` section); the concrete envs are plug-ins above it that it never imports. The shipped ones
are in the registry by import path (:data:`envs.registry.BUILTIN_ENVS`, imported on first lookup):
``openagi`` (``envs/openagi/registration.py``) and ``travel`` (``envs/travel/registration.py``);
importing this package registers their Gymnasium ids by entry-point string
(:data:`envs.registry.BUILTIN_GYM_IDS`: ``OpenAGI-Lite-v0``, ``TravelPlanner-Sandbox-v0``). Every env
implements the interface the trainer, SFT, evaluation and the report use:
:class:`envs.protocol.RLTFEnv` (its optional members answered by :class:`envs.base.RLTFEnvBase`;
checked by :func:`envs.checker.check_rltf_env`).

The ``env:`` section (``envs/config.py``) names the env (``env.name``, default ``openagi``); the
rest of it is that env's own keys. :func:`make` builds one env of a split,
:func:`make_train_and_held_out` the pair a training run needs, :func:`split_ids` says the
persisted split and :func:`describe` what would be loaded, without loading it. Each takes a
section object (``OpenAGIEnvConfig(...)``, ``TravelSection(...)``), a mapping of its keys
(``{"name": "travel", "travel": {"days": [3]}}``; no ``name``: OpenAGI's keys) or ``None`` (the
default env's defaults), validates it and calls the registered env's own function.
``gym.make("OpenAGI-Lite-v0", config=...)`` builds the same OpenAGI env.
"""

from gymnasium.envs.registration import register as gym_register
from gymnasium.envs.registration import registry as gym_registry

from envs import registry
from envs.config import as_section, validate_section

for _gym_id, _entry_point in registry.BUILTIN_GYM_IDS.items():
    if _gym_id not in gym_registry:
        gym_register(id=_gym_id, entry_point=_entry_point)


def _section(config):
    section = as_section(config)
    validate_section(section)
    return section, registry.spec_of_section(section)


def make(config=None, split: str = "train", **kwargs):
    """One env of ``split`` (train, validation, test or all) from ``config``, validated. Keywords go to
    the env's own factory (OpenAGI: ``device`` / ``build_guard``)."""
    section, spec = _section(config)
    return spec.make(section, split, **kwargs)


def make_train_and_held_out(config=None, **kwargs):
    """``(train env, held-out env)`` sharing their data; the held-out env holds every task, the
    validation / test ids are :func:`split_ids`. ``device`` / ``build_guard`` are OpenAGI's (where
    hf experts run, the guard of the full suite's one-time build); other envs ignore them."""
    section, spec = _section(config)
    return spec.make_train_and_held_out(section, **kwargs)


def split_ids(config=None) -> dict[str, list[int]]:
    """The persisted split of ``config``'s env: task ids per train, validation, test."""
    section, spec = _section(config)
    return spec.split_ids(section)


def describe(config=None) -> list[str]:
    """What :func:`make` would build and load, without loading anything (validates ``config``)."""
    section, spec = _section(config)
    return spec.describe(section)


def evaluation_warnings(config, schemas) -> list[str]:
    """What a dry run warns about evaluating ``schemas`` on ``config``'s env (one line each; the env's
    :attr:`~envs.registry.EnvSpec.evaluation_warnings`, none by default)."""
    section, spec = _section(config)
    return list(spec.evaluation_warnings(section, list(schemas))) if spec.evaluation_warnings else []
