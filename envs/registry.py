"""The env registry: env name -> how to build it, validate its config section and describe it.

A run's ``env:`` section names its env (``env.name``); :mod:`envs` looks the name up here and
never dispatches on it itself. Each env registers one :class:`EnvSpec` when :mod:`envs` is
imported (``envs/openagi/registration.py``, ``envs/travel/registration.py``); an env defined
elsewhere (a plugin, a test) calls :func:`register` with its own::

    register(EnvSpec(name="sorting", section=SortingSection, make=make_env,
                     make_train_and_held_out=make_envs, split_ids=split_ids, describe=describe_env))

The spec's callables take the env's *section* (an instance of ``spec.section``: the dataclass of
the run config's ``env:`` section for this env, with a ``name`` field and this env's keys, and a
``validate(prefix)`` method raising ``ValueError`` naming the bad key); registering imports
nothing heavy, so the callables should import the env's modules when called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EnvSpec:
    """How one env is built from its ``env:`` section (every callable takes the section first)."""

    name: str
    """What ``env.name`` says to select this env."""
    section: type
    """The dataclass of this env's ``env:`` section: a ``name`` field (default :attr:`name`), this env's
    own keys, and ``validate(prefix: str)`` raising ``ValueError`` naming ``<prefix>.<key>``."""
    make: Callable[..., Any]
    """``make(section, split="train", **kwargs) -> env``: one env of a split (train, validation, test, all)."""
    make_train_and_held_out: Callable[..., tuple[Any, Any]]
    """``make_train_and_held_out(section, **kwargs) -> (train env, held-out env)``; the held-out env
    holds every task (validation / test ids come from :attr:`split_ids`). Keywords an env does not
    use (OpenAGI's ``device``, ``build_guard``) are accepted and ignored."""
    split_ids: Callable[[Any], dict[str, list[int]]]
    """``split_ids(section) -> {"train": ids, "validation": ids, "test": ids}``: the persisted split."""
    describe: Callable[[Any], list[str]]
    """``describe(section) -> lines``: what :attr:`make` would build and load, loading nothing."""
    gym_id: str | None = None
    """The Gymnasium id the env is also registered under (``gym.make``), if any."""

    def __post_init__(self):
        if not dataclasses.is_dataclass(self.section):
            raise TypeError(f"env {self.name!r}: section must be a dataclass, got {self.section!r}")
        names = {f.name: f for f in dataclasses.fields(self.section)}
        if "name" not in names or names["name"].default != self.name:
            raise TypeError(f"env {self.name!r}: its section {self.section.__name__} needs a field "
                            f"name: str = {self.name!r}")


_SPECS: dict[str, EnvSpec] = {}


def register(spec: EnvSpec, *, replace: bool = False) -> EnvSpec:
    """Add ``spec`` under ``spec.name`` (an existing name raises unless ``replace``)."""
    if spec.name in _SPECS and not replace and _SPECS[spec.name] != spec:
        raise ValueError(f"an env named {spec.name!r} is already registered ({_SPECS[spec.name].section.__name__})")
    _SPECS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove the env ``name`` (a test's own env, when the test is done)."""
    _SPECS.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered env names, in registration order."""
    return tuple(_SPECS)


def spec(name: str) -> EnvSpec:
    """The spec of the env ``name``; an unknown name raises ``KeyError`` listing the registered ones."""
    if name not in _SPECS:
        raise KeyError(f"no env named {name!r}; registered: {', '.join(repr(n) for n in _SPECS)}")
    return _SPECS[name]


def spec_of_section(section: Any) -> EnvSpec | None:
    """The spec whose section class ``section`` is an instance of, else None."""
    for s in _SPECS.values():
        if type(section) is s.section:
            return s
    for s in _SPECS.values():
        if isinstance(section, s.section):
            return s
    return None
