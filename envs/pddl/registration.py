"""The pddl env's :class:`~envs.registry.EnvSpec` (``env.name: pddl``). :data:`envs.registry.BUILTIN_ENVS`
names :data:`SPEC` by its import path, so this module is imported on the first lookup of ``pddl``. Its
``env:`` section is :class:`PddlSection`, the settings under ``env.pddl``
(:class:`envs.pddl.config.PddlEnvConfig`); the callables import the factory when called."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.pddl.config import PddlConfigError, PddlEnvConfig
from envs.registry import EnvSpec


@dataclass
class PddlSection:
    """A run config's ``env:`` section for the pddl env."""

    name: str = "pddl"
    """Which registered env the section is for (envs/registry.py): pddl selects the keys under env.pddl."""
    pddl: PddlEnvConfig = field(default_factory=PddlEnvConfig)
    """The pddl env's settings: the domain and its problems, the grammar, the plan length cap, the shaping."""

    def validate(self, section: str = "env") -> None:
        """Raise :class:`PddlConfigError` naming ``<section>.pddl.<key>`` for settings that cannot run."""
        if not isinstance(self.pddl, PddlEnvConfig):
            raise PddlConfigError(f"bad value for '{section}.pddl': {self.pddl!r}; expected a PddlEnvConfig")
        self.pddl.validate(f"{section}.pddl")


def make(section: PddlSection, split: str = "train", **_unused):
    from envs.pddl.factory import make_env  # deferred: config loading imports this module, not the parser

    return make_env(section.pddl, split)


def make_train_and_held_out(section: PddlSection, **_unused):
    """(``device`` / ``build_guard`` are OpenAGI's: the simulator runs no model.)"""
    from envs.pddl.factory import make_envs  # deferred: see make

    return make_envs(section.pddl)


def split_ids(section: PddlSection) -> dict[str, list[int]]:
    from envs.pddl.factory import split_ids as pddl_split_ids  # deferred: see make

    return pddl_split_ids(section.pddl)


def describe(section: PddlSection) -> list[str]:
    from envs.pddl.factory import describe_env  # deferred: see make

    return describe_env(section.pddl)


def provenance(section: PddlSection, env: Any = None, evaluated: Sequence[str] = (),
               roles: bool = False) -> tuple[dict[str, Any], str]:
    """What a results table was computed on (the results JSON's ``data``, and a line under the table's
    title): the problems, and the plan grammar with its cap -- every result names its grammar."""
    c = section.pddl
    if c.problems is not None:
        problems = f"the problems of {c.problems}"
    else:
        problems = (f"{c.domain} generated with seed {c.seed} ({c.sizes[0]}-{c.sizes[1]} objects; test-long "
                    f"{c.long_sizes[0]}-{c.long_sizes[1]})")
    if c.obfuscation_seed is not None or c.renaming is not None:
        problems += f", renamed ({c.renaming or f'words drawn with seed {c.obfuscation_seed}'})"
    data = {"problems": problems, "grammar": c.grammar, "max_plan_length": c.max_plan_length,
            "test_split": c.test_split, "evaluated": list(evaluated)}
    shown = f"; evaluated: {', '.join(evaluated)}" if evaluated else ""
    return data, f"data: {problems}; grammar {c.grammar} (plans of at most {c.max_plan_length} actions){shown}"


SPEC = EnvSpec(name="pddl", section=PddlSection, make=make, make_train_and_held_out=make_train_and_held_out,
               split_ids=split_ids, describe=describe, provenance=provenance)
